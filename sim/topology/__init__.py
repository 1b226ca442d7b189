"""Topologies: GPUs, NICs and switches joined by directed links, and the routes between them.

A :class:`Topology` is immutable once built and validated. Build one from a spec string
(``"ring:n=8,bandwidth_GBps=100"``, see :mod:`sim.presets`), from a YAML/JSON file (see
:func:`load_topology_file`), or in code:

>>> topo = Topology.build("pair", nodes=[Node("g0", "gpu"), Node("g1", "gpu")],
...                       links=[Link("g0", "g1", 100.0, 1.0), Link("g1", "g0", 100.0, 1.0)])
>>> topo.nranks, [topo.links[i].dst for i in topo.route(0, 1)]
(2, ['g1'])

Units: ``bandwidth_GBps`` is decimal GB/s (1e9 B/s) in the link's direction; ``latency_us`` is the
time the first byte takes to cross the link. Links are full duplex only if both directions are listed
(the presets and ``duplex: true`` in files list both).

Ranks are the GPUs in the order they are listed. ``host`` groups GPUs into servers (a "node" in NCCL's
vocabulary: GPUs that share NVLink/NVSwitch); GPUs with no host are each their own host, which is what a
flat ring, mesh or single switch means.
"""
from __future__ import annotations

import gc
import heapq
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

import numpy as np

from ..errors import CollsimError
from .hardware import Hardware

NODE_KINDS = ("gpu", "nic", "switch", "cpu")
LINK_KINDS = ("nvlink", "pcie", "net", "local")
REDUCE_KINDS = (None, "sharp", "nvls")


LONG_LIVED_LINKS = 100_000   # a topology this large is frozen out of the cycle collector's passes


@contextmanager
def paused_gc(freeze: bool = False):
    """Run a block with Python's cycle collector off (it is restored afterwards).

    Building a cluster preset creates millions of small objects and no reference cycles; with the
    collector on, each of its passes walks every object made so far, which took over half of the time
    to build ``dgx-h100:nodes=16384`` (1.3 M links). Reference counting still frees everything.
    ``freeze``: also move what exists at the end into the collector's permanent generation
    (``gc.freeze``), so that later passes do not walk the topology again (they took 3 of the 6 s of
    NVLink-domain discovery on that cluster); a topology lives as long as the run that uses it. Garbage
    that exists before the block is collected first, so that freezing keeps nothing that should go.
    """
    was_enabled = gc.isenabled()
    if freeze:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class Node:
    """A device. ``reduce`` marks a switch that can reduce in the network (``"sharp"`` for an IB
    switch, ``"nvls"`` for an NVSwitch); ``reduce_bandwidth_GBps`` caps how fast it reduces."""

    name: str
    kind: str = "gpu"
    host: int | None = None
    reduce: str | None = None
    reduce_bandwidth_GBps: float = math.inf
    reduce_latency_us: float = 0.0
    label: str = ""


@dataclass(frozen=True)
class Link:
    """One direction of a cable or a switch port: ``src -> dst`` at ``bandwidth_GBps``."""

    src: str
    dst: str
    bandwidth_GBps: float
    latency_us: float = 0.0
    kind: str = "nvlink"


@dataclass(frozen=True, eq=False)
class Topology:
    """Nodes, directed links and routes. Use :meth:`build` (validates) rather than the constructor."""

    name: str
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    hardware: Hardware = field(default_factory=Hardware)  # typed facts for the NCCL model (sim.hardware)

    @property
    def meta(self) -> dict:
        """The hardware facts as the ``meta`` mapping of topology files and ``topo --format json`` (a fresh
        copy: read facts from :attr:`hardware`)."""
        return self.hardware.to_meta()

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def build(cls, name: str, nodes, links, meta: Hardware | dict | None = None) -> Topology:
        """Validate and build; ``meta``: a :class:`~sim.hardware.Hardware` or a ``meta`` mapping (validated
        into one)."""
        links = tuple(links)
        hardware = Hardware.from_meta(meta, f"topology {name!r}: meta", strict=False)
        with paused_gc(freeze=len(links) >= LONG_LIVED_LINKS):
            topo = cls(name, tuple(nodes), links, hardware)
            topo._validate()
        return topo

    def _validate(self) -> None:
        """Check nodes, links and connectivity; the first problem is an error naming it.

        Each distinct value (node kind, reduce settings, link bandwidth/latency/kind) is checked once and
        connectivity is a numpy search, so a 1.3 M-link cluster validates in about a second; only when
        something is wrong do the per-item loops run, to name the first offender.
        """
        if not self._nodes_look_valid():
            self._check_nodes()
        if len(self.gpus) < 2:
            raise CollsimError(f"topology {self.name!r} has {len(self.gpus)} GPU(s): a collective needs at least 2")
        if not self._links_look_valid():
            self._check_links()
        src, dst = self.link_ends   # (every end is known: checked above)
        linked = np.zeros(len(self.nodes), bool)
        linked[src] = True
        linked[dst] = True
        for i in np.flatnonzero(~linked):
            n = self.nodes[i]
            if n.kind != "gpu":  # (a GPU gets "no route" below) e.g. a SHARP switch declared but never cabled: it would be chosen, then fail
                raise CollsimError(f"topology {self.name!r}: {n.kind} {n.name!r} has no links: connect it (links: "
                                   f"- {{src: ..., dst: {n.name}, duplex: true}}) or remove it")
        # Every GPU must reach every other GPU: check reachability from GPU 0 and back to it.
        first = self.gpus[0]
        gpus = np.asarray(self.gpus)
        fwd, back = self._out.reached(first), self._in.reached(first)
        cut = gpus[~(fwd[gpus] & back[gpus])]
        if len(cut):
            raise CollsimError(f"topology {self.name!r}: GPU {self.nodes[cut[0]].name!r} has no route to or from "
                               f"GPU {self.nodes[first].name!r}: add links so that every GPU is connected")

    def _nodes_look_valid(self) -> bool:
        names = list(map(attrgetter("name"), self.nodes))
        if set(map(type, names)) != {str} or len(set(names)) != len(names) or "" in names:
            return False
        try:
            settings = set(map(attrgetter("kind", "reduce", "reduce_bandwidth_GBps", "reduce_latency_us"), self.nodes))
        except TypeError:   # an unhashable value (a list from a file): the item checks name it
            return False
        return all(kind in NODE_KINDS and reduce in REDUCE_KINDS and not (reduce and kind != "switch")
                   and isinstance(bw, (int, float)) and bw > 0
                   and isinstance(lat, (int, float)) and 0 <= lat < math.inf
                   for kind, reduce, bw, lat in settings)

    def _links_look_valid(self) -> bool:
        try:
            src, dst = self.link_ends
            settings = set(map(attrgetter("bandwidth_GBps", "latency_us", "kind"), self.links))
        except (KeyError, TypeError):   # an unknown node name, an unhashable value
            return False
        if (src == dst).any():
            return False
        return all(isinstance(bw, (int, float)) and bw > 0 and math.isfinite(bw)
                   and isinstance(lat, (int, float)) and lat >= 0 and math.isfinite(lat) and kind in LINK_KINDS
                   for bw, lat, kind in settings)

    def _check_nodes(self) -> None:
        names = set()
        for n in self.nodes:
            if not isinstance(n.name, str) or not n.name:
                raise CollsimError(f"topology {self.name!r}: a node has no name: give every node a unique 'name'")
            if n.name in names:
                raise CollsimError(f"topology {self.name!r}: node name {n.name!r} is used twice: names must be unique")
            names.add(n.name)
            if n.kind not in NODE_KINDS:
                raise CollsimError(f"topology {self.name!r}: node {n.name!r} has kind {n.kind!r}: use one of {', '.join(NODE_KINDS)}")
            if n.reduce not in REDUCE_KINDS:
                raise CollsimError(f"topology {self.name!r}: node {n.name!r} has reduce={n.reduce!r}: use sharp, nvls or leave it out")
            if n.reduce and n.kind != "switch":
                raise CollsimError(f"topology {self.name!r}: node {n.name!r} reduces ({n.reduce}) but is a {n.kind}: only switches reduce in the network")
            if not (isinstance(n.reduce_bandwidth_GBps, (int, float)) and n.reduce_bandwidth_GBps > 0):
                raise CollsimError(f"topology {self.name!r}: switch {n.name!r} has reduce_bandwidth_GBps={n.reduce_bandwidth_GBps}: it must be positive")
            if not (isinstance(n.reduce_latency_us, (int, float)) and 0 <= n.reduce_latency_us < math.inf):
                raise CollsimError(f"topology {self.name!r}: switch {n.name!r} has reduce_latency_us={n.reduce_latency_us}: "
                                   "it must be zero or more microseconds (a negative latency would make reduction free)")

    def _check_links(self) -> None:
        names = self.node_index
        for l in self.links:
            for end in (l.src, l.dst):
                if end not in names:
                    raise CollsimError(f"topology {self.name!r}: link {l.src}->{l.dst} names unknown node {end!r}: declare it under nodes")
            if l.src == l.dst:
                raise CollsimError(f"topology {self.name!r}: link {l.src}->{l.dst} is a loop: a link joins two different nodes")
            if not (isinstance(l.bandwidth_GBps, (int, float)) and l.bandwidth_GBps > 0 and math.isfinite(l.bandwidth_GBps)):
                raise CollsimError(f"topology {self.name!r}: link {l.src}->{l.dst} has bandwidth_GBps={l.bandwidth_GBps}: bandwidth must be a positive number of GB/s")
            if not (isinstance(l.latency_us, (int, float)) and l.latency_us >= 0 and math.isfinite(l.latency_us)):
                raise CollsimError(f"topology {self.name!r}: link {l.src}->{l.dst} has latency_us={l.latency_us}: latency must be zero or more microseconds")
            if l.kind not in LINK_KINDS:
                raise CollsimError(f"topology {self.name!r}: link {l.src}->{l.dst} has kind {l.kind!r}: use one of {', '.join(LINK_KINDS)}")

    # ---- structure ------------------------------------------------------------------------------
    @cached_property
    def node_index(self) -> dict[str, int]:
        return {n.name: i for i, n in enumerate(self.nodes)}

    @cached_property
    def link_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(source node index, destination node index) of every link, as two int64 arrays."""
        index = self.node_index.__getitem__
        src = np.array(list(map(index, map(attrgetter("src"), self.links))), np.int64)
        dst = np.array(list(map(index, map(attrgetter("dst"), self.links))), np.int64)
        return src, dst

    @cached_property
    def gpus(self) -> tuple[int, ...]:
        """Node indices of the GPUs, in rank order."""
        return tuple(i for i, n in enumerate(self.nodes) if n.kind == "gpu")

    @property
    def nranks(self) -> int:
        return len(self.gpus)

    @cached_property
    def _out(self) -> "Adjacency":
        src, dst = self.link_ends
        return Adjacency(len(self.nodes), src, dst)

    @cached_property
    def _in(self) -> "Adjacency":
        src, dst = self.link_ends
        return Adjacency(len(self.nodes), dst, src)

    @cached_property
    def hosts(self) -> tuple[tuple[int, ...], ...]:
        """Ranks grouped by host (server), hosts in order of their first rank."""
        groups: dict[object, list[int]] = {}
        for rank, g in enumerate(self.gpus):
            h = self.nodes[g].host
            groups.setdefault(("h", h) if h is not None else ("r", rank), []).append(rank)
        return tuple(tuple(v) for v in groups.values())

    @property
    def nhosts(self) -> int:
        return len(self.hosts)

    def reducing_switches(self, kind: str | None = None) -> tuple[int, ...]:
        """Node indices of switches that reduce (``kind`` "sharp"/"nvls" to filter)."""
        return tuple(i for i in self._reducers if kind is None or self.nodes[i].reduce == kind)

    @cached_property
    def _reducers(self) -> tuple[int, ...]:
        return tuple(i for i, n in enumerate(self.nodes) if n.reduce)

    # ---- routes ---------------------------------------------------------------------------------
    def route(self, src_rank: int, dst_rank: int) -> tuple[int, ...]:
        """Link indices on the route from GPU ``src_rank`` to GPU ``dst_rank``."""
        return self.route_nodes(self.gpus[src_rank], self.gpus[dst_rank])

    def route_nodes(self, src: int, dst: int) -> tuple[int, ...]:
        """Link indices on the lowest-latency route between two nodes (by index).

        Routes never pass *through* a GPU while a path through switches/NICs exists (GPUs do not forward
        traffic in NCCL's model except as explicit algorithm hops); ties go to fewer hops, then to the
        lowest link index, so routes are deterministic.
        """
        key = (src, dst)
        cache = self._route_cache
        if key not in cache:
            cache[key] = self._dijkstra(src, dst)
        return cache[key]

    @cached_property
    def _route_cache(self) -> dict:
        return {}

    def share_routes(self, other: Topology) -> None:
        """Use ``other``'s route cache: for a copy of ``other`` with the same nodes and links in the same
        order whose latencies keep their order (the routes are then the same; only bandwidths differ)."""
        if len(other.links) != len(self.links) or other.nodes != self.nodes:
            raise ValueError("share_routes: the topologies' nodes or links differ")
        self.__dict__["_route_cache"] = other._route_cache

    @cached_property
    def _node_hosts(self) -> tuple:
        return tuple(n.host for n in self.nodes)

    @cached_property
    def _out_forwarding(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per node, its out-links ``(link, node)`` to nodes that forward traffic (not GPUs), in link order."""
        gpu = [n.kind == "gpu" for n in self.nodes]
        return tuple(tuple((li, v) for li, v in self._out[u] if not gpu[v]) for u in range(len(self.nodes)))

    @cached_property
    def _links_between(self) -> dict:
        """``(u, v) -> [link, ...]`` in link order (parallel links kept)."""
        out: dict = {}
        for u in range(len(self.nodes)):
            for li, v in self._out[u]:
                out.setdefault((u, v), []).append(li)
        return out

    def _dijkstra(self, src: int, dst: int) -> tuple[int, ...]:
        """The route: first searched among paths whose inner nodes forward traffic (switches, NICs), which is
        what the full search below picks whenever one exists, touching only those nodes (so a flat switch of
        n GPUs costs O(1) per route instead of O(n log n)); the full search runs only where none exists."""
        if src == dst:
            return ()
        found = self._dijkstra_forwarding(src, dst)
        if found is not None:
            return found
        return self._dijkstra_full(src, dst)

    def _dijkstra_forwarding(self, src: int, dst: int) -> tuple[int, ...] | None:
        gpu_penalty = 1e6
        hosts_of = self._node_hosts if self.hardware.nodes_per_leaf else None
        allowed = (hosts_of[src], hosts_of[dst], None) if hosts_of else ()
        fwd, between = self._out_forwarding, self._links_between
        best = {src: (0.0, 0)}
        prev: dict[int, tuple[int, int]] = {}
        heap = [(0.0, 0, src)]
        while heap:
            cost, hops, u = heapq.heappop(heap)
            if u == dst:
                break
            if (cost, hops) > best.get(u, (math.inf, 0)):
                continue
            # the full search's order of relaxation: link order; only dst's own links matter among GPUs
            edges = list(fwd[u]) + [(li, dst) for li in between.get((u, dst), ())]
            edges.sort()
            for li, v in edges:
                if hosts_of and hosts_of[v] not in allowed:
                    continue
                c = (cost + self.links[li].latency_us + 1e-9, hops + 1)
                if c < best.get(v, (math.inf, 0)):
                    best[v] = c
                    prev[v] = (li, u)
                    heapq.heappush(heap, (c[0], c[1], v))
        if dst not in prev or best[dst][0] >= gpu_penalty:
            return None
        path, v = [], dst
        while v != src:
            li, v = prev[v]
            path.append(li)
        return tuple(reversed(path))

    def _dijkstra_full(self, src: int, dst: int) -> tuple[int, ...]:
        gpu_penalty = 1e6  # forwarding through a GPU only when nothing else connects them
        # On the presets' fat trees a route between two hosts never enters a third one (its way back out
        # costs more than any switch path), so the search skips other hosts' nodes: same route, 30x faster.
        hosts_of = self._node_hosts if self.hardware.nodes_per_leaf else None
        allowed = (hosts_of[src], hosts_of[dst], None) if hosts_of else ()
        best = {src: (0.0, 0)}
        prev: dict[int, tuple[int, int]] = {}
        heap = [(0.0, 0, src)]
        while heap:
            cost, hops, u = heapq.heappop(heap)
            if u == dst:
                break
            if (cost, hops) > best.get(u, (math.inf, 0)):
                continue
            if u != src and self.nodes[u].kind == "gpu":
                cost += gpu_penalty
            for li, v in self._out[u]:
                if hosts_of and hosts_of[v] not in allowed:
                    continue
                c = (cost + self.links[li].latency_us + 1e-9, hops + 1)
                if c < best.get(v, (math.inf, 0)):
                    best[v] = c
                    prev[v] = (li, u)
                    heapq.heappush(heap, (c[0], c[1], v))
        if dst not in prev:
            raise CollsimError(f"topology {self.name!r}: no route from {self.nodes[src].name!r} to {self.nodes[dst].name!r}")
        path, v = [], dst
        while v != src:
            li, v = prev[v]
            path.append(li)
        return tuple(reversed(path))

    def path_bandwidth_GBps(self, src_rank: int, dst_rank: int) -> float:
        return min(self.links[i].bandwidth_GBps for i in self.route(src_rank, dst_rank))

    def path_latency_us(self, src_rank: int, dst_rank: int) -> float:
        return sum(self.links[i].latency_us for i in self.route(src_rank, dst_rank))

    def link_label(self, index: int) -> str:
        l = self.links[index]
        return f"{l.src}->{l.dst}"

    # ---- description ----------------------------------------------------------------------------
    def summary(self) -> str:
        """A few lines a person can read: counts, link classes, hosts, reducing switches."""
        kinds: dict[str, int] = {}
        for n in self.nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        classes: dict[tuple, int] = {}
        for l in self.links:
            k = (l.kind, l.bandwidth_GBps, l.latency_us)
            classes[k] = classes.get(k, 0) + 1
        lines = [f"topology {self.name}: {self.nranks} GPUs in {self.nhosts} host(s); "
                 + ", ".join(f"{v} {_plural(k, v)}" for k, v in kinds.items())]
        for (kind, bw, lat), count in sorted(classes.items()):
            lines.append(f"  {count:5d} x {kind:6s} link  {bw:8.2f} GB/s  {lat:6.3f} us")
        red = [self.nodes[i] for i in self.reducing_switches()]
        if red:
            lines.append(f"  reducing switches: {len(red)} ({', '.join(sorted({str(n.reduce) for n in red}))})")
        no_nvlink = self.hardware.nvlink_GBps is not None and not self.hardware.nvlink_GBps
        if no_nvlink:   # a PCIe node: say so once instead of listing NVLink figures of zero
            lines.append("  no NVLink: GPUs talk over PCIe")
        for k, v in self.meta.items():
            if isinstance(v, (int, float, str)) and not (no_nvlink and k.startswith("nvlink_")):
                lines.append(f"  {k}: {v}" + (self._p2p_why() if k == "p2p" else ""))
        return "\n".join(lines)

    def _p2p_why(self) -> str:
        """Why ``p2p`` reads False on a PCIe server drawn with peer-to-peer on (``hardware.p2p_level`` set): the flag
        says whether every pair talks peer to peer, and NCCL's P2P level (default PXB) keeps pairs across host
        bridges or sockets off it."""
        level = self.hardware.p2p_level
        if self.hardware.p2p is False and self.hardware.intra == "pcie" and level:
            return (f" (not every pair: with p2p=1, pairs under one PCIe switch talk peer to peer, those beyond NCCL's "
                    f"P2P level {level}{' (its default)' if level == 'PXB' else ''} go through host memory; "
                    "p2p_level=SYS lets every pair talk through the CPUs)")
        return ""

    def to_dict(self) -> dict:
        """Plain data, the shape :func:`topology_from_dict` reads (and the YAML/JSON file format)."""
        def node(n: Node) -> dict:
            d: dict[str, object] = {"name": n.name, "kind": n.kind}
            if n.host is not None:
                d["host"] = n.host
            if n.reduce:
                d["reduce"] = n.reduce
                if math.isfinite(n.reduce_bandwidth_GBps):
                    d["reduce_bandwidth_GBps"] = n.reduce_bandwidth_GBps
                if n.reduce_latency_us:
                    d["reduce_latency_us"] = n.reduce_latency_us
            return d
        return {"name": self.name, "meta": {k: v for k, v in self.meta.items() if isinstance(v, (int, float, str, bool))},
                "nodes": [node(n) for n in self.nodes],
                "links": [{"src": l.src, "dst": l.dst, "bandwidth_GBps": l.bandwidth_GBps,
                           "latency_us": l.latency_us, "kind": l.kind} for l in self.links]}


class Adjacency:
    """Per node, its (link index, other end) pairs in link order: ``adj[u]``.

    Kept as links sorted by their first end and made into a list only for the nodes asked for: a route
    on a 131,072-GPU cluster visits a few dozen of its 430,000 nodes, and building every node's list
    took longer than the routes."""

    def __init__(self, nnodes: int, frm: np.ndarray, to: np.ndarray):
        self._order = np.argsort(frm, kind="stable")
        self._to = to[self._order]
        self._starts = np.searchsorted(frm[self._order], np.arange(nnodes + 1))
        self._lists: dict[int, list[tuple[int, int]]] = {}

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, u: int) -> list[tuple[int, int]]:
        pairs = self._lists.get(u)
        if pairs is None:
            if not 0 <= u < len(self):
                raise IndexError(u)
            lo, hi = self._starts[u], self._starts[u + 1]
            pairs = self._lists[u] = list(zip(self._order[lo:hi].tolist(), self._to[lo:hi].tolist()))
        return pairs

    def reached(self, start: int) -> np.ndarray:
        """Which nodes a search from ``start`` along the links reaches (a boolean mask): breadth first,
        one numpy step per hop of distance."""
        seen = np.zeros(len(self), bool)
        seen[start] = True
        last_at = np.zeros(len(self), np.int64)   # scratch: where a node last occurs in the next frontier
        frontier = np.array([start])
        while len(frontier):
            lo, hi = self._starts[frontier], self._starts[frontier + 1]
            counts = hi - lo
            # positions lo..hi-1 of every frontier node, concatenated
            nxt = self._to[np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))]
            nxt = nxt[~seen[nxt]]
            last_at[nxt] = np.arange(len(nxt))
            frontier = nxt[last_at[nxt] == np.arange(len(nxt))]   # each node once
            seen[frontier] = True
        return seen


def _plural(word: str, count: int) -> str:
    """``switch`` -> ``switches`` (27 switches, not 27 switchs), ``gpu`` -> ``gpus``."""
    if count == 1:
        return word
    return word + ("es" if word.endswith(("s", "sh", "ch", "x", "z")) else "s")
