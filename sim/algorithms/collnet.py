"""CollNet: IB SHARP all_reduce, the network switches reduce (``collnet_direct``, ``collnet_chain``).

::

    host 0: g0 g1 .. g(k-1) --(1)--> head j --(2)--> SHARP switch (sums every host's shard j)
    host 1: g0 g1 .. g(k-1) --(1)--> head j --(2)-->      |
                      ^                   ^------(3)------+  multicast of the sum
                      +--------(4)-------- head j

Each host's buffer is cut into ``ppn`` shards, one per GPU (the *head* of shard j is local GPU j, which
talks to the network through its own NIC, as NCCL makes one head per rail). A piece goes:

1. inside the host, to its head: ``collnet_direct`` sends every shard straight to its head (all-to-all,
   1 step; NCCL's "alltoall within the node"); ``collnet_chain`` passes shard j along a chain of the
   host's GPUs j+1, j+2, ..., ending at j (ppn-1 steps), each GPU adding its part;
2. up the switches: every head sends its shard to the nearest SHARP switch (``reduce="sharp"``),
   which sums what its hosts sent. If the heads of one shard sit under different leaf switches, the
   leaves forward their partial sums to one root switch (the SHARP switch nearest to all of them,
   normally the spine), which sums them: a reduction tree over switches;
3. back down: the root switch multicasts the sum to its leaves and they to their heads (a copy per
   destination, as the switch's multicast does);
4. inside the host, from the head to the others: direct (1 step) or back along the chain (ppn-1 steps).

So every NIC sends S/ppn per host once and receives it once: an endpoint moves S (not 2(n-1)/n S as in
a ring), which is SHARP's bandwidth advantage. Steps per piece (``levels`` = 1 or 2 switch levels):
``collnet_direct``: ``2 * [ppn > 1] + 2 * levels``; ``collnet_chain``: ``2 * (ppn - 1) + 2 * levels``.
On ``switch:n=8,sharp=1`` (one GPU per host): 2 steps; the switch is agent n of the Program.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> p = build_program("collnet_direct", "all_reduce", 8, topology=load_topology("switch:n=8,sharp=1"))
>>> p.steps, p.switches
(2, ('switch',))
"""
from __future__ import annotations

import heapq
import math
import weakref

import numpy as np

from ..chunk_program import ChunkProgram
from ..errors import CollsimError
from . import algorithm
from .tree import WINDOW, host_groups, uniform_hosts

_EXAMPLES = "e.g. switch:n=8,sharp=1 or dgx-h100:nodes=2,sharp=1"
# per topology (routes are fixed): out-links of every node, and the SHARP switches that are some GPU's nearest
_OUT_LINKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_SHARP_LEAVES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


# ---- helpers shared with nvls.py ------------------------------------------------------------------------
def nearest_reducer(topology, node: int, kind: str) -> int | None:
    """The reducing switch of ``kind`` closest (route latency) to node ``node``, not routing through GPUs."""
    nodes = topology.nodes
    if topology not in _OUT_LINKS:
        out: list[list[tuple[int, int]]] = [[] for _ in nodes]
        for li, link in enumerate(topology.links):
            out[topology.node_index[link.src]].append((li, topology.node_index[link.dst]))
        _OUT_LINKS[topology] = out
    out = _OUT_LINKS[topology]
    best = {node: 0.0}
    heap = [(0.0, node)]
    while heap:
        cost, u = heapq.heappop(heap)
        if cost > best.get(u, math.inf):
            continue
        if u != node and nodes[u].reduce == kind:
            return u
        if u != node and nodes[u].kind == "gpu":
            continue
        for li, v in out[u]:
            c = cost + topology.links[li].latency_us + 1e-9
            if c < best.get(v, math.inf):
                best[v] = c
                heapq.heappush(heap, (c, v))
    return None


def switch_tree(p: ChunkProgram, heads: list[int], shard: int, step0: int) -> int:
    """All-reduce chunk ``shard``, held by ``heads`` (one rank per host), through the SHARP switches,
    starting at step ``step0``. Returns the steps used: 2 under one switch, 4 through leaves and a root."""
    topology = p.topology
    found = [nearest_reducer(topology, topology.gpus[h], "sharp") for h in heads]
    if None in found:
        lost = topology.nodes[topology.gpus[heads[found.index(None)]]].name
        raise CollsimError(f"GPU {lost} reaches no SHARP switch without passing through another GPU: connect it to the network")
    first = [sw for sw in found if sw is not None]   # all of them (checked above)
    leaves = sorted(set(first))
    if len(leaves) == 1:       # one switch: up (summed), then the sum back down
        sw = p.switch(leaves[0])
        for h in heads:
            p.send(h, sw, chunk=shard, step=step0, reduce=True)
            p.send(sw, h, chunk=shard, step=step0 + 1)
        return 2
    top = _root_switch(topology, leaves)
    root = p.switch(top)
    for h, leaf in zip(heads, first):
        if leaf == top:        # a head right under the root skips the leaf level
            p.send(h, root, chunk=shard, step=step0 + 1, reduce=True)
            p.send(root, h, chunk=shard, step=step0 + 2)
        else:
            p.send(h, p.switch(leaf), chunk=shard, step=step0, reduce=True)
            p.send(p.switch(leaf), h, chunk=shard, step=step0 + 3)
    for leaf in leaves:        # leaves forward their partial sums to the root, which multicasts back
        if leaf != top:
            p.send(p.switch(leaf), root, chunk=shard, step=step0 + 1, reduce=True)
            p.send(root, p.switch(leaf), chunk=shard, step=step0 + 2)
    return 4


def _root_switch(topology, leaves: list[int]) -> int:
    """The SHARP switch that minimises the worst route latency from ``leaves`` (ties: lowest index),
    looking first at the switches that are nobody's nearest (the spines), then at the leaves."""
    sharp = topology.reducing_switches("sharp")
    cands = [s for s in sharp if s not in _leaf_set(topology)] or leaves
    if len(cands) == 1:
        return cands[0]

    def cost(s):
        return max(sum(topology.links[i].latency_us for i in topology.route_nodes(l, s)) for l in leaves)
    return min(cands, key=lambda s: (cost(s), s))


def _leaf_set(topology) -> set[int]:
    """SHARP switches that are some GPU's nearest."""
    if topology not in _SHARP_LEAVES:
        _SHARP_LEAVES[topology] = {nearest_reducer(topology, g, "sharp") for g in topology.gpus} - {None}
    return _SHARP_LEAVES[topology]


def sharp_reason(topology, n: int) -> str | None:
    if topology is None:
        return f"needs a topology with an IB SHARP switch (a switch with reduce=sharp), {_EXAMPLES}"
    if not topology.reducing_switches("sharp"):
        return f"topology {topology.name} has no IB SHARP switch: use a switch with reduce=sharp ({_EXAMPLES})"
    if n != topology.nranks:
        return f"it runs on every GPU of the topology ({topology.nranks}), not {n}"
    return uniform_hosts(topology, n)


# ---- the algorithms -------------------------------------------------------------------------------------
def _requirement(topology, collective, n):
    return sharp_reason(topology, n)


def _build(coll, n, topology, nchannels, pipeline, chain: bool, name: str):
    groups = host_groups(topology, n)
    k = len(groups[0])                       # GPUs per host = shards = heads
    p = ChunkProgram(coll, n, k, topology=topology)
    intra = (k - 1) if chain else min(1, k - 1)
    for j in range(k):
        for g in groups:                     # 1. inside each host, to the head of shard j
            if chain:                        # g[j+1] -> g[j+2] -> ... -> g[j], summing
                order = [g[(j + 1 + q) % k] for q in range(k)]
                p.send(order[:-1], order[1:], chunk=j, step=np.arange(k - 1), reduce=True)
            else:                            # everyone straight to the head
                p.send([g[i] for i in range(k) if i != j], g[j], chunk=j, step=0, reduce=True)
        inter = switch_tree(p, [g[j] for g in groups], j, intra)   # 2-3. through the switches
        base = intra + inter
        for g in groups:                     # 4. from the head back to the host's other GPUs
            if chain:                        # g[j] -> g[j-1] -> ... -> g[j+1]
                order = [g[(j - q) % k] for q in range(k)]
                p.send(order[:-1], order[1:], chunk=j, step=base + np.arange(k - 1))
            else:
                p.send(g[j], [g[i] for i in range(k) if i != j], chunk=j, step=base)
    return p.program(name, steps=2 * intra + inter, nchannels=nchannels, pipeline=pipeline, window=WINDOW,
                     ppn=k, hosts=len(groups))


@algorithm("collnet_direct", ("all_reduce",), "IB SHARP: all-to-all to the heads inside a host, switches reduce and multicast",
           requirement=_requirement, pipelined=("all_reduce",), nccl=("all_reduce",))
def build_collnet_direct(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    return _build(coll, n, topology, nchannels, pipeline, False, "collnet_direct")


@algorithm("collnet_chain", ("all_reduce",), "IB SHARP: a chain to the head inside a host, switches reduce and multicast",
           requirement=_requirement, pipelined=("all_reduce",), nccl=("all_reduce",))
def build_collnet_chain(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    return _build(coll, n, topology, nchannels, pipeline, True, "collnet_chain")
