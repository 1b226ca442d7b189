"""CollNet: IB SHARP all_reduce, the network switches reduce (``collnet_direct``, ``collnet_chain``).

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

import numpy as np

from sim.errors import CollsimError
from sim.program import Program

from .registry import algorithm
from .tree import WINDOW, concat, host_groups, tile, uniform_hosts

_EXAMPLES = "e.g. switch:n=8,sharp=1 or dgx-h100:nodes=2,sharp=1"


# ---- helpers shared with nvls.py ------------------------------------------------------------------------
def nearest_reducer(topology, node: int, kind: str) -> int | None:
    """The reducing switch of ``kind`` closest (route latency) to node ``node``, not routing through GPUs."""
    nodes = topology.nodes
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
        for li, v in topology._out[u]:
            c = cost + topology.links[li].latency_us + 1e-9
            if c < best.get(v, math.inf):
                best[v] = c
                heapq.heappush(heap, (c, v))
    return None


def switch_tree_ops(topology, heads: list[int], shard: int, step0: int, switch_agent) -> tuple[list, int]:
    """All-reduce shard ``shard`` held by ``heads`` (one rank per host) through SHARP switches.

    ``switch_agent(node_index) -> agent id``. Returns the op columns and the steps used (2 or 4).
    """
    first = [nearest_reducer(topology, topology.gpus[h], "sharp") for h in heads]
    if None in first:
        lost = topology.nodes[topology.gpus[heads[first.index(None)]]].name
        raise CollsimError(f"GPU {lost} reaches no SHARP switch without passing through another GPU: connect it to the network")
    leaves = sorted(set(first))
    ops = []
    if len(leaves) == 1:
        sw = switch_agent(leaves[0])
        for h in heads:
            ops.append((h, sw, step0, True))
            ops.append((sw, h, step0 + 1, False))
        levels = 1
    else:
        root = _root_switch(topology, leaves)
        r = switch_agent(root)
        for h, leaf in zip(heads, first):
            if leaf == root:  # a head right under the root skips the leaf level
                ops += [(h, r, step0 + 1, True), (r, h, step0 + 2, False)]
            else:
                ops += [(h, switch_agent(leaf), step0, True), (switch_agent(leaf), h, step0 + 3, False)]
        for leaf in leaves:
            if leaf != root:
                ops += [(switch_agent(leaf), r, step0 + 1, True), (r, switch_agent(leaf), step0 + 2, False)]
        levels = 2
    src, dst, step, red = (np.array(c) for c in zip(*ops))
    return [src, dst, np.full(len(src), shard), step, red], 2 * levels


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
    """SHARP switches that are some GPU's nearest (cached on the topology: routes are fixed)."""
    cache = topology.__dict__.setdefault("_collsim_sharp_leaves", {})
    if "leaves" not in cache:
        cache["leaves"] = {nearest_reducer(topology, g, "sharp") for g in topology.gpus} - {None}
    return cache["leaves"]


def sharp_reason(topology, n: int) -> str | None:
    if topology is None:
        return f"needs a topology with an IB SHARP switch (a switch with reduce=sharp), {_EXAMPLES}"
    if not topology.reducing_switches("sharp"):
        return f"topology {topology.name} has no IB SHARP switch: use a switch with reduce=sharp ({_EXAMPLES})"
    if n != topology.nranks:
        return f"it runs on every GPU of the topology ({topology.nranks}), not {n}"
    return uniform_hosts(topology, n)


class SwitchAgents:
    """Switch node index -> Program agent id (n, n+1, ... in order of first use)."""

    def __init__(self, topology, n: int):
        self.topology, self.n, self.index = topology, n, {}

    def __call__(self, node: int) -> int:
        return self.index.setdefault(node, self.n + len(self.index))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.topology.nodes[i].name for i in self.index)


# ---- the algorithms -------------------------------------------------------------------------------------
def _requirement(topology, collective, n):
    return sharp_reason(topology, n)


def _build(coll, n, topology, nchannels, pipeline, chain: bool, name: str) -> Program:
    groups = host_groups(topology, n)
    k = len(groups[0])
    agents = SwitchAgents(topology, n)
    intra = (k - 1) if chain else min(1, k - 1)
    parts = []
    inter_steps = 0
    for j in range(k):
        # 1. to the head of shard j
        for g in groups:
            if chain:  # g[j+1] -> g[j+2] -> ... -> g[j], summing
                order = [g[(j + 1 + q) % k] for q in range(k)]
                parts.append([order[:-1], order[1:], [j] * (k - 1), list(range(k - 1)), [True] * (k - 1)])
            else:
                others = [g[i] for i in range(k) if i != j]
                parts.append([others, [g[j]] * len(others), [j] * len(others), [0] * len(others), [True] * len(others)])
        # 2-3. through the switches
        cols, inter_steps = switch_tree_ops(topology, [g[j] for g in groups], j, intra, agents)
        parts.append(cols)
        # 4. back from the head
        base = intra + inter_steps
        for g in groups:
            if chain:  # g[j] -> g[j-1] -> ... -> g[j+1]
                order = [g[(j - q) % k] for q in range(k)]
                parts.append([order[:-1], order[1:], [j] * (k - 1), [base + q for q in range(k - 1)], [False] * (k - 1)])
            else:
                others = [g[i] for i in range(k) if i != j]
                parts.append([[g[j]] * len(others), others, [j] * len(others), [base] * len(others), [False] * len(others)])
    (src, dst, chunk, step, red), channel, nchunks = tile(concat(*parts), k, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm=name,
                            steps=2 * intra + inter_steps, switches=agents.names,
                            params={"nchannels": nchannels, "pipeline": pipeline, "ppn": k, "hosts": len(groups),
                                    "window": WINDOW})


@algorithm("collnet_direct", ("all_reduce",), "IB SHARP: all-to-all to the heads inside a host, switches reduce and multicast",
           requirement=_requirement, pipelined=("all_reduce",))
def build_collnet_direct(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    return _build(coll, n, topology, nchannels, pipeline, False, "collnet_direct")


@algorithm("collnet_chain", ("all_reduce",), "IB SHARP: a chain to the head inside a host, switches reduce and multicast",
           requirement=_requirement, pipelined=("all_reduce",))
def build_collnet_chain(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    return _build(coll, n, topology, nchannels, pipeline, True, "collnet_chain")
