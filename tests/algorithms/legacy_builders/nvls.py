"""NVLS: NVLink SHARP, the NVSwitch reduces and multicasts (``nvls``, ``nvls_tree``).

An *NVLink domain* is the set of GPUs whose nearest NVLS switch (``reduce="nvls"``) is the same: a DGX
H100 node, a GB200 NVL72 rack, ``switch:n=8,nvls=1``. Shard j of the buffer belongs to the domain's
j-th GPU (its *owner*). Inside a domain NCCL's NVLS kernels do, per piece:

1. reduce-scatter (2 steps): every GPU sends every shard into the switch, which sums them
   (``multimem.ld_reduce``); the switch returns shard j's sum to its owner;
2. between domains: ``nvls`` hands the owners to IB SHARP (the network switches reduce, as in
   ``collnet``, 2 or 4 steps; NCCL's "NVLS within the node and CollNet between nodes"); ``nvls_tree`` runs
   NCCL's double binary tree over the domains' owners of each shard (each tree half the shard,
   ``2 * ceil(log2 m)`` steps for m domains);
3. all-gather (2 steps): the owner writes its shard into the switch (``multimem.st``), which
   multicasts it to every GPU of the domain, the owner included.

So every GPU sends S + S/k into the switch and receives S/k + S from it for k GPUs per domain: the
(k+1)/k S per direction of the NVLS bandwidth formula (algbw = busbw * k/(k+1), sjeaugey in
nccl-tests PR #239), versus 2(k-1)/k S for a ring. Steps: ``nvls`` all_reduce 4 on one domain,
4 + 2 * levels across domains; ``nvls_tree`` 4 + 2 * ceil(log2 m); ``nvls`` reduce_scatter and
all_gather (one domain) 2 each.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> build_program("nvls", "all_reduce", 8, topology=load_topology("dgx-h100")).steps
4
"""
from __future__ import annotations

import numpy as np

from sim.program import Program

from .collnet import SwitchAgents, nearest_reducer, switch_tree_ops
from .registry import algorithm
from .tree import WINDOW, concat, double_tree, tile, tree_ops

_EXAMPLES = "e.g. dgx-h100 (nvls=1 by default), gb200-nvl72 or switch:n=8,nvls=1"


def nvls_domains(topology, n: int) -> tuple[list[int], list[list[int]]]:
    """(switch node, ranks) of every NVLink domain, in order of their first rank; a rank with no NVLS
    switch in reach gets switch -1."""
    by: dict[int, list[int]] = {}
    for r in range(n):
        sw = nearest_reducer(topology, topology.gpus[r], "nvls")
        by.setdefault(-1 if sw is None else sw, []).append(r)
    return list(by), list(by.values())


def _reason(topology, collective: str, n: int, tree: bool) -> str | None:
    name = "nvls_tree" if tree else "nvls"
    if topology is None:
        return f"needs an NVSwitch with nvls=1 (NVLink SHARP), {_EXAMPLES}"
    if not topology.reducing_switches("nvls"):
        return (f"topology {topology.name} has no NVSwitch with nvls=1 (NVLink SHARP, third-generation NVSwitch on "
                f"Hopper or later): {name} cannot run here; {_EXAMPLES}")
    if n != topology.nranks:
        return f"it runs on every GPU of the topology ({topology.nranks}), not {n}"
    switches, domains = nvls_domains(topology, n)
    if -1 in switches:
        return f"GPU {topology.nodes[topology.gpus[domains[switches.index(-1)][0]]].name} reaches no NVLS switch"
    sizes = {len(d) for d in domains}
    if len(sizes) > 1:
        return f"its NVLink domains have different GPU counts ({', '.join(map(str, sorted(sizes)))}): it needs equal domains"
    if tree and len(domains) < 2:
        return "nvls_tree joins several NVLink domains (nodes) with a tree; on one domain use nvls (NCCL disables NVLSTree on one node)"
    if not tree and len(domains) > 1:
        if collective != "all_reduce":
            return f"nvls serves {collective} inside one NVLink domain only; this topology has {len(domains)}"
        if not topology.reducing_switches("sharp"):
            return (f"the {len(domains)} NVLink domains need IB SHARP between them (sharp=1, NCCL's NVLS+CollNet); "
                    f"without it use nvls_tree")
    return None


def _build(coll, n, topology, nchannels, pipeline, tree: bool) -> Program:
    name = "nvls_tree" if tree else "nvls"
    switches, domains = nvls_domains(topology, n)
    k, m = len(domains[0]), len(domains)
    agents = SwitchAgents(topology, n)
    halves = 2 if tree else 1
    parts = []

    def chunk_of(j, t=0):  # single-domain reduce_scatter/all_gather: shard j belongs to rank j
        return (domains[0][j] if m == 1 else j) * halves + t

    rs, ag = coll.name in ("all_reduce", "reduce_scatter"), coll.name in ("all_reduce", "all_gather")
    inter_steps = 0
    if coll.name == "all_reduce" and m > 1:
        if tree:
            t0, t1 = double_tree(m)
            for j in range(k):
                for t, hp in enumerate((t0, t1)):
                    parent = np.full(n, -1, np.int64)   # a tree over the owners of shard j
                    for d in np.flatnonzero(hp >= 0):
                        parent[domains[d][j]] = domains[hp[d]][j]
                    cols, s = tree_ops(parent, True, True, chunk_of(j, t), step0=2)
                    parts.append(cols)
                    inter_steps = max(inter_steps, s)
        else:
            for j in range(k):
                cols, inter_steps = switch_tree_ops(topology, [dom[j] for dom in domains], chunk_of(j), 2, agents)
                parts.append(cols)
    for sw, dom in zip(switches, domains):
        a = agents(sw)
        for j, owner in enumerate(dom):
            for t in range(halves):
                c = chunk_of(j, t)
                if rs:  # every GPU into the switch (summed), the sum of shard j to its owner
                    parts.append([dom, [a] * k, [c] * k, [0] * k, [True] * k])
                    parts.append([[a], [owner], [c], [1], [False]])
                if ag:  # the owner into the switch, the switch to every GPU
                    base = 2 + inter_steps if rs else 0
                    parts.append([[owner], [a], [c], [base], [False]])
                    parts.append([[a] * k, dom, [c] * k, [base + 1] * k, [False] * k])
    steps = 2 * (int(rs) + int(ag)) + inter_steps
    (src, dst, chunk, step, red), channel, nchunks = tile(concat(*parts), k * halves, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm=name, steps=steps,
                            switches=agents.names, params={"nchannels": nchannels, "pipeline": pipeline,
                                                           "domains": m, "gpus_per_domain": k, "window": WINDOW})


@algorithm("nvls", ("all_reduce", "reduce_scatter", "all_gather"),
           "NVLink SHARP: the NVSwitch reduces and multicasts inside a node (IB SHARP between nodes)",
           requirement=lambda topo, coll, n: _reason(topo, coll, n, False),
           pipelined=("all_reduce", "reduce_scatter", "all_gather"))
def build_nvls(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    return _build(coll, n, topology, nchannels, pipeline, False)


@algorithm("nvls_tree", ("all_reduce",), "NVLink SHARP inside each node, NCCL's double binary tree between nodes",
           requirement=lambda topo, coll, n: _reason(topo, coll, n, True), pipelined=("all_reduce",))
def build_nvls_tree(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    return _build(coll, n, topology, nchannels, pipeline, True)

