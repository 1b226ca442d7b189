"""Every algorithm computes every collective it serves, at world sizes 2..16, 32 and 64.

Algorithms that reduce in switches (collnet, nvls) or follow hosts (tree, hierarchical_ring) are also
verified on topologies that give them switches and hosts of several shapes.
"""
import pytest

from sim.algorithms import algorithms, build_program, why_not
from sim.presets import load_topology
from sim.verify import VerificationError, verify

SIZES = list(range(2, 17)) + [32, 64]
GENERIC = ["tree", "recursive_hd", "direct", "binomial", "hierarchical_ring"]


def _layouts(n):
    """(nodes, gpus_per_node) pairs with nodes * gpus = n and gpus <= 8: a few host shapes per size."""
    return [(n // k, k) for k in (1, 2, 3, 4, 8) if n % k == 0 and n // k >= 1 and k <= 8][:3]


def _check(name, coll, n, topo=None, **kw):
    roots = {0, n // 2, n - 1} if coll in ("broadcast", "reduce") else {0}
    for root in roots:
        assert verify(build_program(name, coll, n, topology=topo, root=root, **kw)).ok


@pytest.mark.parametrize("name", GENERIC)
def test_generic_algorithms_verify_without_a_topology(name):
    for coll in algorithms()[name].collectives:
        for n in SIZES:
            _check(name, coll, n)
            if n <= 6:  # channels and pipelining keep programs correct
                _check(name, coll, n, nchannels=2, pipeline=3)


@pytest.mark.parametrize("n", SIZES)
def test_sharp_and_nvls_verify_on_one_switch(n):
    sharp = load_topology(f"switch:n={n},sharp=1")
    nvls = load_topology(f"switch:n={n},nvls=1")
    for name in ("collnet_direct", "collnet_chain"):
        _check(name, "all_reduce", n, sharp, pipeline=2 if n <= 8 else 1)
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        _check("nvls", coll, n, nvls, pipeline=2 if n <= 8 else 1)


@pytest.mark.parametrize("n", SIZES)
def test_host_aware_algorithms_verify_on_clusters(n):
    ran = set()
    for nodes, gpn in _layouts(n):
        topo = load_topology(f"dgx-h100:nodes={nodes},gpus_per_node={gpn}" + (",sharp=1" if nodes > 1 else ""))
        for name in ("tree", "hierarchical_ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree"):
            for coll in algorithms()[name].collectives:
                if why_not(name, coll, n, topo) is None:
                    _check(name, coll, n, topo)
                    ran.add(name)
    assert {"tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree"} <= ran


def test_nvls_verifies_on_a_gb200_rack():
    for n in (8, 36, 64, 72):
        topo = load_topology(f"gb200-nvl72:gpus_per_node={n}")
        for coll in ("all_reduce", "reduce_scatter", "all_gather"):
            _check("nvls", coll, n, topo)


def test_two_level_switch_tree_verifies():
    # 5 hosts, 2 per leaf: three leaves per rail, reduced again in the spine
    topo = load_topology("dgx-a100:nodes=5,gpus_per_node=2,nodes_per_leaf=2,sharp=1")
    for name in ("collnet_direct", "collnet_chain", "nvls_tree", "tree", "hierarchical_ring"):
        if why_not(name, "all_reduce", 10, topo) is None:
            _check(name, "all_reduce", 10, topo, nchannels=2, pipeline=2)
    assert "spine" in build_program("collnet_direct", "all_reduce", 10, topology=topo).switches


def test_a_broken_switch_program_is_caught():
    topo = load_topology("switch:n=4,sharp=1")
    p = build_program("collnet_direct", "all_reduce", 4, topology=topo)
    keep = ~((p.src == 2) & (p.dst == 4))  # rank 2 never sends to the switch
    with pytest.raises(VerificationError, match="rank 0 ends with chunk 0 holding"):
        verify(p.with_ops(keep))


def test_verify_cli_takes_a_topology(cli):
    code, out, _ = cli("verify", "all", "--topology", "dgx-h100:nodes=2,gpus_per_node=4,sharp=1")
    assert code == 0
    for name in ("collnet_direct", "collnet_chain", "nvls", "nvls_tree", "tree", "hierarchical_ring"):
        assert f"ok   {name}" in out
    assert "failed" not in out
