"""The fast topology paths (numpy validation and reachability, lazy adjacency, NVLink-domain discovery
without a search per GPU) give what the plain per-item algorithms give, which these tests run beside
them as the second implementation."""
import random

import numpy as np
import pytest

from sim.algorithms.collnet import nearest_reducer
from sim.algorithms.nvls import nearest_nvls_switches, nvls_domains
from sim.errors import CollsimError
from sim.presets import load_topology
from sim.topology import Link, Node, Topology


def plain_reachable(topo, start, forward=True):
    """Depth-first search over the links, one link at a time."""
    adj = {}
    for l in topo.links:
        a, b = (l.src, l.dst) if forward else (l.dst, l.src)
        adj.setdefault(topo.node_index[a], []).append(topo.node_index[b])
    seen, todo = {start}, [start]
    while todo:
        for v in adj.get(todo.pop(), ()):
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return seen


def random_topology(seed, n_gpus=6, n_switches=4, n_links=30):
    rng = random.Random(seed)
    names = [f"g{i}" for i in range(n_gpus)] + [f"s{i}" for i in range(n_switches)]
    nodes = [Node(n, "gpu" if n[0] == "g" else "switch") for n in names]
    links = [Link(f"g{i}", f"s{i % n_switches}", 10.0, 1.0) for i in range(n_gpus)]
    links += [Link(f"s{i % n_switches}", f"g{i}", 10.0, 1.0) for i in range(n_gpus)]
    for _ in range(n_links):
        a, b = rng.sample(names, 2)
        links.append(Link(a, b, 10.0, rng.choice([0.1, 0.5, 1.0])))
    return nodes, links


@pytest.mark.parametrize("seed", range(12))
def test_adjacency_and_reachability_match_a_plain_search(seed):
    nodes, links = random_topology(seed)
    try:
        topo = Topology.build(f"random{seed}", nodes, links)
    except CollsimError as e:   # the generator cuts a GPU off now and then: the plain search must agree
        assert "has no route" in str(e)
        topo = Topology(f"random{seed}", tuple(nodes), tuple(links))
    for u in range(len(topo.nodes)):
        expect = [(li, topo.node_index[l.dst]) for li, l in enumerate(topo.links) if topo.node_index[l.src] == u]
        assert topo._out[u] == expect
    start = topo.gpus[0]
    assert set(np.flatnonzero(topo._out.reached(start))) == plain_reachable(topo, start)
    assert set(np.flatnonzero(topo._in.reached(start))) == plain_reachable(topo, start, forward=False)


def test_a_cut_off_gpu_is_still_named_first_in_rank_order():
    nodes = [Node(n) for n in ("a", "b", "c", "d")] + [Node("sw", "switch")]
    links = [Link(x, "sw", 1.0) for x in "abcd"] + [Link("sw", x, 1.0) for x in "ab"]
    with pytest.raises(CollsimError, match="GPU 'c' has no route to or from GPU 'a'"):
        Topology.build("cut", nodes, links)


def test_the_first_bad_link_is_named_when_several_are_bad():
    nodes = [Node("a"), Node("b")]
    links = [Link("a", "b", 1.0), Link("b", "a", -1.0), Link("a", "b", 1.0, -2.0)]
    with pytest.raises(CollsimError, match=r"link b->a has bandwidth_GBps=-1.0"):
        Topology.build("bad", nodes, links)


def nvls_topology_where_the_direct_switch_is_not_nearest():
    """g0/g1 have a slow direct link to NVSwitch A and a faster way through a NIC to NVSwitch B;
    g2/g3 have two equally fast direct links (a tie the search breaks by node index)."""
    nodes = [Node(f"g{i}") for i in range(4)] + [Node("A", "switch", reduce="nvls"), Node("nic", "nic"),
                                                  Node("B", "switch", reduce="nvls"), Node("C", "switch", reduce="nvls")]
    links = []
    for g in ("g0", "g1"):
        links += [Link(g, "A", 100.0, 2.0), Link("A", g, 100.0, 2.0), Link(g, "nic", 50.0, 0.1), Link("nic", g, 50.0, 0.1)]
    links += [Link("nic", "B", 50.0, 0.1), Link("B", "nic", 50.0, 0.1)]
    for g in ("g2", "g3"):
        links += [Link(g, "C", 100.0, 0.5), Link("C", g, 100.0, 0.5), Link(g, "B", 100.0, 0.5), Link("B", g, 100.0, 0.5)]
    return Topology.build("nvls-odd", nodes, links)


@pytest.mark.parametrize("spec", ["dgx-h100", "dgx-h100:nodes=3", "gb200-nvl72:gpus_per_node=8,nodes=2",
                                  "switch:n=8,nvls=1", "dgx-a100:nodes=2", "dgx-h100:nodes=2,nvls=0", None])
def test_nearest_nvls_switch_matches_a_search_per_gpu(spec):
    topo = nvls_topology_where_the_direct_switch_is_not_nearest() if spec is None else load_topology(spec)
    searched = [nearest_reducer(topo, g, "nvls") for g in topo.gpus]
    assert nearest_nvls_switches(topo).tolist() == [-1 if s is None else s for s in searched]
    # and the domains group ranks by it, in order of their first rank
    by = {}
    for r, s in enumerate(searched):
        by.setdefault(-1 if s is None else s, []).append(r)
    assert nvls_domains(topo, topo.nranks) == (tuple(by), tuple(map(tuple, by.values())))


def test_odd_nvls_topology_takes_the_search_where_the_shortcut_cannot_decide():
    topo = nvls_topology_where_the_direct_switch_is_not_nearest()
    names = [topo.nodes[s].name for s in nearest_nvls_switches(topo)]
    # g0, g1: 0.1 + 0.1 through the NIC beats 2.0 direct; g2, g3: the 0.5 tie goes to the lower index (B)
    assert names == ["B", "B", "B", "B"]


def test_paused_gc_restores_the_collector_and_frees_old_garbage_before_freezing():
    import gc
    import weakref

    from sim.topology import paused_gc

    class Cell:
        pass

    a = Cell()
    a.me = a            # a reference cycle: only the collector frees it
    alive = weakref.ref(a)
    del a
    frozen = gc.get_freeze_count()
    try:
        with paused_gc(freeze=True):
            assert not gc.isenabled()
        assert gc.isenabled() and alive() is None and gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()     # a collector the caller had off stays off
    finally:
        gc.enable()
