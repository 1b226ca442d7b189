"""What ``--explain`` says beside a prediction: NCCL's channels, how the engine aggregates them, and why
the engine and NCCL's closed form differ where they do.

Channels. NCCL's topology search finds ``g`` channels (``sim.nccl.machine``'s graphs); at run time it
uses more: ``ncclTopoPostset`` (``src/graph/connect.cc``) duplicates every ring and tree
(``nChannels = min(MAXCHANNELS, 2 * nChannels)``), and on Hopper and later across nodes, with fast
intra-node rings (bwIntra > 45 GB/s), doubles again up to 16. NVLS runs its own ``NVLS_NCHANNELS``.
That count is what ``NCCL_DEBUG=INFO`` prints as "coll channels"; the tuner's bandwidth is the search's
``g x bw`` (the duplicates share the same links).

The engine does not simulate NCCL's channels one by one: channels that cross the same links are
aggregated into one flow at the links' effective bandwidth (same bytes, same links, the same time once
the pipeline is full); across nodes it runs one channel per NIC port, so that each crosses its own NIC.

Differences. The engine's time minus the tuner's splits exactly into three terms, four for a tree across nodes:

* ``latency``: the engine's latency term minus the tuner's (the same formula for NCCL's algorithms);
* ``tree depth lag``: what a tree/Simple across nodes adds per level and chunk
  (:func:`sim.nccl.execution.tree_chunk_lag_us`), part of the engine's latency term but not of NCCL's;
* ``link efficiency``: the busiest link's busy time (the data at that link's effective bandwidth)
  minus the tuner's ``size / bandwidth``;
* ``pipeline fill and contention``: the engine's data term minus the busiest link's busy time (the
  time that link waits: for the pipeline to fill and drain, and for transfers queued on other links);
  ``the channels' kernel cap`` instead where NCCL's per-channel cap sets the data term
  (:func:`sim.nccl.execution.kernel_cap_us`: fewer channels than the links need under NCCL_MAX_NCHANNELS
  or NCCL_MAX_CTAS, perChMaxTreeBw), which NCCL's own estimate counts with the search's channels.

>>> from sim.presets import load_topology
>>> nccl_runtime_channels(load_topology("dgx-h100"), "ring")   # 12 rings found at 30 GB/s, duplicated
(24, 12)
"""
from __future__ import annotations

import math

from . import config
from .constants import NCCL_ALGORITHMS
from .execution import mesh_cycles
from .machine import graph_for, machine, runtime_channels

DIFFERENCE_NOTE = 0.15    # name the terms when the engine and the tuner differ by more than this share


def nccl_runtime_channels(topo, algorithm: str) -> tuple[int, int] | None:
    """(channels NCCL runs, channels its search found) for ``algorithm`` on ``topo``
    (:func:`sim.nccl.machine.runtime_channels`); None for algorithms NCCL does not have (or p2p, whose
    channels are per peer)."""
    if algorithm not in NCCL_ALGORITHMS or algorithm == "p2p":
        return None
    m = machine(topo)
    return runtime_channels(m, algorithm), graph_for(m, algorithm).nchannels


def channel_lines(r, topo) -> list[str]:
    """The --explain lines on channels: NCCL's, and the engine's aggregation of them."""
    got = nccl_runtime_channels(topo, r.algorithm)
    spread = r.explain.get("channels_spread_over_nics")
    mesh = r.explain.get("mesh_rings")   # one node's direct NVLink mesh: rings on different GPU pairs
    total = len(mesh_cycles(len(topo.hosts[0])))
    how = (f"the engine runs {mesh} rings, every order of the node's GPUs, which between them load each NVLink "
           f"pair alike as NCCL's rings do" if mesh and mesh == total else
           f"the engine runs {mesh} of the node's {total} rings (each paired with its reverse), on the NVLink "
           f"pairs they use" if mesh else
           f"the engine runs {r.nchannels} channel(s), one per NIC port, each carrying NCCL's channels through "
           f"its NIC" if spread else
           f"the engine aggregates them into {r.nchannels} flow(s) at the links' effective bandwidth "
           f"(NCCL's channels cross the same links: same bytes, same time once the pipeline is full)")
    if got is None:
        return [f"#     channels: {r.nchannels} simulated ({r.algorithm} is not an NCCL algorithm with channels of its own)"]
    runs, found = got
    why = (f"NVLS_NCHANNELS; its search finds {found} heads" if r.algorithm.startswith("nvls") else
           f"its search finds {found}; NCCL duplicates them at init, connect.cc ncclTopoPostset")
    from .tuner import nvls_runs
    cfg = config.current()
    nvls = r.algorithm.startswith("nvls")
    # the count the tuner times (NVLS: its CTA bounds, and from 2.28 the rings' across nodes), not a second reading
    bounded = nvls_runs(r.algorithm, machine(topo), cfg)[0] if nvls else cfg.channels(runs)
    if bounded != runs:   # NCCL_MIN/MAX_NCHANNELS or CTAs move what the machine would run
        names = [k for k, _ in cfg.env if k in config.CHANNEL_VARIABLES]
        distinct = runs if nvls else cfg.distinct_channels(runs)
        dup = f": copies of the first {distinct}, on {'its NIC' if distinct == 1 else 'their NICs'}" if distinct < bounded and distinct < runs else ""
        return [f"#     NCCL channels: {bounded}{dup} ({' and '.join(names) or 'the channel bounds'}; {runs} on this machine: "
                f"{why}); {how}"]
    return [f"#     NCCL channels: {runs} channels on this machine ({why}); {how}"]


def difference_lines(r, topo) -> list[str]:
    """When the engine and NCCL's closed form differ by more than :data:`DIFFERENCE_NOTE`, the term that
    makes the difference, with its size (module docstring); else nothing."""
    tuner = r.explain.get("tuner_time_us")
    if tuner is None or not math.isfinite(tuner) or tuner <= 0 or r.protocol == "ideal":
        return []
    diff = r.time_us - tuner
    if abs(diff) <= DIFFERENCE_NOTE * tuner:
        return []
    from .tuner import tuner_terms
    t = tuner_terms(r.collective, r.nbytes, topo, r.algorithm, r.protocol)
    lat = r.explain.get("latency_us", 0.0)
    data = r.explain.get("bandwidth_term_us", r.time_us - lat)
    tuner_bw = t.time_us - t.latency_us
    other = r.time_us - lat - data                   # launch and what else the model adds outside both terms
    lag = r.explain.get("tree_lag_us", 0.0)   # in the latency term, but not NCCL's: said apart
    terms = {"latency": lat - lag - t.latency_us + other}
    if lag:
        terms["tree depth lag"] = lag
    busiest = max(r.link_busy_us.values()) if r.link_busy_us else None
    cap = r.explain.get("kernel_cap_us", 0.0)
    if busiest is not None and cap and cap >= data * (1 - 1e-9) and cap > busiest:
        # NCCL's per-channel kernel cap sets the data term (a channel bound such as NCCL_MAX_NCHANNELS, or
        # perChMaxTreeBw), not the links: say so rather than call the wait pipeline fill
        terms["link efficiency"] = busiest - tuner_bw
        terms["the channels' kernel cap"] = data - busiest
    elif busiest is not None and busiest <= data * (1 + 1e-9):
        terms["link efficiency"] = busiest - tuner_bw
        terms["pipeline fill and contention"] = data - busiest
    else:
        terms["link efficiency, pipeline fill and contention"] = data - tuner_bw
    name, size = max(terms.items(), key=lambda kv: abs(kv[1]))
    parts = ", ".join(f"{k} {v:+.1f} us" for k, v in terms.items())
    line = (f"#     engine vs NCCL's closed form: {r.time_us:.1f} us vs {tuner:.1f} us ({diff / tuner:+.0%}); "
            f"mostly {name} ({size:+.1f} us). Terms: {parts}")
    return [line]


__all__ = ["DIFFERENCE_NOTE", "channel_lines", "difference_lines", "nccl_runtime_channels"]
