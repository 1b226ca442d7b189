"""The topology a sub-communicator sees: its GPUs plus the switches, NICs and links their routes use.

A collective over a process group (the 8 GPUs of a server for tensor parallelism, one GPU per server
for data parallelism across servers) only touches the links on the routes between its members, so it
is simulated on a :class:`~sim.topology.Topology` holding exactly those: every member GPU (ranks renumbered
in group order), every node on a route between two members, every link on such a route. GPUs outside
the group that a route passes through (a ring or mesh with no switch) stay, as forwarding nodes of kind
``switch``: the traffic does cross them. The group of all ranks alone gets the topology itself.

Groups of one family run their collectives at the same time (all 8 data-parallel rails of a cluster
all_reduce together). Pass them as ``concurrent``: a link that the routes of ``k`` of those groups use
gives each of them ``1/k`` of its bandwidth (two GPUs behind one NIC each get half of it).

``hardware`` is copied with ``nodes``, ``gpus_per_node`` and ``nics_per_node`` rewritten to the group's shape
(servers it spans, members and NICs used per server) and ``symmetry`` dropped (a subset of a symmetric
topology need not be symmetric).

>>> from sim.presets import load_topology
>>> sub = sub_topology(load_topology("ring:n=8"), (0, 2))
>>> sub.nranks, [n.kind for n in sub.nodes]
(2, ['gpu', 'gpu', 'switch'])
>>> shared = sub_topology(load_topology("switch:n=4"), (0, 1), concurrent=[(0, 1), (1, 2)])
>>> sorted({l.bandwidth_GBps for l in shared.links})   # gpu1's links carry two groups
[50.0, 100.0]
"""
from __future__ import annotations

import heapq
import math
from dataclasses import replace

from ..errors import CollsimError
from ..topology import Topology

# Routing a plan's groups searches shortest paths from every member of every group over the whole topology:
# about GPUs x (nodes + links) steps per family of groups, at about a million a second. Above this the plan
# would run for minutes (4,096 GPUs: over five), so it is refused up front, in one line, before any work.
ROUTE_BUDGET = 2.0e7
ROUTE_STEPS_PER_S = 1.0e6   # measured on the CI machine (dgx-h100: 32 nodes 3 s, 128 nodes 34 s for three families)


def routing_refusal(topo: Topology) -> str | None:
    """Why planning on ``topo`` is refused (its routing work over :data:`ROUTE_BUDGET`), or None.

    >>> from sim.presets import load_topology
    >>> routing_refusal(load_topology("dgx-h100:nodes=128")) is None
    True
    >>> "4,096 GPUs" in routing_refusal(load_topology("dgx-h100:nodes=512"))
    True
    """
    work = topo.nranks * (len(topo.nodes) + len(topo.links))
    if work <= ROUTE_BUDGET:
        return None
    return (f"planning {topo.name} ({topo.nranks:,} GPUs) routes every process group over {len(topo.nodes):,} nodes and "
            f"{len(topo.links):,} links, about {work / ROUTE_STEPS_PER_S / 60 * 3:.0f} min of route searches for three "
            f"families of groups (the budget is {ROUTE_BUDGET / ROUTE_STEPS_PER_S:.0f} s per family): plan a smaller "
            "slice of the cluster (1,024 GPUs of DGX nodes fit), or time one collective at full scale with "
            "collsim simulate, which handles 131,072 GPUs")


def _check(topo: Topology, ranks: tuple) -> None:
    if len(set(ranks)) != len(ranks) or len(ranks) < 2:
        raise CollsimError(f"a process group needs at least two distinct ranks, got {ranks}")
    if any(not isinstance(r, int) or not 0 <= r < topo.nranks for r in ranks):
        raise CollsimError(f"process group {ranks} names ranks outside 0..{topo.nranks - 1} of {topo.name}")


def sub_topology(topo: Topology, ranks, concurrent=None) -> Topology:
    """``topo`` restricted to ``ranks`` (global rank numbers, at least two, all distinct), with the
    bandwidth of links shared with the other ``concurrent`` groups divided among them."""
    ranks = tuple(ranks)
    _check(topo, ranks)
    out = adjacency(topo)
    members = [topo.gpus[r] for r in ranks]
    used_links = route_links(topo, members, out)
    load = {li: 1 for li in used_links}
    for g in concurrent or ():
        g = tuple(g)
        if g == ranks or len(g) < 2:
            continue
        _check(topo, g)
        for li in route_links(topo, [topo.gpus[r] for r in g], out) & used_links:
            load[li] += 1
    if sorted(ranks) == list(range(topo.nranks)) and max(load.values(), default=1) == 1:
        return topo
    used_nodes = set(members)
    for li in used_links:
        link = topo.links[li]
        used_nodes.add(topo.node_index[link.src])
        used_nodes.add(topo.node_index[link.dst])
    member_set = set(members)
    # GPUs first, in group order (rank i of the group is its i-th member), then the rest in topology order.
    nodes = [topo.nodes[i] for i in members]
    for i in sorted(used_nodes - member_set):
        n = topo.nodes[i]
        nodes.append(replace(n, kind="switch", label=n.label or f"{n.name} (forwarding)") if n.kind == "gpu" else n)
    links = [topo.links[i] if load[i] == 1 else replace(topo.links[i], bandwidth_GBps=topo.links[i].bandwidth_GBps / load[i])
             for i in sorted(used_links)]
    hosts: dict = {}
    for i in members:
        key = topo.nodes[i].host if topo.nodes[i].host is not None else ("rank", i)
        hosts[key] = hosts.get(key, 0) + 1
    hw = replace(topo.hardware, symmetry=None)
    if hw.nodes is not None:
        hw = replace(hw, nodes=len(hosts))
    if hw.gpus_per_node is not None:
        hw = replace(hw, gpus_per_node=max(hosts.values()))
    if hw.nics_per_node is not None:  # only the NICs the group's routes use (one per GPU on a rail)
        nics: dict = {}
        for n in nodes:
            if n.kind == "nic":
                nics[n.host] = nics.get(n.host, 0) + 1
        hw = replace(hw, nics_per_node=max(nics.values()) if nics else 0)
    shared = max(load.values(), default=1)
    label = ",".join(map(str, ranks)) if len(ranks) <= 8 else f"{ranks[0]},{ranks[1]},..,{ranks[-1]}"
    return Topology.build(f"{topo.name}[{label}]" + (f" sharing links with up to {shared - 1} group(s)" if shared > 1 else ""),
                          nodes, links, hw)


def adjacency(topo: Topology) -> list:
    """``out[node] = [(link index, next node), ...]`` in link order (the order routes are searched in)."""
    out: list = [[] for _ in topo.nodes]
    for li, l in enumerate(topo.links):
        out[topo.node_index[l.src]].append((li, topo.node_index[l.dst]))
    return out


def shortest_path_tree(topo: Topology, src: int, out: list, targets=None) -> dict:
    """``{node: (link, previous node)}`` of the routes from node ``src`` (to every node, or until all
    ``targets`` are reached).

    The same search as :meth:`Topology.route_nodes` (lowest latency, then fewest hops, then lowest
    link index; a 1e6 us penalty for passing through a GPU), run on instead of stopping at one
    destination. The route to ``d`` depends only on the nodes taken from the queue before ``d``, which
    both searches take in the same order, so the routes are identical (``tests/plan`` checks it).
    """
    gpu_penalty = 1e6
    best = {src: (0.0, 0)}
    prev: dict = {}
    heap = [(0.0, 0, src)]
    left = set(targets or ()) - {src}
    while heap:
        cost, hops, u = heapq.heappop(heap)
        if (cost, hops) > best.get(u, (math.inf, 0)):
            continue
        if targets is not None:
            left.discard(u)
            if not left:
                break
        if u != src and topo.nodes[u].kind == "gpu":
            cost += gpu_penalty
        for li, v in out[u]:
            c = (cost + topo.links[li].latency_us + 1e-9, hops + 1)
            if c < best.get(v, (math.inf, 0)):
                best[v] = c
                prev[v] = (li, u)
                heapq.heappush(heap, (c[0], c[1], v))
    return prev


def route_links(topo: Topology, members, out: list | None = None) -> set:
    """Indices of the links on the routes between every ordered pair of ``members`` (node indices):
    one search per member, not one per pair."""
    out = out if out is not None else adjacency(topo)
    used: set = set()
    for a in members:
        prev = shortest_path_tree(topo, a, out, targets=members)
        for b in members:
            v = b
            while v != a:
                if v not in prev:
                    raise CollsimError(f"topology {topo.name!r}: no route from {topo.nodes[a].name!r} to {topo.nodes[b].name!r}")
                li, v = prev[v]
                used.add(li)
    return used
