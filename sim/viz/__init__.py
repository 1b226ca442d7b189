"""Pictures: topology drawings, chunk diagrams, link timelines and heatmaps, bandwidth-vs-size plots.

Every function returns a matplotlib ``Figure`` (not a pyplot figure: nothing global is kept), so it
works in scripts (``fig.savefig("x.png")``), the CLI and notebooks (``%matplotlib inline``, then a
cell whose last value is the Figure shows it once).

>>> import sim
>>> from sim.viz import plot_chunk_steps
>>> fig = plot_chunk_steps(sim.build_program("ring", "all_gather", 4), layout="circle")
"""
from .bandwidth import crossover_nbytes, plot_bandwidth, sweep
from .chunks import animate_chunks, plot_chunk_steps, plot_collectives, program_states
from .links import link_windows, plot_link_heatmap, plot_link_timeline
from .style import size_axis, size_label
from .topology_plot import plot_topology

__all__ = ["plot_topology", "plot_chunk_steps", "plot_collectives", "animate_chunks", "program_states", "plot_link_timeline",
           "plot_link_heatmap", "link_windows", "plot_bandwidth", "sweep", "crossover_nbytes", "size_axis",
           "size_label"]
