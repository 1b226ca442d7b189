"""sim.viz: the pictures show the engine's run and the verifier's meaning, with labelled axes and units."""
import numpy as np
import pytest
from matplotlib.figure import Figure

import sim
from sim.errors import CollsimError
from sim.grade.torus import torus2d
from sim.viz import (animate_chunks, crossover_nbytes, link_windows, plot_bandwidth, plot_chunk_steps,
                     plot_collectives, plot_link_heatmap, plot_link_timeline, plot_topology, program_states, size_label,
                     sweep)
from sim.viz.chunks import rank_set_label


def test_program_states_follow_the_ring_all_reduce():
    p = sim.build_program("ring", "all_reduce", 4)
    st = program_states(p)
    assert st.shape == (7, 4, 4)
    assert (st[0] == np.array([[1 << r] * 4 for r in range(4)])).all()          # everyone holds its own input
    assert (st[3].diagonal(offset=0) != 15).all()                                 # after reduce-scatter: shard r+1 is done
    assert all(st[3][r][(r + 1) % 4] == 15 for r in range(4))
    assert (st[-1] == 15).all()


def test_program_states_draw_wrong_programs_instead_of_refusing():
    p = sim.build_program("ring", "all_reduce", 4)
    keep = np.ones(p.nops, bool)
    keep[-1] = False
    st = program_states(p.with_ops(keep))
    assert (st[-1] != 15).sum() == 1


def test_rank_set_labels():
    assert rank_set_label(0, 4) == "" and rank_set_label(0b1111, 4) == "Σ" and rank_set_label(0b0111, 4) == "0-2"
    assert rank_set_label(0b1010, 4) == "1,3" and rank_set_label(0b100, 4) == "2"


@pytest.mark.parametrize("layout", ["grid", "circle"])
def test_chunk_diagram_has_a_panel_per_step(layout):
    p = sim.build_program("ring", "all_reduce", 4)
    fig = plot_chunk_steps(p, layout=layout)
    titled = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titled == ["start"] + [f"step {s}: 4 transfers" for s in range(6)]
    with pytest.raises(CollsimError, match="rounds 0..5"):
        plot_chunk_steps(p, rounds=[6])


def test_chunk_diagram_refuses_unreadable_sizes():
    with pytest.raises(CollsimError, match="unreadable"):
        plot_chunk_steps(sim.build_program("ring", "all_reduce", 40))


def test_collectives_overview_and_animation():
    fig = plot_collectives(nranks=4)
    assert len(fig.axes) == 12
    anim = animate_chunks(sim.build_program("ring", "all_gather", 3), dpi=40, size=2)
    html = anim.to_jshtml()
    assert html.count("data:image/png;base64") == 3 or "frames" in html     # start + 2 steps


@pytest.mark.parametrize("spec,algo", [("ring:n=4", "ring"), ("switch:n=8", "ring"), ("switch:n=8,sharp=1", "collnet_direct"),
                                       ("switch:n=8", "tree"), ("fully-connected:n=5", "ring"),
                                       ("dgx-h100:nodes=2", "tree")])
def test_link_windows_replay_the_engine_exactly(spec, algo):
    r = sim.simulate("all_reduce", 4 << 20, spec, algorithm=algo, protocol="ideal", trace=True)
    w = link_windows(r, spec)
    assert w.exact and w.max_error_us < 1e-6 * max(r.time_us, 1)
    busy = dict(zip(w.labels, w.busy_us()))
    assert busy.keys() == r.link_busy_us.keys()
    for k, v in r.link_busy_us.items():   # occupancy = serialisation, or more behind a slower upstream hop
        assert busy[k] == pytest.approx(v, rel=1e-9) if spec.startswith(("ring", "switch", "fully")) else busy[k] >= v * (1 - 1e-9)
    u = w.utilisation(40)
    assert u.max() <= 1 + 1e-9 and (u.sum(axis=1) * w.time_us / 40) == pytest.approx(w.busy_us(), rel=1e-9)


def test_nccl_protocol_runs_fall_back_to_transfer_spans_and_say_so():
    r = sim.simulate("all_reduce", 4 << 20, "switch:n=8", algorithm="ring", protocol="Simple", trace=True)
    w = link_windows(r, "switch:n=8")
    assert set(w.labels) == set(r.link_busy_us)
    if not w.exact:   # the NCCL-protocol path adds a latency term the plain replay does not know
        assert "issue to arrival" in plot_link_timeline(r, "switch:n=8").axes[0].get_title()
    for b, e in zip(w.begin, w.end):
        assert (e >= b).all() and e.max() <= r.time_us + 1e-6


def test_contention_shows_in_the_heatmap_data():
    # collsim's rank-order ring on a 4x4 torus routes 3->4 and 15->0 both over gpu3->gpu0
    torus = torus2d(4, 4)
    r = sim.simulate("all_reduce", 64 << 20, torus, algorithm="ring", protocol="ideal", trace=True)
    w = link_windows(r, torus)
    busy = dict(zip(w.labels, w.busy_us()))
    assert busy["gpu3->gpu0"] == pytest.approx(2 * busy["gpu0->gpu1"])
    assert w.max_error_us < 1e-6 * r.time_us


def test_timeline_and_heatmaps_label_their_axes_with_units():
    r = sim.simulate("all_reduce", 1 << 20, "ring:n=4", algorithm="ring", protocol="ideal", trace=True)
    fig = plot_link_timeline(r)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (µs)" and "link" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gpu0->gpu1", "gpu1->gpu2", "gpu2->gpu3", "gpu3->gpu0"]
    for kind in ("time", "matrix"):
        hm = plot_link_heatmap(r, kind=kind)
        assert any("utilisation" in a.get_ylabel() for a in hm.axes)           # the colour bar says what colour means
    with pytest.raises(CollsimError, match="trace=True"):
        plot_link_timeline(sim.simulate("all_reduce", 1 << 20, "ring:n=4", algorithm="ring", protocol="ideal"))


def test_bandwidth_plot_and_crossover():
    sizes = [1 << k for k in range(10, 31, 4)]
    ring = sweep("all_reduce", "switch:n=16,bandwidth_GBps=25,latency_us=5", sizes, "ring", "ideal")
    tree = sweep("all_reduce", "switch:n=16,bandwidth_GBps=25,latency_us=5", sizes, "tree", "ideal")
    x = crossover_nbytes(tree, ring)        # the ring overtakes the tree somewhere between 1 MiB and 1 GiB
    assert 1 << 20 < x < 1 << 30
    assert ring[-1].busbw_GBps == pytest.approx(25, rel=0.01)
    fig = plot_bandwidth({"ring": ring, "tree": tree, "measured": [{"nbytes": 1 << 20, "busbw_GBps": 3.0}]}, peak_GBps=25)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "bus bandwidth (GB/s, decimal)" and ax.get_xlabel().startswith("message size (bytes")
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "1K" in labels and "1M" in labels and "1G" in labels
    with pytest.raises(CollsimError, match="unknown metric"):
        plot_bandwidth({"ring": ring}, metric="speed")


def test_size_labels_and_topology_figure():
    assert size_label(1 << 20) == "1 MiB" and size_label(1536) == "1.5 KiB" and size_label(8) == "8 B"
    assert isinstance(plot_topology(sim.load_topology("switch:n=4,sharp=1")), Figure)
