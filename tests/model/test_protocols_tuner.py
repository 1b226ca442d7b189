"""Protocol arithmetic and NCCL's tuner closed form, pinned to the numbers in the reference
(NCCL 2.27.7 tuning.cc / device.h, docs/nccl-model.md) and to the selections the sources report."""
import math

import pytest

import sim
from sim.errors import CollsimError
from sim.nccl import calibration
from sim.nccl.constants import BUFFER_BYTES, NCCL_STEPS
from sim.nccl.machine import machine, nvls_graph, ring_graph, tree_graph
from sim.nccl.protocols import base_latency_us, get_protocol, hop_latency_us, nccl_chunk_bytes
from sim.nccl.tuner import rank_pairs, tuner_result, tuner_terms
from sim.presets import load_topology


def test_payload_efficiency_and_wire_bytes():
    assert get_protocol("LL").payload_efficiency == 0.5            # 4 data bytes per 8
    assert get_protocol("ll128").payload_efficiency == 120 / 128    # 120 per 128-byte line
    assert get_protocol("Simple").payload_efficiency == 1.0
    assert get_protocol("LL").wire_bytes(4096) == 8192
    assert get_protocol("LL128").wire_bytes(120) == 128


def test_buffers_steps_and_chunks():
    assert NCCL_STEPS == 8
    assert BUFFER_BYTES == {"LL": 524288, "LL128": 4915200, "Simple": 4 << 20}
    assert nccl_chunk_bytes("ring", "Simple") == 2 << 20         # 512 KiB step x CHUNKSTEPS 4
    assert nccl_chunk_bytes("tree", "Simple") == 512 << 10
    assert nccl_chunk_bytes("ring", "LL") == 32 << 10           # half of a 64 KiB step is data
    assert nccl_chunk_bytes("tree", "LL128") == 614400 * 120 // 128
    assert nccl_chunk_bytes("collnet_chain", "Simple") == 256 << 10
    assert nccl_chunk_bytes("nvls", "Simple") == 128 << 10
    # small messages: halve until 8 x depth chunks fit, not below 32 KiB
    assert nccl_chunk_bytes("tree", "Simple", nbytes_per_channel=1 << 20, depth=2) == 64 << 10
    assert nccl_chunk_bytes("tree", "Simple", nbytes_per_channel=1 << 10, depth=2) == 32 << 10


def test_latency_tables():
    from sim.nccl import config
    with config.use(config.make_config("2.27")):   # 2.27.7's tables (the newest default changes one row)
        _latency_tables_2_27()
    assert hop_latency_us("net", "nvls_tree", "Simple") == 20.9   # tuning.cc in 2.28.9 (not 2.28.3) and later
    with pytest.raises(CollsimError):
        base_latency_us("ring", "ideal")


def _latency_tables_2_27():
    assert [base_latency_us("ring", p) for p in ("LL", "LL128", "Simple")] == [6.6, 14.0, 8.4]
    assert [base_latency_us("tree", p) for p in ("LL", "LL128", "Simple")] == [6.8, 14.0, 8.4]
    assert base_latency_us("nvls", "Simple") == 0.0
    assert [hop_latency_us("nvlink", "ring", p) for p in ("LL", "LL128", "Simple")] == [0.6, 1.9, 3.4]
    assert [hop_latency_us("pcie", "ring", p) for p in ("LL", "LL128", "Simple")] == [1.0, 2.5, 5.7]
    assert [hop_latency_us("net", "tree", p) for p in ("LL", "LL128", "Simple")] == [5.0, 8.5, 14.0]
    assert hop_latency_us("net", "collnet_chain", "Simple") == 30.0 and hop_latency_us("nvlink", "nvls", "Simple") == 25.0
    assert hop_latency_us("net", "nvls_tree", "Simple") == 14.0   # 2.27 (20.9 from 2.28.9)


def test_graph_emulation_counts_nvlinks_at_nccl_speed():
    h100 = machine(load_topology("dgx-h100"))
    assert h100.gpu_GBps == pytest.approx(18 * 20.6)               # SM90_NVLINK_BW per link
    assert ring_graph(h100) == ring_graph(h100)
    g = ring_graph(h100)
    assert (g.nchannels, g.bw_intra) == (12, 30.0)                  # 6 rings x 60 GB/s, duplicated
    g = nvls_graph(h100)
    assert (g.nchannels, g.bw_intra, g.bw_inter) == (8, 40.0, 60.0)
    a100 = machine(load_topology("dgx-a100"))
    assert (ring_graph(a100).nchannels, ring_graph(a100).bw_intra) == (12, 20.0)  # 6 x 40 -> 12 x 20 = 240
    c1 = machine(load_topology("dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100"))
    assert (ring_graph(c1).nchannels, ring_graph(c1).bw_inter) == (4, 12.0)       # a ring per 12.5 GB/s NIC
    assert tree_graph(c1).bw_intra == 24.0                                        # trees: intra up to 2x inter


def test_ring_closed_form_single_node():
    t = tuner_terms("all_reduce", 1 << 30, load_topology("dgx-h100"), "ring", "Simple")
    assert t.bus_GBps == pytest.approx(360.0)
    assert t.alg_GBps == pytest.approx(360.0 * 8 / 14)                            # ratio n / nsteps
    assert t.latency_us == pytest.approx(8.4 + 14 * 3.4 + calibration.value("launch_overhead_us"))      # base + 2(n-1) hops
    assert t.time_us == pytest.approx(t.latency_us + (1 << 30) / (1000 * t.alg_GBps))
    ll = tuner_terms("all_reduce", 1 << 10, load_topology("dgx-h100"), "ring", "LL")
    assert ll.bus_GBps == pytest.approx(min(141.0, 0.5 * 360))                     # llMaxBw Hopper N1
    ll128 = tuner_terms("all_reduce", 1 << 20, load_topology("dgx-h100"), "ring", "LL128")
    assert ll128.bus_GBps == pytest.approx(min(0.92 * 360, 12 * 36.7))


def test_tree_closed_form_two_nodes():
    topo = load_topology("dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100,fabric=efa")
    t = tuner_terms("all_reduce", 1 << 30, topo, "tree", "Simple")
    assert t.bus_GBps == pytest.approx(min(0.92 * 4 * 24.0, 4 * 23.6))           # perChMaxTreeBw Ampere N2
    assert t.alg_GBps == pytest.approx(t.bus_GBps / 2)
    nic = 0.6 + calibration.value("latency.efa")                                 # NIC + the fabric's software latency
    inter = 14.0 + 2 * nic                                                         # NET tree Simple + NIC twice
    assert t.latency_us == pytest.approx(8.4 + 2 * (7 * 4.0 + 1 * inter) + calibration.value("launch_overhead_us"))
    # tree correction factor: 1 MiB -> log2(1M / 64) = 14 -> Simple 0.5
    small = tuner_terms("all_reduce", 1 << 20, topo, "tree", "Simple")
    assert small.time_us == pytest.approx(small.latency_us + (1 << 20) / (1000 * small.alg_GBps * 0.5))


def test_disabled_pairs():
    h100 = load_topology("dgx-h100")
    assert tuner_terms("all_reduce", 1 << 20, h100, "nvls", "LL").alg_GBps == 0          # NVLS is Simple only
    assert tuner_terms("all_reduce", 1 << 20, load_topology("dgx-a100"), "nvls", "Simple").alg_GBps == 0
    assert tuner_terms("broadcast", 1 << 20, h100, "tree", "Simple").alg_GBps == 0
    assert tuner_terms("all_reduce", 1 << 20, load_topology("pcie:gpus=4"), "ring", "LL128").alg_GBps == 0
    with pytest.raises(CollsimError, match="NCCL would not run"):
        tuner_result(sim.collectives.get_collective("all_reduce"), 1 << 20, h100, "nvls", "LL")


@pytest.mark.parametrize("spec,size,algorithm", [
    ("dgx-h100", 64 << 20, "nvls"),                  # NVLS on 8 H100 above a few MB
    ("dgx-h100", 4 << 20, "nvls"),
    ("dgx-h100", 64 << 10, "ring"),
    ("dgx-h200", 8 << 30, "nvls"),
    ("dgx-h200:gpus_per_node=4", 8 << 30, "ring"),   # stas00's H200 table: ring on 4, NVLS on 5..8
    ("dgx-h200:gpus_per_node=5", 8 << 30, "nvls"),
    ("dgx-b200:gpus_per_node=4", 8 << 30, "ring"),   # B200 table (NCCL 2.27.7): ring on 4-5, NVLS on 6..8
    ("dgx-b200:gpus_per_node=5", 8 << 30, "ring"),
    ("dgx-b200:gpus_per_node=6", 8 << 30, "nvls"),
    ("dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100", 1 << 30, "tree"),   # two nodes: tree beats the NIC-bound ring
    ("hgx-a100-4:nodes=2,nics_per_node=2,nic_gbps=200", 1 << 30, "ring"),
    ("dgx-a100:nodes=4,sharp=1", 1 << 30, "collnet_direct"),             # SHARP on: CollNet
    ("dgx-h100:nodes=8,sharp=1,nvls=0", 1 << 30, "collnet_chain"),
])
def test_selection_matches_sources(spec, size, algorithm):
    # the sources ran NCCL 2.27 or older (B200: 2.27.7; the H100/H200 tables predate 2.28): score them
    # with 2.27's rules (2.28 changed the NVLS model: 5 H200 / 6 B200 then choose ring)
    assert sim.simulate("all_reduce", size, spec, nccl_version="2.27").algorithm == algorithm


def test_forcing_and_ranking():
    topo = load_topology("dgx-h100")
    assert sim.simulate("all_reduce", 1 << 30, topo, algorithm="ring").algorithm == "ring"
    assert sim.simulate("all_reduce", 1 << 30, topo, protocol="LL").protocol == "LL"
    r = sim.simulate("all_reduce", 1 << 30, topo, algorithm="tree", protocol="LL128", model="tuner")
    assert (r.algorithm, r.protocol, r.model) == ("tree", "LL128", "tuner")
    ranked = rank_pairs("all_reduce", 1 << 30, topo, ["ring", "tree", "nvls"])
    assert [t.time_us for t in ranked] == sorted(t.time_us for t in ranked)
    assert ranked[0].algorithm == "nvls" and all(math.isfinite(t.time_us) for t in ranked)


def test_tuner_result_and_explain():
    r = sim.simulate("all_reduce", 1 << 30, "dgx-h100", model="tuner")
    assert r.model == "tuner" and r.algorithm == "nvls"
    assert r.explain["latency_us"] + r.explain["bandwidth_term_us"] == pytest.approx(r.time_us)
    assert "graph" in r.explain and "tuner_ranking" in r.explain


@pytest.mark.parametrize("model", ["engine", "tuner", "alpha-beta"])
def test_models_are_deterministic(model):
    for spec in ("dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100", "gb200-nvl72:gpus_per_node=8"):
        a = [sim.simulate("all_reduce", s, spec, model=model) for s in (8, 1 << 20, 1 << 30)]
        b = [sim.simulate("all_reduce", s, spec, model=model) for s in (8, 1 << 20, 1 << 30)]
        assert [(x.algorithm, x.protocol, x.time_us) for x in a] == [(x.algorithm, x.protocol, x.time_us) for x in b]


def test_ll128_across_nodes_needs_the_nic_behind_the_gpus_pcie_switch():
    """NCCL's tuning.cc (2.18 .. 2.29): LL128 across nodes only when the GPU-NIC path is at most PXB. The
    Polaris-like preset hangs its NICs off the CPU (PHB): no LL128 pair is ranked there at any size, while
    the same nodes with nic_path=PXB, and one node of them, keep it."""
    from sim.nccl.tuner import rank_pairs
    from sim.presets import load_topology
    for spec, ll128 in (("hgx-a100-4:nodes=8", False), ("hgx-a100-4:nodes=8,nic_path=PXB", True),
                        ("hgx-a100-4", True), ("dgx-a100:nodes=2,nic_path=SYS", False)):
        topo = load_topology(spec)
        protos = {t.protocol for size in (1 << 16, 1 << 20, 1 << 24) for t in rank_pairs("all_reduce", size, topo, ("ring", "tree"))}
        assert ("LL128" in protos) == ll128, spec
