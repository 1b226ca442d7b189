"""Exact step counts (NCCL's nsteps: steps one piece of data crosses) of every algorithm, as in docs/algorithms.md."""
import math

import numpy as np
import pytest

from sim.algorithms import build_program
from sim.algorithms.tree import bit_tree, double_tree, heights
from sim.presets import load_topology

SIZES = list(range(2, 17)) + [32, 64]


def lg(n):
    return math.ceil(math.log2(n))


@pytest.mark.parametrize("n", SIZES)
def test_tree_one_gpu_per_host(n):
    assert build_program("tree", "all_reduce", n).steps == 2 * lg(n)
    assert build_program("tree", "broadcast", n, root=n - 1).steps == lg(n)
    assert build_program("tree", "reduce", n, root=n // 2).steps == lg(n)


@pytest.mark.parametrize("nodes,gpn", [(1, 8), (2, 8), (3, 3), (5, 4), (8, 2), (16, 4)])
def test_tree_chain_inside_hosts(nodes, gpn):
    topo = load_topology(f"dgx-h100:nodes={nodes},gpus_per_node={gpn}")
    depth = (gpn - 1) + lg(nodes) if nodes > 1 else gpn - 1
    assert build_program("tree", "all_reduce", nodes * gpn, topology=topo).steps == 2 * depth
    assert build_program("tree", "broadcast", nodes * gpn, topology=topo, root=(gpn + 1) % (nodes * gpn)).steps == depth


def test_bit_tree_and_its_mirror():
    assert bit_tree(8).tolist() == [-1, 2, 4, 2, 0, 6, 4, 6]
    assert bit_tree(5).tolist() == [-1, 2, 4, 2, 0]
    for m in range(2, 65):
        t0, t1 = double_tree(m)
        for t in (t0, t1):
            assert (t < 0).sum() == 1                       # one root
            assert heights(t)[0].max() == lg(m)             # height ceil(log2 m) for any m
        if m % 2 == 0 and m > 2:  # double binary tree: no host is interior in both trees
            interior = lambda t: set(t[t >= 0].tolist())
            assert not interior(t0) & interior(t1)


@pytest.mark.parametrize("n", SIZES)
def test_classic_step_counts(n):
    p2 = 1 << (n.bit_length() - 1)
    fold = 2 if n != p2 else 0
    k = int(math.log2(p2))
    assert build_program("recursive_hd", "all_reduce", n).steps == 2 * k + fold
    assert build_program("recursive_hd", "reduce_scatter", n).steps == k + fold
    assert build_program("recursive_hd", "all_gather", n).steps == k + fold
    assert build_program("binomial", "broadcast", n, root=1).steps == lg(n)
    assert build_program("binomial", "reduce", n).steps == lg(n)
    assert build_program("direct", "all_to_all", n).steps == 1
    assert build_program("direct", "all_gather", n).steps == 1
    assert build_program("direct", "all_gather", n).nops == n * (n - 1)
    assert build_program("hierarchical_ring", "all_reduce", n).steps == 2 * (n - 1)  # no topology: the flat ring


@pytest.mark.parametrize("nodes,gpn", [(2, 8), (3, 3), (4, 2), (8, 4)])
def test_hierarchical_ring(nodes, gpn):
    topo = load_topology(f"dgx-h100:nodes={nodes},gpus_per_node={gpn}")
    assert build_program("hierarchical_ring", "all_reduce", nodes * gpn, topology=topo).steps == 2 * (gpn - 1) + 2 * (nodes - 1)


def test_hierarchical_ring_refuses_flat_topologies():
    from sim.algorithms import why_not
    assert "one GPU per host" in why_not("hierarchical_ring", "all_reduce", 8, load_topology("dgx-h100:nodes=8,gpus_per_node=1"))
    assert "one host" in why_not("hierarchical_ring", "all_reduce", 8, load_topology("dgx-h100"))


@pytest.mark.parametrize("nodes,gpn", [(2, 8), (3, 3), (4, 1), (8, 2)])
def test_collnet_and_nvls(nodes, gpn):
    topo = load_topology(f"dgx-h100:nodes={nodes},gpus_per_node={gpn},sharp=1")
    n = nodes * gpn
    assert build_program("collnet_direct", "all_reduce", n, topology=topo).steps == 2 * min(1, gpn - 1) + 2
    assert build_program("collnet_chain", "all_reduce", n, topology=topo).steps == 2 * (gpn - 1) + 2
    assert build_program("nvls", "all_reduce", n, topology=topo).steps == 2 + 2 + 2
    assert build_program("nvls_tree", "all_reduce", n, topology=topo).steps == 2 + 2 * lg(nodes) + 2


def test_two_switch_levels_add_two_steps():
    topo = load_topology("dgx-a100:nodes=5,gpus_per_node=2,nodes_per_leaf=2,sharp=1")
    assert build_program("collnet_direct", "all_reduce", 10, topology=topo).steps == 2 + 4
    assert build_program("collnet_chain", "all_reduce", 10, topology=topo).steps == 2 + 4


def test_single_switch_and_single_node():
    sw = load_topology("switch:n=8,sharp=1,nvls=1")
    assert sw.reducing_switches("nvls") and not sw.reducing_switches("sharp")  # nvls wins on the simple preset
    sharp = load_topology("switch:n=8,sharp=1")
    assert build_program("collnet_direct", "all_reduce", 8, topology=sharp).steps == 2
    dgx = load_topology("dgx-h100")
    assert build_program("nvls", "all_reduce", 8, topology=dgx).steps == 4
    assert build_program("nvls", "reduce_scatter", 8, topology=dgx).steps == 2
    assert build_program("nvls", "all_gather", 8, topology=dgx).steps == 2


def test_collnet_ops_reach_the_switch_agent():
    topo = load_topology("switch:n=4,sharp=1")
    p = build_program("collnet_direct", "all_reduce", 4, topology=topo, pipeline=3)
    assert p.switches == ("switch",) and p.nagents == 5
    up, down = (p.dst == 4), (p.src == 4)
    assert up.sum() == down.sum() == 4 * 3 and p.reduce[up].all() and not p.reduce[down].any()
    assert np.array_equal(np.sort(p.step[up]), np.repeat([0, 1, 2], 4))
