"""NCCL chooses with what NCCL knows (issue 23, tenth pass).

Three facts of NCCL's own tuner and of how a proxy's work overlaps the wire:

* the tree graph's pattern: on Hopper and later, where every GPU has a NIC of its own, NCCL's search ends
  with the simple TREE pattern, which ``tuning.cc`` credits with 0.85 of the bandwidth;
* the algorithm is chosen with the latency the net plugin reports (aws-ofi-nccl on AWS: 75 us; NCCL's
  InfiniBand transport and aws-ofi-nccl elsewhere: 0), not with the costs collsim fits to the network;
* a ring step's fitted software cost (net overhead beyond NCCL's, rendezvous, receive copy) hides behind
  the step's own transfer: a step costs the larger of the two.

Expected values are closed forms of NCCL's formulas (``tuning.cc``), the plugin's published figure
(aws-ofi-nccl ``src/platform-aws.c``), and the published CSCS Alps sweep where NCCL switches from tree to
ring (boeschf/nccl-benchmark-on-alps-2025: 128 nodes, 67 GB/s at 1 GiB, 87 at 2 GiB)."""
import json

import pytest

import sim
from sim.collectives import get_collective
from sim.commands.validate import PUBLIC_CASES
from sim.nccl import calibration
from sim.nccl import config as nccl_config
from sim.nccl.machine import machine, tree_graph, tree_pattern
from sim.nccl.protocols import hop_latency_us
from sim.nccl.tuner import rank_pairs, tuner_terms
from sim.presets import load_topology

AR = get_collective("all_reduce")
ALPS = "gh200-4:nodes={n},nics_per_node=4,nic_gbps=200,fabric=slingshot"


@pytest.mark.parametrize("spec, pattern", [
    ("dgx-h100:nodes=4", "tree"),                 # Hopper, a 400G NIC per GPU
    ("dgx-b200:nodes=16", "tree"),                # Blackwell, a NIC per GPU
    (ALPS.format(n=8), "tree"),                   # GH200: a NIC per superchip
    ("dgx-a100:nodes=4", "balanced_tree"),        # Ampere: NCCL never tries the simpler pattern
    ("hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200", "balanced_tree"),
    ("dgx-h100", "balanced_tree"),                # one node: no NIC in NCCL's trimmed system
    ("dgx-a100:nodes=4,gpus_per_node=1", "tree"),  # one GPU per node: always TREE (search.cc)
])
def test_tree_pattern_follows_nccls_search(spec, pattern):
    assert tree_pattern(machine(load_topology(spec))) == pattern


def test_simple_tree_pattern_costs_nccl_fifteen_percent():
    # tuning.cc (2.27.7): busBw = min(nch * bwInter * 0.92, nch * perChMaxTreeBw), x 0.85 for the TREE
    # pattern; perChMaxTreeBws[arch][N4] = 36.0 (Hopper), 17.8 (Ampere)
    for spec, per_ch_max, factor in (("dgx-h100:nodes=4", 36.0, 0.85), ("dgx-a100:nodes=4", 17.8, 1.0)):
        topo = load_topology(spec)
        g = tree_graph(machine(topo))
        with nccl_config.use(nccl_config.make_config(version="2.27")):
            t = tuner_terms(AR, 1 << 30, topo, "tree", "Simple")
        assert t.bus_GBps == pytest.approx(min(g.nchannels * g.bw_inter * 0.92, g.nchannels * per_ch_max) * factor)


def test_choice_ignores_the_costs_nccl_does_not_know():
    # the fitted software costs of a fabric move the predicted time, never NCCL's ranking
    topo = load_topology(ALPS.format(n=32))
    big = {"latency.slingshot": 80.0, "net_overhead.slingshot": 20.0, "rendezvous_us.slingshot": 40.0,
           "recv_copy_us.slingshot": 20.0}
    for size in (1 << 10, 1 << 20, 64 << 20, 1 << 30):
        order = [(t.algorithm, t.protocol) for t in rank_pairs(AR, size, topo, ["tree", "ring"])]
        with calibration.override(big):
            assert [(t.algorithm, t.protocol) for t in rank_pairs(AR, size, topo, ["tree", "ring"])] == order
            slow = sim.simulate(AR, size, topo, "ring", "Simple").time_us
        assert slow > sim.simulate(AR, size, topo, "ring", "Simple").time_us


def test_aws_plugin_reports_75_us_to_nccl():
    # graph.latencyInter = the plugin's props->latency, added once per network hop and once more (flush)
    # for Simple: the ranking's ring latency grows by 2 x 75 us per inter-node step
    topo = load_topology("dgx-h100:nodes=4,nics_per_node=8,nic_gbps=400,fabric=efa2")
    ib = load_topology("dgx-h100:nodes=4,nics_per_node=8,nic_gbps=400,fabric=ib")
    efa = {(t.algorithm, t.protocol): t for t in rank_pairs(AR, 1 << 20, topo, ["ring"])}
    ref = {(t.algorithm, t.protocol): t for t in rank_pairs(AR, 1 << 20, ib, ["ring"])}
    inter_steps = 2 * (4 - 1)
    d = efa["ring", "Simple"].latency_us - ref["ring", "Simple"].latency_us
    assert d == pytest.approx(inter_steps * 2 * 75.0 * 1.4, rel=0.02)   # x1.4: the ring plateau


def test_nccl_switches_alps_to_ring_where_the_published_sweep_jumps():
    # 128 nodes of 4 GH200: the published sweep (NCCL 2.23.4) runs 66.6 GB/s at 1 GiB and 86.7 at 2 GiB,
    # a jump only a change of algorithm makes; NCCL's model with the TREE pattern switches there
    case = next(c for c in json.loads(open(PUBLIC_CASES).read())["cases"] if c["id"] == "ALPS-128-AR-223")
    rows = {r["size"]: r["busbw"] for r in case["rows"]}
    assert rows[2 << 30] / rows[1 << 30] > 1.25
    topo = load_topology(ALPS.format(n=128))
    with nccl_config.use(nccl_config.make_config(version="2.23")):
        assert rank_pairs(AR, 1 << 30, topo, ["tree", "ring"])[0].algorithm == "tree"
        assert rank_pairs(AR, 2 << 30, topo, ["tree", "ring"])[0].algorithm == "ring"


def test_a_ring_steps_software_cost_hides_behind_its_transfer():
    topo = load_topology(ALPS.format(n=8))
    n = topo.nranks
    nsteps = 2 * (n - 1)
    base = {"net_overhead.slingshot": 0.0, "rendezvous_us.slingshot": 0.0, "recv_copy_us.slingshot": 0.0}
    heavy = {**base, "net_overhead.slingshot": 10.0}   # 30 us a Simple step against NCCL's own 3
    with calibration.override(base):
        small0 = tuner_terms(AR, 1 << 12, topo, "ring", "Simple")
        large0 = tuner_terms(AR, 4 << 30, topo, "ring", "Simple")
    with calibration.override(heavy):
        small = tuner_terms(AR, 1 << 12, topo, "ring", "Simple")
        large = tuner_terms(AR, 4 << 30, topo, "ring", "Simple")
    # 4 KiB: a step moves 4 KiB / 32 ranks in well under a microsecond, so the floor shows almost whole: on
    # the steps that do not cross the network, 30 us where NCCL's own is max(hwLat NVLink ring Simple, 3)
    intra_steps = nsteps - 2 * (8 - 1)
    wire = (1 << 12) / (1000 * small.alg_GBps) / nsteps
    excess = intra_steps * (30.0 - max(hop_latency_us("nvlink", "ring", "Simple"), 3.0))
    assert small.latency_us - small0.latency_us == pytest.approx(excess - nsteps * wire, rel=1e-6)
    # 4 GiB: a step moves 128 MiB / 8 channels, hundreds of us: the floor hides entirely
    assert large.latency_us == pytest.approx(large0.latency_us, rel=1e-9)
    assert large.detail["software_overlap_us"] > 0
