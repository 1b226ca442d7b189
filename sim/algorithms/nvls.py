"""NVLS: NVLink SHARP, the NVSwitch reduces and multicasts (``nvls``, ``nvls_tree``).

::

    reduce-scatter:  g0 g1 .. g(k-1) --all shards--> NVSwitch (sums) --shard j--> g_j (its owner)
    all-gather:      g_j --shard j--> NVSwitch --multicast--> g0 g1 .. g(k-1)

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
nccl-tests PR #239), versus 2(k-1)/k S for a ring.

**Heads.** NCCL gives a domain at most ``NCCL_MAX_NVLS_ARITY`` = 32 heads (``search.cc``: the NVLS
graph has ``min(32, GPUs)`` channels, one head GPU each), and only heads run the reduce warps
(``all_reduce.h``: ``nvls->headRank != -1``). On a GB200 NVL72 rack (k = 72) the buffer is cut into 32
shards owned by GPUs 0..31 of the domain; the other 40 GPUs only feed the switch and receive the
multicast. A head then moves (h+1)/h S per direction for h heads. NCCL runs NVLS
reduce_scatter/all_gather only up to 32 ranks (``enqueue.cc``; the tuner says so), so those keep one
shard per GPU. Steps: ``nvls`` all_reduce 4 on one domain,
4 + 2 * levels across domains; ``nvls_tree`` 4 + 2 * ceil(log2 m); ``nvls`` reduce_scatter and
all_gather (one domain) 2 each.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> build_program("nvls", "all_reduce", 8, topology=load_topology("dgx-h100")).steps
4
"""
from __future__ import annotations

import weakref

import numpy as np

from ..chunk_program import ChunkProgram
from . import algorithm
from .collnet import nearest_reducer, switch_tree
from .tree import WINDOW, double_tree, reduce_broadcast

# NCCL_MAX_NVLS_ARITY (NCCL device.h): NVLS graph channels = heads per NVLink domain. Defined here, with the
# program it shapes, and re-exported by sim.nccl.constants with NCCL's other numbers.
NVLS_MAX_HEADS = 32

_EXAMPLES = "e.g. dgx-h100 (nvls=1 by default), gb200-nvl72 or switch:n=8,nvls=1"


# per topology (it is immutable): {n: the NVLink domains of its first n ranks}
_DOMAINS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def nvls_domains(topology, n: int) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """(switch node, ranks) of every NVLink domain, in order of their first rank; a rank with no NVLS
    switch in reach gets switch -1. Found once per topology (selection asks for them a dozen times)."""
    known = _DOMAINS.setdefault(topology, {})
    if n not in known:
        by: dict[int, list[int]] = {}
        for r, sw in enumerate(nearest_nvls_switches(topology)[:n].tolist()):
            by.setdefault(sw, []).append(r)
        known[n] = (tuple(by), tuple(tuple(d) for d in by.values()))
    return known[n]


def nearest_nvls_switches(topology) -> np.ndarray:
    """Per rank, the node index of its nearest NVLS switch (``collnet.nearest_reducer``), -1 for none.

    Most GPUs sit one link from their NVSwitch; when that link is strictly the GPU's fastest way out
    (every other out-link at least as slow, and no other one reaching an NVLS switch as fast), no other
    path can reach a switch sooner, so the answer is that switch without a search. The rest (other
    shapes) take the search. One pass over the links instead of a search per GPU: 131,072 GPUs in well
    under a second."""
    gpus = np.asarray(topology.gpus)
    nearest = np.full(len(gpus), -1, np.int64)
    if not topology.reducing_switches("nvls"):
        return nearest
    src, dst = topology.link_ends
    nnodes = len(topology.nodes)
    is_nvls = np.zeros(nnodes, bool)
    is_nvls[list(topology.reducing_switches("nvls"))] = True
    rank_of = np.full(nnodes, -1, np.int64)
    rank_of[gpus] = np.arange(len(gpus))
    latency = np.array([l.latency_us for l in topology.links])
    out_of_gpu = np.flatnonzero(rank_of[src] >= 0)
    owner, lat, to_nvls = rank_of[src[out_of_gpu]], latency[out_of_gpu], is_nvls[dst[out_of_gpu]]
    fastest = np.full(len(gpus), np.inf)
    np.minimum.at(fastest, owner, lat)
    at_min = lat == fastest[owner]
    # per GPU: links at its minimum latency, and how many of them go to an NVLS switch
    ties = np.bincount(owner[at_min], minlength=len(gpus))
    direct = at_min & to_nvls
    simple = ties == 1
    hit = direct & simple[owner]
    nearest[owner[hit]] = dst[out_of_gpu[hit]]
    for r in np.flatnonzero(nearest < 0).tolist():
        sw = nearest_reducer(topology, topology.gpus[r], "nvls")
        nearest[r] = -1 if sw is None else sw
    return nearest


def nvls_heads(gpus_per_domain: int) -> int:
    """Head GPUs (shards) NCCL gives an NVLink domain: one per GPU, at most NCCL_MAX_NVLS_ARITY (32).

    >>> nvls_heads(8), nvls_heads(72)
    (8, 32)
    """
    return min(NVLS_MAX_HEADS, gpus_per_domain)


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


def _build(coll, n, topology, nchannels, pipeline, tree: bool):
    name = "nvls_tree" if tree else "nvls"
    switches, domains = nvls_domains(topology, n)
    k, m = len(domains[0]), len(domains)
    # all_reduce: shard j belongs to head j (GPU j of each domain); reduce_scatter/all_gather keep one
    # shard per GPU (NCCL runs them with NVLS only up to 32 ranks, where every GPU is a head)
    heads = nvls_heads(k) if coll.name == "all_reduce" else k
    halves = 2 if tree else 1                # nvls_tree: each shard split over NCCL's two trees
    p = ChunkProgram(coll, n, heads * halves, topology=topology)

    def chunk_of(j, t=0):  # single-domain reduce_scatter/all_gather: shard j belongs to rank j
        return (domains[0][j] if m == 1 and coll.name != "all_reduce" else j) * halves + t

    rs, ag = coll.name in ("all_reduce", "reduce_scatter"), coll.name in ("all_reduce", "all_gather")
    inter = 0
    if coll.name == "all_reduce" and m > 1:  # 2. between domains, over the owners of each shard
        for j in range(heads):
            if tree:
                for t, hosts in enumerate(double_tree(m)):
                    parent = np.full(n, -1, np.int64)   # a tree over the owners of shard j
                    for d in np.flatnonzero(hosts >= 0):
                        parent[domains[d][j]] = domains[hosts[d]][j]
                    inter = max(inter, reduce_broadcast(p, parent, chunk_of(j, t), step0=2))
            else:
                inter = switch_tree(p, [dom[j] for dom in domains], chunk_of(j), 2)
    for node, dom in zip(switches, domains):
        sw = p.switch(node)
        for j, owner in enumerate(dom[:heads]):
            for t in range(halves):
                c = chunk_of(j, t)
                if rs:   # 1. every GPU into the switch (summed), the sum of shard j to its owner
                    p.send(dom, sw, chunk=c, step=0, reduce=True)
                    p.send(sw, owner, chunk=c, step=1)
                if ag:   # 3. the owner into the switch, the switch multicasts to every GPU
                    base = 2 + inter if rs else 0
                    p.send(owner, sw, chunk=c, step=base)
                    p.send(sw, dom, chunk=c, step=base + 1)
    return p.program(name, steps=2 * (int(rs) + int(ag)) + inter, nchannels=nchannels, pipeline=pipeline,
                     window=WINDOW, domains=m, gpus_per_domain=k)


@algorithm("nvls", ("all_reduce", "reduce_scatter", "all_gather"),
           "NVLink SHARP: the NVSwitch reduces and multicasts inside a node (IB SHARP between nodes)",
           requirement=lambda topo, coll, n: _reason(topo, coll, n, False),
           pipelined=("all_reduce", "reduce_scatter", "all_gather"), nccl=("all_reduce", "reduce_scatter", "all_gather"))
def build_nvls(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    return _build(coll, n, topology, nchannels, pipeline, False)


@algorithm("nvls_tree", ("all_reduce",), "NVLink SHARP inside each node, NCCL's double binary tree between nodes",
           requirement=lambda topo, coll, n: _reason(topo, coll, n, True), pipelined=("all_reduce",),
           nccl=("all_reduce",))
def build_nvls_tree(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    return _build(coll, n, topology, nchannels, pipeline, True)

