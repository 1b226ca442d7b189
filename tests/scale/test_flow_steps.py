"""The large-scale model of the textbook algorithms (sim.prediction.flow_steps) against the engine, where both run."""
import time

import pytest

import sim
from sim.collectives import get_collective
from sim.prediction.flow_steps import SPINE_TOLERANCE, TOLERANCE, covers
from sim.presets import load_topology

CASES = [("hierarchical_ring", "all_reduce"), ("recursive_hd", "all_reduce"), ("recursive_hd", "all_gather"),
         ("recursive_hd", "reduce_scatter"), ("direct", "all_gather"), ("direct", "all_to_all"),
         ("binomial", "broadcast"), ("binomial", "reduce")]


@pytest.mark.parametrize("algo, coll", CASES)
@pytest.mark.parametrize("proto", ["ideal", "LL", "Simple"])
def test_is_the_engine_when_the_replica_is_the_cluster(algo, coll, proto):
    # up to REPLICA_NODES nodes the anchor runs the engine on the cluster itself
    e = sim.simulate(coll, 4 << 20, "dgx-h100:nodes=2", algo, proto, model="engine")
    f = sim.simulate(coll, 4 << 20, "dgx-h100:nodes=2", algo, proto, model="flow")
    assert f.model == "flow"
    assert f.time_us == pytest.approx(e.time_us, rel=1e-9)


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=8", "dgx-a100:nodes=8"])
@pytest.mark.parametrize("algo, coll", CASES)
@pytest.mark.parametrize("proto, size", [("LL", 64 << 10), ("Simple", 256 << 20), ("ideal", 4 << 20)])
def test_within_tolerance_of_the_engine_in_one_scalable_unit(spec, algo, coll, proto, size):
    e = sim.simulate(coll, size, spec, algo, proto, model="engine")
    f = sim.simulate(coll, size, spec, algo, proto, model="flow")
    assert abs(f.time_us / e.time_us - 1) < TOLERANCE, (f.time_us, e.time_us, f.explain)


@pytest.mark.slow
@pytest.mark.parametrize("algo, proto", [("recursive_hd", "Simple"), ("hierarchical_ring", "LL")])
def test_across_scalable_units_within_the_spine_tolerance(algo, proto):
    # 64 nodes = two scalable units of 32: every spine link carries 32 flows in recursive_hd's first step
    e = sim.simulate("all_reduce", 256 << 20, "dgx-h100:nodes=64", algo, proto, model="engine")
    f = sim.simulate("all_reduce", 256 << 20, "dgx-h100:nodes=64", algo, proto, model="flow")
    assert abs(f.time_us / e.time_us - 1) < SPINE_TOLERANCE


def test_unanchored_loads_are_the_closed_form_of_a_binomial_broadcast():
    # binomial broadcast on one switch: ceil(log2 8) = 3 steps, each the whole buffer from one rank to
    # another (the preset's 1 us and 100 GB/s GPU to GPU): the textbook alpha-beta sum, not the engine
    topo = load_topology("switch:n=8,bandwidth_GBps=100,latency_us=1")
    from sim.nccl.protocols import get_protocol
    from sim.prediction.flow_steps import _predict
    r = _predict(get_collective("broadcast"), 1 << 20, topo, "binomial", get_protocol("ideal"), None, None, 0)
    assert r.time_us == pytest.approx(3 * (1.0 + (1 << 20) / 100e3), rel=1e-9)


def test_textbook_topologies_keep_the_engine():
    assert covers(get_collective("all_reduce"), "recursive_hd", load_topology("ring:n=8")) is not None
    assert covers(get_collective("all_reduce"), "recursive_hd", load_topology("dgx-h100:nodes=4")) is None


def test_all_algorithms_on_1024_gpus_in_seconds():
    # the case: every algorithm of -a all at three sizes, through --model auto (was 227-257 s)
    topo = load_topology("dgx-h100:nodes=128")
    t = time.perf_counter()
    for algo in ("recursive_hd", "hierarchical_ring"):
        for size in (1 << 20, 64 << 20, 4 << 30):
            r = sim.simulate("all_reduce", size, topo, algo, "auto")
            assert r.model == "flow"
    assert time.perf_counter() - t < 20
