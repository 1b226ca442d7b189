"""The engine under NCCL's protocols: latency term + data movement, channels over NICs, chunk
pipelines with steady-state extrapolation; ``ideal`` stays the pure latency-bandwidth model."""
import pytest

import sim
import sim.nccl.execution as nr
from sim.collectives import get_collective
from sim.nccl import calibration
from sim.nccl.tuner import tuner_terms
from sim.presets import load_topology
from sim.verify import verify

AR = get_collective("all_reduce")
C1 = "dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100"
MNNVL_TREE = "gb200-nvl72:nodes=2,gpus_per_node=32,nics_per_node=32,nic_gbps=800,fabric=roce"   # two 32-GPU NVLink domains


def test_ideal_is_still_the_latency_bandwidth_model():
    r = sim.simulate("all_reduce", 1 << 30, "ring:n=8,bandwidth_GBps=100,latency_us=1", algorithm="ring", protocol="ideal")
    assert r.time_us == pytest.approx(14 * (1 + 2 ** 30 / 8 / 100e3), rel=1e-12)


def test_simple_on_a_textbook_ring_is_latency_term_plus_bandwidth_term():
    topo = "ring:n=8,bandwidth_GBps=100,latency_us=1"
    r = sim.simulate("all_reduce", 1 << 30, topo, algorithm="ring", protocol="Simple")
    t = tuner_terms("all_reduce", 1 << 30, load_topology(topo), "ring", "Simple")
    # each GPU is its own node: 14 network-class hops at max(NCCL's 4.0, wire 1.0) us, x1.4 ring plateau
    assert t.latency_us == pytest.approx(1.4 * (8.4 + 14 * 4.0))
    assert r.time_us == pytest.approx(t.latency_us + 2 * 7 / 8 * 2 ** 30 / 100e3, rel=1e-6)
    assert r.explain["latency_us"] == pytest.approx(t.latency_us)


def test_payload_share_follows_nccl_protocol_bandwidths():
    h100 = load_topology("dgx-h100")
    assert nr.payload_share(AR, h100, "ring", "Simple") == 1.0
    assert nr.payload_share(AR, h100, "ring", "LL") == pytest.approx(141.0 / 360.0)      # llMaxBw cap
    assert nr.payload_share(AR, h100, "ring", "LL128") == pytest.approx(0.92)
    assert nr.payload_share(AR, h100, "recursive_hd", "LL") == 0.5                        # not NCCL's: wire format


def test_link_efficiencies_come_from_nccls_constants():
    h100, e1 = load_topology("dgx-h100"), load_topology("pcie:gpus=2,gen=3,p2p=0")
    nvl = next(l for l in h100.links if l.kind == "nvlink")
    assert nr.link_efficiency(h100, nvl) == pytest.approx(20.6 / 25)
    assert nr.link_efficiency(h100, nvl, nvls="nvls") == pytest.approx(20.6 / 25 * 0.85)
    assert nr.link_efficiency(e1, e1.links[0]) == pytest.approx(0.75 * calibration.value("host_bounce_duplex_efficiency"))
    ring = load_topology("ring:n=4")
    assert nr.link_efficiency(ring, ring.links[0]) == 1.0
    eff = nr.effective_topology(h100)
    assert [eff.route(0, 5)] == [h100.route(0, 5)]               # same routes as the real topology


@pytest.mark.parametrize("spec,size,busbw", [
    ("dgx-a100", 16 << 30, 240.0),                               # ring: 12 NVLinks x 20 GB/s
    ("gb200-nvl72:gpus_per_node=8", 16 << 30, 18 * 40.1 * 0.74 * 8 / 9 * 1.75),   # NVLS: (n+1)/n S per GPU
    ("pcie:gpus=2,gen=3,p2p=0", 1 << 30, 16 * 0.75 * calibration.value("host_bounce_duplex_efficiency") / 2),  # host bounce, shared uplink
])
def test_large_message_bandwidth(spec, size, busbw):
    r = sim.simulate("all_reduce", size, spec)
    assert r.busbw_GBps == pytest.approx(busbw, rel=0.02)


def test_channel_order_rotates_each_host():
    topo = load_topology(C1)
    orders = [nr.channel_order(topo, c, 4) for c in range(4)]
    assert [o[:8].tolist()[0] for o in orders] == [1, 3, 5, 7]    # enter at GPU 2c+1, leave at 2c: NIC c
    assert all(sorted(o.tolist()) == list(range(16)) for o in orders)
    for c, o in enumerate(orders):   # the ring leaves host 0 from its last position through NIC c
        nics = {topo.links[i].dst for i in topo.route(int(o[7]), int(o[8])) if "nic" in topo.links[i].dst}
        assert nics == {f"h0.nic{c}", f"h1.nic{c}"}


@pytest.mark.parametrize("nodes", [2, 4, 6])
def test_ring_crossings_stay_on_one_rail_with_a_nic_per_gpu(nodes):
    # DGX H100: one NIC per GPU, so a ring rotated alike on every host would leave through NIC c and enter
    # through NIC c+1 (through the spine); NCCL keeps both ends of a crossing on one NIC (one rail)
    topo = load_topology(f"dgx-h100:nodes={nodes}")
    for c in range(8):
        o = nr.channel_order(topo, c, 8, ring=True)
        assert sorted(o.tolist()) == list(range(8 * nodes))
        for h in range(nodes):   # every crossing, the closing one included (an even host count)
            src, dst = int(o[8 * h + 7]), int(o[(8 * h + 8) % (8 * nodes)])
            hops = [topo.links[i].dst for i in topo.route(src, dst)]
            assert "spine" not in hops and len({x for x in hops if ".nic" in x and x.startswith("h")}) == 2, hops


@pytest.mark.parametrize("nodes", [2, 4])
def test_an_oversubscribed_spine_does_not_slow_rings_under_one_leaf(nodes):
    # every node under the same rail leaves (nodes_per_leaf 32): a rail-aligned ring never uses the spine
    base, over = (sim.simulate("all_gather", 1 << 30, f"dgx-h100:nodes={nodes}{extra}", algorithm="ring", protocol="Simple")
                  for extra in ("", ",oversubscription=4"))
    assert over.time_us == pytest.approx(base.time_us, rel=1e-9)


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=2", "dgx-h100:nodes=3", "gh200-4:nodes=4,nics_per_node=4,nic_gbps=200"])
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_rail_aligned_spread_rings_still_compute_the_collective(spec, collective):
    topo = load_topology(spec)
    p = nr.spread_program("ring", get_collective(collective), topo, topo.hardware.nic_ports, 2, root=3)
    assert verify(p).ok


@pytest.mark.parametrize("algorithm,collective", [("ring", "all_reduce"), ("tree", "all_reduce"),
                                                  ("ring", "all_gather"), ("ring", "reduce_scatter"),
                                                  ("ring", "broadcast")])
def test_spread_programs_still_compute_the_collective(algorithm, collective):
    topo = load_topology(C1)
    p = nr.spread_program(algorithm, get_collective(collective), topo, 4, 2, root=3)
    assert p.params["nchannels"] == 4 and verify(p).ok


def test_channels_use_every_nic():
    r = sim.simulate("all_reduce", 1 << 30, C1, algorithm="tree", protocol="Simple")
    used = {k.split("->")[0] for k in r.link_busy_us if ".nic" in k.split("->")[0]}
    assert used == {f"h{h}.nic{k}" for h in range(2) for k in range(4)}
    assert r.nchannels == 4 and r.explain["channels_spread_over_nics"] is True


@pytest.mark.parametrize("topo, size, algorithm, model, rel", [
    # 2 nodes of 8 A100s, tree: the extrapolation holds within 1%
    (C1, 2 << 30, "tree", "auto", 0.01),
    # 16 nodes of 8 H100s, NVLSTree at 1 GiB: the NICs bound it and the pipeline is 12 steps deep, so the
    # engine simulates 14 and 7 of its 128 pieces; the error is 3% (the 7-piece run is still filling), and
    # the bound says how far it may go (docs/nccl-model.md, "Chunks")
    ("dgx-h100:nodes=16,nics_per_node=8,nic_gbps=400,fabric=efa2", 1 << 30, "nvls_tree", "engine", 0.05),
    # two 32-GPU NVLink domains, tree: a chain 64 steps deep, probed with 32 and 16 of its 256 pieces
    # (execution.PROBE_PIECES_MAX), not steps + 2
    (MNNVL_TREE, 1 << 30, "tree", "engine", 0.001),
], ids=["2-node-tree", "16-node-nvls-tree", "deep-mnnvl-tree"])
def test_steady_state_extrapolation_matches_the_full_run(monkeypatch, topo, size, algorithm, model, rel):
    """The reference is the engine's run of every piece, with no extrapolation."""
    quick = sim.simulate("all_reduce", size, topo, algorithm=algorithm, protocol="Simple", model=model)
    assert quick.explain["simulated_pieces"] < quick.explain["pieces_per_channel"]
    monkeypatch.setattr(nr, "OPS_BUDGET", 10 ** 8)
    nr._program.cache_clear()
    nr._data_runs_cached.cache_clear()
    full = sim.simulate("all_reduce", size, topo, algorithm=algorithm, protocol="Simple", model=model)
    nr._program.cache_clear()
    nr._data_runs_cached.cache_clear()
    assert full.explain["simulated_pieces"] == full.explain["pieces_per_channel"]
    assert quick.time_us == pytest.approx(full.time_us, rel=rel)


def test_a_deep_pipeline_is_probed_with_fewer_pieces_than_its_depth():
    """The cap itself: past the budget the engine simulates min(steps + 2, 32) pieces, so a 64-step chain
    runs 32 (the test above holds that time to the run of every piece)."""
    r = sim.simulate("all_reduce", 1 << 30, MNNVL_TREE, algorithm="tree", protocol="Simple", model="engine")
    assert r.steps + 2 > nr.PROBE_PIECES_MAX
    assert r.explain["simulated_pieces"] == nr.PROBE_PIECES_MAX


@pytest.mark.xfail(strict=True, reason="known gap: the steady state is extrapolated from one full pipeline, and "
                   "on 16 nodes its error (3-8%) moves a NIC-bound NVLSTree against NVLink's rate; four pipelines "
                   "remove it but triple the engine's time on 8-16 nodes (docs/nccl-model.md, Chunks)")
def test_a_nic_bound_collective_does_not_speed_up_when_nvlink_slows():
    """The same machine at 8 GiB: NVLSTree's NVLink share (0.7 to 1.0) must not move a NIC-bound busbw
    (302-331 GB/s today), and slower NICs must never make it faster."""
    topo = "dgx-h100:nodes=16,nics_per_node=8,nic_gbps={},fabric=efa2"
    by_share = []
    for share in (0.7, 0.85, 1.0):
        with calibration.override({"nvls_tree_share": share}):
            by_share.append(sim.simulate("all_reduce", 8 << 30, topo.format(400), algorithm="nvls_tree",
                                         protocol="Simple", model="engine").busbw_GBps)
    assert max(by_share) / min(by_share) < 1.02
    by_nic = [sim.simulate("all_reduce", 8 << 30, topo.format(g), algorithm="nvls_tree", protocol="Simple",
                           model="engine").busbw_GBps for g in (380, 400, 420)]
    assert by_nic == sorted(by_nic)


def test_small_messages_use_fewer_channels():
    r = sim.simulate("all_reduce", 64 << 10, "gb200-nvl72:gpus_per_node=8", algorithm="ring", protocol="LL")
    assert r.explain["nccl_channels_threads_used"].startswith("2 of 16 channels")
    assert nr.small_message_share(1 << 30, load_topology("dgx-h100"), "ring", "LL", 12)[0] == 1.0


def test_explain_has_the_terms():
    r = sim.simulate("all_reduce", 64 << 20, "dgx-h100")
    for key in ("latency_us", "bandwidth_term_us", "selected_by", "tuner_ranking", "link_efficiency"):
        assert key in r.explain
    assert r.explain["latency_us"] + r.explain["bandwidth_term_us"] == pytest.approx(r.time_us)
    name, busy = r.bottleneck()
    assert "nvswitch" in name and 0 < busy <= r.time_us


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=4", "gh200-4:nodes=4,nics_per_node=4,fabric=slingshot",
                                  "pcie:gpus=8,sockets=2,gpus_per_switch=1,cpu=amd,p2p=0",
                                  "gb200-nvl72:nodes=2,gpus_per_node=8,nics_per_node=8"])
def test_an_effective_topology_shares_routes_that_a_fresh_search_would_find(spec):
    # effective_topology keeps every link's latency (scaled by 1e-6) so that its routes are the real
    # topology's, and shares the real one's route cache on that ground: a search on an unshared copy of
    # the same links must find every GPU-to-GPU and GPU-to-NIC route the shared cache answers
    from sim.topology import Topology
    topo = load_topology(spec)
    eff = nr.effective_topology(topo, "", True)
    fresh = Topology.build(eff.name, eff.nodes, list(eff.links), eff.hardware)
    ends = list(topo.gpus) + [i for i, n in enumerate(topo.nodes) if n.kind == "nic"]
    for a in ends:
        for b in ends:
            assert eff.route_nodes(a, b) == fresh.route_nodes(a, b) == topo.route_nodes(a, b)


def test_a_program_run_twice_and_a_rebuilt_one_time_the_same():
    # the engine keeps a program's waiters and symmetry quotient on it; a second run of the same program
    # (other bytes, other links) must give what a program built afresh gives
    from sim.algorithms import build_program
    from sim.engine import simulate_program
    topo = load_topology("dgx-h100:nodes=4")
    coll = get_collective("all_reduce")
    p = build_program("ring", coll, topo.nranks, topology=topo, nchannels=2, pipeline=4)
    first = simulate_program(p, topo, 1 << 20)
    again = simulate_program(p, nr.effective_topology(topo, "", True), 1 << 24)
    fresh = simulate_program(build_program("ring", coll, topo.nranks, topology=topo, nchannels=2, pipeline=4),
                             nr.effective_topology(topo, "", True), 1 << 24)
    assert first.time_us > 0 and again.time_us == fresh.time_us
    assert (again.op_end_us == fresh.op_end_us).all()
