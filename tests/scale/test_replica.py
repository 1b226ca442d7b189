"""The large-scale model for trees, NVLS and CollNet (sim.prediction.replica) against the engine, where both run."""
import pytest

import sim
from sim.algorithms import build_program
from sim.prediction.replica import replica_spec, tree_levels
from sim.presets import load_topology


@pytest.mark.parametrize("spec, algo, proto, size", [
    ("dgx-h100:nodes=4", "nvls_tree", "Simple", 16 << 20),
    ("dgx-h100:nodes=4", "tree", "LL128", 1 << 20),
    ("dgx-h100:nodes=4,sharp=1", "collnet_direct", "Simple", 16 << 20),
    ("dgx-h100:nodes=2", "tree", "ideal", 4 << 20),
])
def test_equals_the_engine_when_the_replica_is_the_cluster(spec, algo, proto, size):
    e = sim.simulate("all_reduce", size, spec, algo, proto, model="engine")
    f = sim.simulate("all_reduce", size, spec, algo, proto, model="flow")
    assert f.model == "flow" and e.model == "engine"
    assert f.time_us == pytest.approx(e.time_us, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("spec, algo, proto, size", [
    ("dgx-h100:nodes=8", "nvls_tree", "Simple", 16 << 20),   # 8 pieces: the engine simulates every one
    ("dgx-h100:nodes=8", "tree", "LL128", 1 << 20),
    ("dgx-h100:nodes=16", "nvls_tree", "Simple", 4 << 20),
    ("dgx-h100:nodes=16", "tree", "LL", 64 << 10),
    ("dgx-h100:nodes=8,sharp=1", "collnet_direct", "Simple", 16 << 20),
    ("dgx-a100:nodes=8", "tree", "LL128", 2 << 20),
])
def test_within_two_percent_of_the_engine_on_larger_clusters(spec, algo, proto, size):
    # 2-4x the replica's nodes: the extra tree levels are extrapolated, every piece is simulated by the engine
    e = sim.simulate("all_reduce", size, spec, algo, proto, model="engine")
    f = sim.simulate("all_reduce", size, spec, algo, proto, model="flow")
    assert f.time_us == pytest.approx(e.time_us, rel=0.02)


def test_tree_levels_are_the_programs_depth():
    # NCCL's tree all_reduce over m hosts of g GPUs: 2 * ((g - 1) + levels) steps (sim.algorithms.tree)
    for m in (2, 3, 5, 8, 13):
        topo = load_topology(f"dgx-h100:nodes={m},gpus_per_node=2")
        assert build_program("tree", "all_reduce", topo.nranks, topology=topo).steps == 2 * (1 + tree_levels(m))
    assert [tree_levels(m) for m in (2, 4, 8, 1024)] == [1, 2, 3, 10]


def test_replica_keeps_the_spine_crossing():
    topo = load_topology("dgx-h100:nodes=64")   # 2 scalable units of 32 nodes
    assert replica_spec(topo, 4).endswith("nodes=4,nics_per_node=8,nic_gbps=400,nodes_per_leaf=2")
    assert replica_spec(load_topology("dgx-h100:nodes=8"), 4) == "dgx-h100:nodes=4,nics_per_node=8,nic_gbps=400"
    assert replica_spec(load_topology("ring:n=8"), 4) is None


def test_textbook_topologies_are_not_shrunk():
    from sim.errors import CollsimError
    with pytest.raises(CollsimError, match="multi-node preset"):
        sim.simulate("all_reduce", 1 << 20, "switch:n=8,sharp=1", "collnet_direct", "Simple", model="flow")
