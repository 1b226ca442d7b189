"""What the algorithms must show on the engine: SHARP moves S per endpoint, trees have log-depth latency,
NVLS moves (k+1)/k S, and algorithms that cannot run on a topology say why."""
import json
import math

import pytest

import sim
from sim.algorithms import candidates, why_not
from sim.presets import load_topology

SWITCH = "switch:n=8,bandwidth_GBps=100,latency_us=1,sharp=1"
GIB4 = 4 << 30


def test_collnet_on_one_switch_is_2_n_minus_1_over_n_faster_than_ring():
    ring = sim.simulate("all_reduce", GIB4, SWITCH, algorithm="ring", protocol="ideal")
    sharp = sim.simulate("all_reduce", GIB4, SWITCH, algorithm="collnet_direct", protocol="ideal")
    assert sharp.pipeline == 128  # the api's P* = sqrt((d-1) S / (B alpha)) = 207, capped
    assert ring.time_us / sharp.time_us == pytest.approx(1.75, rel=0.03)
    # pipelined S/B: S/B + one piece (S/128) + two half-latency hops + one hop for the last piece back
    S_B = GIB4 / 100e3
    assert sharp.time_us == pytest.approx(S_B * (1 + 1 / 128) + 1.0, rel=1e-6)
    # per-link bytes: S up and S down per endpoint (a ring moves 2(n-1)/n S)
    for r in range(8):
        assert sharp.link_bytes[f"gpu{r}->switch"] == GIB4
        assert sharp.link_bytes[f"switch->gpu{r}"] == GIB4
    assert ring.link_bytes["gpu0->switch"] == pytest.approx(GIB4 * 2 * 7 / 8)


def test_the_trace_shows_S_per_endpoint(tmp_path):
    r = sim.simulate("all_reduce", 1 << 20, SWITCH, algorithm="collnet_chain", protocol="ideal", trace=True)
    path = tmp_path / "t.json"
    r.trace.save(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    for rank in range(8):
        up = sum(e["args"]["bytes"] for e in events if e["pid"] == f"rank {rank}" and e["tid"] == "to switch switch")
        down = sum(e["args"]["bytes"] for e in events if e["pid"] == "switch switch" and e["tid"] == f"to rank {rank}")
        assert up == down == 1 << 20


@pytest.mark.parametrize("n", [8, 16, 32, 64])
def test_tree_latency_is_logarithmic_and_ring_linear(n):
    topo = f"fully-connected:n={n},bandwidth_GBps=100,latency_us=1"
    tree = sim.simulate("all_reduce", 8, topo, algorithm="tree", protocol="ideal")
    ring = sim.simulate("all_reduce", 8, topo, algorithm="ring", protocol="ideal")
    # one 1 us hop per step, plus serialising 4 (tree halves) or 8/n (ring shards) bytes per hop
    assert tree.steps == 2 * math.ceil(math.log2(n))
    assert tree.time_us == pytest.approx(tree.steps * (1 + 4 / 100e3))
    assert ring.time_us == pytest.approx(2 * (n - 1) * (1 + 8 / n / 100e3))


def test_tree_vs_ring_growth_from_8_to_64():
    t = {(a, n): sim.simulate("all_reduce", 8, f"fully-connected:n={n},bandwidth_GBps=100,latency_us=1",
                              algorithm=a, protocol="ideal").time_us for a in ("tree", "ring") for n in (8, 64)}
    assert t["tree", 64] / t["tree", 8] < 2.5
    assert t["ring", 64] / t["ring", 8] > 7


def test_nvls_moves_k_plus_1_over_k_S_and_reaches_its_bound():
    S = 8 << 30
    r = sim.simulate("all_reduce", S, "dgx-h100", algorithm="nvls", protocol="ideal")
    assert r.link_bytes["h0.gpu0->h0.nvswitch"] == S * 9 / 8
    assert r.link_bytes["h0.nvswitch->h0.gpu0"] == S * 9 / 8
    # algbw = 450 GB/s * 8/9 (sjeaugey's NVLS formula), the engine within 2% (pipeline fill)
    assert r.algbw_GBps == pytest.approx(450 * 8 / 9, rel=0.02)
    ring = sim.simulate("all_reduce", S, "dgx-h100", algorithm="ring", protocol="ideal")
    assert ring.algbw_GBps / r.algbw_GBps == pytest.approx((8 / 14) / (8 / 9), rel=0.02)


def test_collnet_sends_S_over_ppn_per_nic():
    S = 1 << 30
    r = sim.simulate("all_reduce", S, "dgx-h100:nodes=4,sharp=1", algorithm="collnet_direct", protocol="ideal")
    for k in range(8):
        assert r.link_bytes[f"h0.nic{k}->leaf{k}"] == S / 8
        assert r.link_bytes[f"leaf{k}->h0.nic{k}"] == S / 8


def test_the_switch_reduction_unit_is_honoured():
    fast = sim.simulate("all_reduce", 1 << 30, "switch:n=8,sharp=1", algorithm="collnet_direct", protocol="ideal")
    slow = sim.simulate("all_reduce", 1 << 30, "switch:n=8,sharp=1,reduce_bandwidth_GBps=400", algorithm="collnet_direct",
                        protocol="ideal")
    # 8 endpoints x S go through one 400 GB/s reduction unit: 8 S / 400 instead of S / 100
    assert slow.time_us == pytest.approx(fast.time_us * 2, rel=0.01)


def test_the_window_lets_pipelined_phases_share_links():
    import dataclasses

    from sim.algorithms import build_program
    from sim.engine import simulate_program
    topo = load_topology("dgx-h100")
    p = build_program("nvls", "all_reduce", 8, topology=topo, pipeline=64)
    assert p.params["window"] == 8  # NCCL_STEPS pieces in flight per connection
    windowed = simulate_program(p, topo, 1 << 30).time_us
    free = dataclasses.replace(p, params={**p.params, "window": 0})
    # without flow control every piece's reduce-scatter queues ahead of the all-gather: close to 2x slower
    assert simulate_program(free, topo, 1 << 30).time_us > 1.6 * windowed


def test_requirements_say_why_not():
    fc = load_topology("fully-connected:n=8")
    assert "needs an NVSwitch with nvls=1" in why_not("nvls", "all_reduce", 8, None)
    assert "no NVSwitch with nvls=1" in why_not("nvls", "all_reduce", 8, fc)
    assert "no IB SHARP switch" in why_not("collnet_direct", "all_reduce", 8, fc)
    assert "reduce=sharp" in why_not("collnet_chain", "all_reduce", 8, None)
    assert "nvls_tree" in why_not("nvls", "all_reduce", 16, load_topology("dgx-h100:nodes=2"))
    assert "one node" in why_not("nvls_tree", "all_reduce", 8, load_topology("dgx-h100"))
    assert "does not implement" in why_not("tree", "all_gather", 8, fc)
    assert candidates("all_reduce", 8, fc) == ["ring", "tree", "recursive_hd"]
    assert set(candidates("all_reduce", 16, load_topology("dgx-h100:nodes=2,sharp=1"))) == {
        "ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "recursive_hd", "hierarchical_ring"}
    with pytest.raises(sim.CollsimError, match="nvls=1"):
        sim.simulate("all_reduce", 1 << 20, "ring:n=4", algorithm="nvls", protocol="ideal")


def test_simulate_all_shows_only_what_can_run(cli):
    code, out, _ = cli("simulate", "-t", "switch:n=8,sharp=1", "-a", "all", "-p", "ideal", "-b", "1M", "-e", "1M",
                       "--format", "json")
    assert code == 0
    algos = [r["algorithm"] for r in json.loads(out)["results"]]
    assert algos == ["ring", "tree", "collnet_direct", "collnet_chain", "recursive_hd"]


@pytest.mark.parametrize("path", ["examples/topologies/dgx1-hybrid-cube-mesh.yaml", "examples/topologies/torus-2d-4x4.yaml"])
def test_graph_files_embed_rings_and_trees(path):
    topo = load_topology(path)
    assert topo.nranks in (8, 16)
    for algo in ("ring", "tree", "recursive_hd"):
        r = sim.simulate("all_reduce", 1 << 24, topo, algorithm=algo, protocol="ideal")
        assert r.time_us > 0
    assert "nvls=1" in why_not("nvls", "all_reduce", topo.nranks, topo)
    assert "SHARP" in why_not("collnet_direct", "all_reduce", topo.nranks, topo)


def test_dgx1_ring_in_rank_order_crosses_pcie():
    topo = load_topology("examples/topologies/dgx1-hybrid-cube-mesh.yaml")
    assert [topo.links[i].dst for i in topo.route(3, 4)] == ["pcie1", "cpu0", "cpu1", "pcie2", "gpu4"]
    assert [topo.links[i].dst for i in topo.route(0, 3)] == ["gpu3"]
    assert topo.path_bandwidth_GBps(0, 3) == 50.0
