"""The large-scale all_to_all model (sim.prediction.flow_alltoall) against the engine, where both run, and what it
does at scale."""
import pytest

import sim
from sim.errors import CollsimError

# NCCL's point-to-point sends run LL or Simple (no LL128 kernel: sim.simulate refuses it, tests/core)
CASES = [("dgx-h100:nodes=4", proto, size) for proto in ("Simple", "LL") for size in (64 << 10, 16_000_000, 1 << 30)]
CASES += [("dgx-h100:nodes=8", "Simple", 1 << 30), ("gb200-nvl72:gpus_per_node=8,nodes=4", "Simple", 16_000_000),
          ("dgx-a100:nodes=6", "LL", 64 << 10), ("dgx-h100:nodes=4,gpus_per_node=1", "Simple", 16_000_000)]


@pytest.mark.parametrize("spec, proto, size", CASES)
def test_equals_the_engine_within_one_scalable_unit(spec, proto, size):
    # one NIC per GPU, 3+ hosts under one leaf per rail: the engine's schedule is the busiest link's load
    # plus m - 2 pieces of start-up queue (the engine adds a few picoseconds of float noise)
    e = sim.simulate("all_to_all", size, spec, "p2p", proto, model="engine")
    f = sim.simulate("all_to_all", size, spec, "p2p", proto, model="flow")
    assert (e.model, f.model) == ("engine", "flow")
    assert f.time_us == pytest.approx(e.time_us, rel=1e-6)
    assert f.steps == e.steps


@pytest.mark.slow
@pytest.mark.parametrize("spec, size, tol", [
    ("dgx-h100:nodes=8,nodes_per_leaf=4", 1 << 30, 0.02),
    ("dgx-h100:nodes=16", 1 << 30, 1e-6),
    ("dgx-h100:nodes=16,nodes_per_leaf=8", 1 << 30, 0.01),   # two scalable units: the spine adds a little queueing
    ("dgx-a100:nodes=4,nics_per_node=4", 1 << 30, 0.025),   # two GPUs per NIC
])
def test_within_two_percent_of_the_engine_on_larger_or_other_clusters(spec, size, tol):
    e = sim.simulate("all_to_all", size, spec, "p2p", "Simple", model="engine")
    f = sim.simulate("all_to_all", size, spec, "p2p", "Simple", model="flow")
    assert f.time_us == pytest.approx(e.time_us, rel=tol)


def test_bandwidth_term_is_the_nic_path_load_in_closed_form():
    # dgx-h100:nodes=8, 1 GiB Simple: each GPU's PCIe link (64 GB/s x NCCL's 0.75) carries the 8 x 7 blocks of
    # 16 MiB that leave its host on its rail; 6 more pieces of start-up queue (m - 2), a piece being one
    # NCCL Simple step of a block (4 MiB buffer / 8 steps = 512 KiB): NCCL chunks each peer's block
    f = sim.simulate("all_to_all", 1 << 30, "dgx-h100:nodes=8", "p2p", "Simple", model="flow")
    block = (1 << 30) / 64
    piece = 512 << 10
    per_us = 64e3 * 0.75
    assert f.explain["bandwidth_term_us"] == pytest.approx((8 * 7 * block + 6 * piece) / per_us, rel=1e-12)


def test_auto_times_all_to_all_at_scale_with_the_flow_model():
    r = sim.simulate("all_to_all", 1 << 30, "dgx-h100:nodes=512", max_memory="2G")   # 4,096 GPUs: 16 M blocks
    assert (r.model, r.algorithm) == ("flow", "p2p")
    # the bound the NICs set: every GPU sends 63/64 of its buffer through a 400 Gb/s NIC
    assert r.busbw_GBps < 50.0


def test_flow_model_refuses_the_ideal_protocol_and_single_nodes_clearly():
    with pytest.raises(CollsimError, match="NCCL's protocols"):
        sim.simulate("all_to_all", 1 << 20, "dgx-h100:nodes=4", "p2p", "ideal", model="flow")
    with pytest.raises(CollsimError, match="several nodes"):
        sim.simulate("all_to_all", 1 << 20, "dgx-h100", "p2p", "Simple", model="flow")


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=2", "dgx-h100:nodes=5", "dgx-a100:nodes=3,nics_per_node=4", "dgx-h100"])
def test_the_budget_counts_the_p2p_programs_ops(spec):
    from sim.algorithms import build_program
    from sim.prediction.budget import ops_per_piece
    from sim.presets import load_topology
    topo = load_topology(spec)
    built = build_program("p2p", "all_to_all", topo.nranks, topology=topo).nops
    assert ops_per_piece("p2p", "all_to_all", topo.nranks, topo) == built


def test_auto_leaves_a_1024_gpu_all_to_all_to_the_flow_model():
    # 2 M ops per piece: minutes in the engine; the estimate must say so
    r = sim.simulate("all_to_all", 1 << 30, "dgx-h100:nodes=128")
    assert r.model == "flow" and "flow" in r.explain["model_choice"]
