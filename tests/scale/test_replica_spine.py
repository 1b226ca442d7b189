"""The replica model (sim.prediction.replica) on an oversubscribed spine.

Expected values come from outside the model: a physical law (a thinner spine, the same cluster otherwise,
never makes a collective faster), the engine where it runs, and the clusters' own links (a replica's leaf
gets the uplink a leaf of the cluster has, not a share of it shrunk with the replica's hosts).
"""
import pytest

import sim
from sim.prediction.replica import replica, replica_spec
from sim.presets import load_topology


def _uplink_GBps(topo) -> float:
    """The bandwidth of the first leaf's link to the spine."""
    return next(l.bandwidth_GBps for l in topo.links if l.dst == "spine")


@pytest.mark.parametrize("size", [32 << 10, 128 << 20, 2 << 30])
def test_an_oversubscribed_spine_is_never_faster(size):
    # 256 nodes, 8 units of 32: the hand-picked pair (auto: tree/LL, nvls_tree/Simple) and a forced tree
    for algo, proto in (("auto", "auto"), ("tree", "Simple")):
        times = [sim.simulate("all_reduce", size, f"dgx-h100:nodes=256,oversubscription={o}", algo, proto,
                              model="flow").time_us for o in (1, 2, 4, 64)]
        assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:])), (algo, proto, times)


def _port_GBps(topo) -> float:
    """A NIC's port to its leaf."""
    kinds = {n.name: n.kind for n in topo.nodes}
    return next(l.bandwidth_GBps for l in topo.links if kinds[l.src] == "nic" and l.kind == "net")


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=256,oversubscription=2",               # 16 ports per rail per leaf
                                  "dgx-h100:nodes=64,oversubscription=64",               # half a port
                                  "dgx-h100:nodes=16,nodes_per_leaf=4,oversubscription=8"])  # half a port
def test_a_replica_leaf_has_the_clusters_uplink_capped_at_non_blocking(spec):
    big = load_topology(spec)
    for nodes in (2, 4, 8):   # the half replica, the replica, a double one: hosts per leaf nodes / 2
        rep = replica(big, nodes)
        expected = min(nodes // 2 * _port_GBps(big), _uplink_GBps(big))
        assert _uplink_GBps(rep) == pytest.approx(expected, rel=1e-9), (nodes, rep.name)
    assert "oversubscription" not in replica_spec(load_topology("dgx-h100:nodes=256,oversubscription=2"), 4)


@pytest.mark.slow
def test_follows_the_engine_where_the_spine_is_oversubscribed():
    # 2 units of 8 nodes at 4:1 (2 ports per rail per leaf): the engine's tree is not slowed by it, as few of
    # its edges cross the spine; two replicas with 4:1 spines of their own (1 and 0.5 ports) made it 17% slower
    spec = "dgx-h100:nodes=16,nodes_per_leaf=8,oversubscription=4"
    e = sim.simulate("all_reduce", 16 << 20, spec, "tree", "Simple", model="engine")
    f = sim.simulate("all_reduce", 16 << 20, spec, "tree", "Simple", model="flow")
    # (3%: the two models' data times differ by 7% here, under a 169 us tree lag that NCCL's kernel cap no
    # longer masks since the lag and the cap are stages of one pipeline, sim.nccl.execution.kernel_capped)
    assert f.time_us == pytest.approx(e.time_us, rel=0.03)
