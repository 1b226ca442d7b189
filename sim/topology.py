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

import heapq
import math
from dataclasses import dataclass, field
from functools import cached_property

from .errors import CollsimError

NODE_KINDS = ("gpu", "nic", "switch", "cpu")
LINK_KINDS = ("nvlink", "pcie", "net", "local")
REDUCE_KINDS = (None, "sharp", "nvls")


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
    meta: dict = field(default_factory=dict)  # hardware facts for the NCCL model (per-GPU NVLink bw, NIC bw...)

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def build(cls, name: str, nodes, links, meta: dict | None = None) -> "Topology":
        topo = cls(name, tuple(nodes), tuple(links), dict(meta or {}))
        topo._validate()
        return topo

    def _validate(self) -> None:
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
        if len(self.gpus) < 2:
            raise CollsimError(f"topology {self.name!r} has {len(self.gpus)} GPU(s): a collective needs at least 2")
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
        linked = {end for l in self.links for end in (l.src, l.dst)}
        for n in self.nodes:
            if n.name not in linked and n.kind != "gpu":  # (a GPU gets "no route" below) e.g. a SHARP switch declared but never cabled: it would be chosen, then fail
                raise CollsimError(f"topology {self.name!r}: {n.kind} {n.name!r} has no links: connect it (links: "
                                   f"- {{src: ..., dst: {n.name}, duplex: true}}) or remove it")
        # Every GPU must reach every other GPU: check reachability from GPU 0 and back to it.
        first = self.node_index[self.nodes[self.gpus[0]].name]
        fwd, back = self._reachable(first, self._out), self._reachable(first, self._in)
        for g in self.gpus:
            if g not in fwd or g not in back:
                raise CollsimError(f"topology {self.name!r}: GPU {self.nodes[g].name!r} has no route to or from "
                                   f"GPU {self.nodes[first].name!r}: add links so that every GPU is connected")

    @staticmethod
    def _reachable(start: int, adj) -> set[int]:
        seen, todo = {start}, [start]
        while todo:
            u = todo.pop()
            for _, v in adj[u]:
                if v not in seen:
                    seen.add(v)
                    todo.append(v)
        return seen

    # ---- structure ------------------------------------------------------------------------------
    @cached_property
    def node_index(self) -> dict[str, int]:
        return {n.name: i for i, n in enumerate(self.nodes)}

    @cached_property
    def gpus(self) -> tuple[int, ...]:
        """Node indices of the GPUs, in rank order."""
        return tuple(i for i, n in enumerate(self.nodes) if n.kind == "gpu")

    @property
    def nranks(self) -> int:
        return len(self.gpus)

    @cached_property
    def _out(self) -> list[list[tuple[int, int]]]:
        out = [[] for _ in self.nodes]
        for li, l in enumerate(self.links):
            out[self.node_index[l.src]].append((li, self.node_index[l.dst]))
        return out

    @cached_property
    def _in(self) -> list[list[tuple[int, int]]]:
        inn = [[] for _ in self.nodes]
        for li, l in enumerate(self.links):
            inn[self.node_index[l.dst]].append((li, self.node_index[l.src]))
        return inn

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
        return tuple(i for i, n in enumerate(self.nodes) if n.reduce and (kind is None or n.reduce == kind))

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

    @cached_property
    def _node_hosts(self) -> tuple:
        return tuple(n.host for n in self.nodes)

    def _dijkstra(self, src: int, dst: int) -> tuple[int, ...]:
        if src == dst:
            return ()
        gpu_penalty = 1e6  # forwarding through a GPU only when nothing else connects them
        # On the presets' fat trees a route between two hosts never enters a third one (its way back out
        # costs more than any switch path), so the search skips other hosts' nodes: same route, 30x faster.
        hosts_of = self._node_hosts if self.meta.get("nodes_per_leaf") else None
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
                 + ", ".join(f"{v} {k}{'s' if v > 1 else ''}" for k, v in kinds.items())]
        for (kind, bw, lat), count in sorted(classes.items()):
            lines.append(f"  {count:5d} x {kind:6s} link  {bw:8.2f} GB/s  {lat:6.3f} us")
        red = [self.nodes[i] for i in self.reducing_switches()]
        if red:
            lines.append(f"  reducing switches: {len(red)} ({', '.join(sorted({n.reduce for n in red}))})")
        for k, v in self.meta.items():
            if isinstance(v, (int, float, str)):
                lines.append(f"  {k}: {v}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain data, the shape :func:`topology_from_dict` reads (and the YAML/JSON file format)."""
        def node(n: Node) -> dict:
            d = {"name": n.name, "kind": n.kind}
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
