"""Flow-level model: ring collectives on very large clusters, aggregated by symmetry and by tier.

The chunk-level engine (:mod:`sim.engine.fast`) builds every op of a Program: 2(n-1) x n ops for a ring
all-reduce, half a billion at n = 16,384. The flow model keeps what decides the time and drops the rest:

* **Hops as flows.** In each channel's ring, rank k's sends to rank k+1 form one flow through its
  route. A route whose links only that flow uses behaves like one FIFO server: a chunk takes
  ``wire / min(bandwidth)`` to leave and ``sum(latency)`` more to arrive (the engine's cut-through
  model, exactly). A link that m flows cross is shared fluidly: each gets ``bandwidth / m``.
* **Symmetry.** Hops whose (latency, cost per byte) repeat every p ranks are simulated once per
  position in the period: p = 1 on a uniform ring/switch/mesh, p = GPUs per node on node presets.
  Position 0 is fed by position p-1 of the previous period, which by symmetry runs at the same times.
* **Tiers.** On large clusters only hosts 0-3 and the switch fabric are routed, and every other host is
  taken to be their image (the presets' fat tree is uniform); a flow on a fabric link (switch to switch)
  is taken to be repeated by every host attached to the leaf at its end. Up to ``EXACT_RANKS`` ranks
  every route is computed and every link's sharing counted instead (tests compare the two).
* **Chunks stay.** Each hop serves its chunks (steps x pieces) in order; a chunk leaves when it has
  arrived from upstream and the hop is free: a max-plus recurrence over steps, vectorized over channels,
  positions and pieces, so O(steps) numpy calls instead of O(n x steps) events.
* **Same recipe as the engine.** ``ideal`` runs like :func:`sim.api.run_engine`; NCCL protocols like
  :func:`sim.nccl.execution.simulate_with_plan`, from the same :func:`sim.nccl.execution.plan_nccl` (latency term, payload share,
  channels spread over NICs, chunks) and the same link efficiencies.

Where both run, the result equals the engine's up to float rounding when no link is shared by several
flows at once (uniform rings, switches, meshes, one NIC per node). Where flows share a link (the
aggregated spine of a multi-rail fat tree), the engine queues chunks first-come first-served while the
flow model shares bandwidth; the engine's later flows start up to one chunk late, so the two differ by
about one chunk's serialisation time (docs/performance.md has the numbers).

Covered: the ``ring`` algorithm for all_reduce, all_gather, reduce_scatter (cyclic) and broadcast, reduce
(a chain) here; tree, nvls_tree, nvls and the CollNet algorithms through a replica of the cluster
(:mod:`sim.prediction.replica`); all_to_all (``p2p``) in closed form (:mod:`sim.prediction.flow_alltoall`); the textbook algorithms (``recursive_hd``,
``hierarchical_ring``, ``direct``, ``binomial``) by their steps' link loads (:mod:`sim.prediction.flow_steps`).

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 30, "ring:n=1024,bandwidth_GBps=100,latency_us=1",
...                  algorithm="ring", protocol="ideal", model="flow")
>>> round(r.time_us / (2 * 1023 * (1 + 2**30 / 1024 / 100e3)), 9)
1.0
"""
from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..algorithms import analytic
from ..collectives import get_collective
from ..engine.result import Result
from ..engine.symmetry import link_orbits
from ..errors import CollsimError
from ..nccl.protocols import IDEAL, Protocol, get_protocol
from ..nccl.recipe import default_pipeline, protocols_for
from ..topology import Link, Topology
from .flow_steps import STEP_ALGORITHMS
from .replica import REPLICA_ALGORITHMS, replica_simulate

RING_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
FLOW_COLLECTIVES = RING_COLLECTIVES + ("all_to_all",)
FLOW_ALGORITHMS = ("ring",) + REPLICA_ALGORITHMS + ("p2p", "pat") + STEP_ALGORITHMS
PAT_EXACT_RANKS = 2048   # PAT steps routed flow by flow up to here; above, each step at its NICs' rate
EXACT_RANKS = 256  # up to here every hop is routed and every link's sharing counted


@dataclass(frozen=True, eq=False)
class Rings:
    """The channels' rings reduced to one period of hop classes.

    ``latency_us[c, j]`` and ``us_per_byte[c, j]`` describe hop k -> k+1 of channel c's ring for every k
    with k % period == j: its route's summed latency, and its cost per wire byte (max over its links of
    flows sharing the link / bandwidth in bytes per us). ``method``: ``rotation`` (symmetric topology),
    ``routes`` (every hop routed) or ``tiers`` (hosts 0-3 routed, the rest taken as their images).
    """

    nranks: int
    period: int
    latency_us: np.ndarray
    us_per_byte: np.ndarray
    method: str


# ---- the rings' hops ----------------------------------------------------------------------------------
def ring_flows(topo: Topology, orders=None, *, efficiency=None, latency: bool = True, method: str = "auto",
               unused=None) -> Rings:
    """Aggregate the hops of one ring per channel on ``topo``.

    ``orders``: per channel, ring position -> topology rank (default: one ring in rank order).
    ``efficiency(link)``: share of a link's bandwidth a collective gets (default 1); ``latency``: keep
    link latencies (the NCCL recipe moves them into its latency term). ``method``: auto|rotation|routes|tiers.
    ``unused[c]``: a position whose hop channel c never sends on (a chain's closing hop); counted as no
    flow when every route is counted (``routes``), ignored by the aggregated methods (one hop in n).
    """
    n = topo.nranks
    orders = [np.arange(n)] if orders is None else [np.asarray(o, dtype=np.int64) for o in orders]
    identity = all(np.array_equal(o, np.arange(n)) for o in orders)
    if method == "auto":
        if identity and topo.hardware.symmetry == "rotation" and _orbits(topo) is not None:
            method = "rotation"
        elif n <= EXACT_RANKS or len(topo.hosts) < 4:
            method = "routes"
        else:
            method = "tiers"
    cost = _Cost(topo, efficiency, latency)
    if method == "rotation":
        orbit = _orbits(topo)
        if orbit is None or not identity:
            raise CollsimError(f"topology {topo.name!r} or the rings are not symmetric under rank r -> r+1: use routes or tiers")
        route = topo.route(0, 1)
        # every hop's route is an image of hop 0's: a link is crossed once per hop-0 link in its orbit
        per_orbit = Counter(int(orbit[l]) for l in route)
        lat, c = cost.hop(route, {l: per_orbit[int(orbit[l])] * len(orders) for l in route})
        return Rings(n, 1, np.full((len(orders), 1), lat), np.full((len(orders), 1), c), "rotation")
    if method == "routes":
        routes = [[topo.route(int(o[k]), int(o[(k + 1) % n])) for k in range(n)] for o in orders]
        skip = set() if unused is None else {(c, int(k) % n) for c, k in enumerate(unused)}
        share = Counter(l for c, ring in enumerate(routes) for k, route in enumerate(ring) if (c, k) not in skip
                        for l in route)
        desc = np.array([[cost.hop(route, share) for route in ring] for ring in routes])  # (nch, n, 2)
        p = _period(desc)
        return Rings(n, p, desc[:, :p, 0].copy(), desc[:, :p, 1].copy(), "routes")
    if method == "tiers":
        return _tier_flows(topo, orders, cost)
    raise CollsimError(f"unknown hop method {method!r}: use auto, rotation, routes or tiers")


@dataclass(frozen=True)
class _Cost:
    topo: Topology
    efficiency: Callable[[Link], float] | None
    latency: bool

    def hop(self, route, share) -> tuple[float, float]:
        """(latency us, us per wire byte) of a hop whose link l is crossed by ``share[l]`` flows."""
        links = self.topo.links
        eff = self.efficiency or (lambda _l: 1.0)
        lat = sum(links[l].latency_us for l in route) if self.latency else 0.0
        per_byte = max((share[l] / (links[l].bandwidth_GBps * eff(links[l]) * 1e3) for l in route), default=0.0)
        return lat, per_byte


def _orbits(topo: Topology):
    return link_orbits(topo)


def _period(desc: np.ndarray) -> int:
    """Smallest p dividing the ring length with desc[:, k] == desc[:, k + p] for all k."""
    n = desc.shape[1]
    for p in range(1, n + 1):
        if n % p == 0 and np.allclose(desc, np.roll(desc, -p, axis=1), rtol=1e-12, atol=0):
            return p
    return n


def _tier_flows(topo: Topology, orders, cost: _Cost) -> Rings:
    g = len(topo.hosts[0])
    hops = _tier_hops(topo, orders)
    desc = np.array([[cost.hop(route, share) for route, share in ring] for ring in hops])
    return Rings(topo.nranks, g, desc[:, :, 0].copy(), desc[:, :, 1].copy(), "tiers")


# What _tier_hops found, per topology (weakly: a topology's entry goes with it) and channel orders. It depends
# on the links and the rings only, not on their bandwidths' efficiencies, so a cross-validation's hundreds of
# calibrations of one case share it.
_TIER_HOPS: "weakref.WeakKeyDictionary[Topology, dict]" = weakref.WeakKeyDictionary()


def _tier_hops(topo: Topology, orders) -> list[list[tuple[list[int], dict[int, int]]]]:
    """Per channel, host 1's hops of the ring: (route as full link indices, flows crossing each link)."""
    key = tuple(np.asarray(o).tobytes() for o in orders)
    known = _TIER_HOPS.setdefault(topo, {})
    if key not in known:
        known[key] = _find_tier_hops(topo, orders)
    return known[key]


def _find_tier_hops(topo: Topology, orders) -> list[list[tuple[list[int], dict[int, int]]]]:
    hosts = topo.hosts
    g, n = len(hosts[0]), topo.nranks
    if any(h != tuple(range(i * g, i * g + g)) for i, h in enumerate(hosts)) or len(hosts) < 4:
        raise CollsimError(f"topology {topo.name!r}: the flow model's tiers need 4+ equal hosts with consecutive "
                           f"ranks; use --model engine")
    for o in orders:
        if not np.array_equal(o // g, np.arange(n) // g):
            raise CollsimError("the flow model's tiers need every channel to visit the hosts in order")
    sub, to_full = _hosts_and_fabric(topo, 4)
    # hops of hosts 0-2 in every channel: all flows that touch host 1's or host 2's own links
    routes = [[[to_full[l] for l in sub.route(int(o[k]), int(o[k + 1]))] for k in range(3 * g)] for o in orders]
    nodes, links = topo.nodes, topo.links
    host_of = [n_.host for n_ in nodes]
    index = topo.node_index
    ends = [(host_of[index[l.src]], host_of[index[l.dst]]) for l in links]
    hosts_in: dict[str, set] = {}
    hosts_out: dict[str, set] = {}   # fabric switch -> hosts with a link into / out of it
    for (hs, hd), l in zip(ends, links):
        if hs is not None and hd is None:
            hosts_in.setdefault(l.dst, set()).add(hs)
        if hs is None and hd is not None:
            hosts_out.setdefault(l.src, set()).add(hd)
    counted = Counter(l for ring in routes for route in ring for l in route)
    exits = Counter(l for ring in routes for route in ring[2 * g - 1:2 * g] for l in route)  # host 1's exits

    def share(l: int) -> int:
        if ends[l] != (None, None):
            return counted[l]  # a host's own link: only flows touching that host cross it
        # a fabric link: host 1's exit flows through it, repeated by every host at the leaf it joins
        attached = hosts_in.get(links[l].src) or hosts_out.get(links[l].dst)
        return exits[l] * (len(attached) if attached else len(hosts))

    return [[(route, {l: share(l) for l in route}) for route in ring[g:2 * g]] for ring in routes]


def _hosts_and_fabric(topo: Topology, nhosts: int) -> tuple[Topology, list[int]]:
    """The sub-topology of hosts 0..nhosts-1 and every node outside hosts (switches of the fabric), nodes
    and links in their original order (so routes break ties alike); with a map to full link indices."""
    keep = {n.name for n in topo.nodes if n.host is None or n.host < nhosts}
    nodes = [n for n in topo.nodes if n.name in keep]
    idx = [i for i, l in enumerate(topo.links) if l.src in keep and l.dst in keep]
    sub = Topology.build(topo.name + ":hosts0-3", nodes, [topo.links[i] for i in idx], topo.hardware)
    return sub, idx


# ---- the recurrences --------------------------------------------------------------------------------
def ring_time_us(rings: Rings, nsteps: int, pieces: int, wire_bytes: float, hop_latency_us: float = 0.0) -> float:
    """Cyclic rings: every position sends ``pieces`` chunks of ``wire_bytes`` per step for ``nsteps``
    steps; chunk q of step s at position j leaves once chunk q of step s-1 arrived from position j-1.

    The recurrence is max-plus linear, so once a step's state is an earlier step's plus one constant
    (the periodic regime every such system reaches), each further cycle adds that constant: the
    remaining cycles are added at once instead of simulated (exact up to float rounding).
    """
    b = rings.us_per_byte * wire_bytes                   # (channels, period)
    a = (rings.latency_us + hop_latency_us)[..., None]
    upstream = (np.arange(rings.period) - 1) % rings.period  # position j is fed by j-1; 0 by the last
    q = np.arange(pieces)
    qb = q * b[..., None]
    step_b = (q + 1) * b[..., None]
    free = np.zeros(b.shape + (1,))
    ready = np.zeros(b.shape + (pieces,))
    arrive = ready
    history: list[np.ndarray] = []
    skip, s = 0.0, 0
    while s < nsteps:
        if pieces == 1:   # depart = max(ready, free) + b
            depart = np.maximum(ready, free) + step_b
        else:             # FIFO server: depart_q = max(ready_q, depart_{q-1}) + b, a max-plus scan
            depart = step_b + np.maximum(free, np.maximum.accumulate(ready - qb, axis=2))
        free = depart[..., -1:]
        arrive = depart + a
        ready = arrive[:, upstream]
        s += 1
        if not skip:
            history = (history + [arrive])[-(rings.period + 1):]
            if s % 8 == 0:
                cycle = _cycle(history)
                if cycle:
                    c, lam = cycle
                    k = (nsteps - s) // c
                    skip, nsteps = k * lam, nsteps - k * c
    return float(arrive.max()) + skip


def _cycle(history: list[np.ndarray]):
    """(c, lambda) if the last state equals the state c steps earlier plus lambda everywhere."""
    last = history[-1]
    tol = 1e-10 * max(1.0, float(np.abs(last).max()))
    for c in range(1, len(history)):
        d = last - history[-1 - c]
        if float(d.max() - d.min()) <= tol:
            return c, float(d.mean())
    return None


def chain_time_us(rings: Rings, first, pieces: int, wire_bytes: float, hop_latency_us: float = 0.0) -> float:
    """Chains of n-1 hops (broadcast, reduce), channel c starting at ring position ``first[c]``, each
    with ``pieces`` chunks pipelined along it."""
    nch = rings.us_per_byte.shape[0]
    first = np.broadcast_to(np.asarray(first, dtype=np.int64), (nch,))
    rows = np.arange(nch)
    q = np.arange(pieces)
    ready = np.zeros((nch, pieces))
    hops, period = rings.nranks - 1, rings.period
    # hop h's class is (first + h) mod period on every channel, so the hops repeat every period; once the pieces
    # leave the slowest class spaced by it, every period adds the same time to every piece (the periodic regime
    # :func:`ring_time_us` also skips to), and the rest of the chain is that constant times the periods left.
    # Hop by hop, a broadcast over 65,536 ranks took 15 s of 21 here; 131,072 ranks of gb200 over 3 minutes
    periodic = rings.nranks % period == 0
    history: list[np.ndarray] = []
    skip, h = 0.0, 0
    while h < hops:
        j = (first + h) % rings.nranks % period
        b = (rings.us_per_byte[rows, j] * wire_bytes)[:, None]
        ready = (q + 1) * b + np.maximum.accumulate(ready - q * b, axis=1) + (rings.latency_us[rows, j] + hop_latency_us)[:, None]
        h += 1
        if periodic and not skip and h % period == 0:
            history = (history + [ready])[-3:]
            if len(history) == 3 and _cycle([history[0], history[1]]) and (cycle := _cycle([history[1], history[2]])):
                k = (hops - h) // period
                skip, hops = k * cycle[1], hops - k * period
    return float(ready.max()) + skip


# ---- the model --------------------------------------------------------------------------------------
def flow_simulate(collective, nbytes: int, topology, algorithm: str = "auto", protocol: str = "auto", *,
                  nchannels: int | None = None, pipeline: int | None = None, root: int = 0,
                  method: str = "auto") -> Result:
    """Predict with the flow model; ``auto`` picks the fastest covered algorithm and protocol.

    >>> round(flow_simulate("all_gather", 1 << 20, "ring:n=4", "ring", "ideal").time_us, 6)  # 3 x (1 + 2^18/1e5)
    10.86432
    """
    from ..presets import load_topology
    topo = load_topology(topology)
    coll = get_collective(collective)
    if coll.name not in FLOW_COLLECTIVES:
        raise CollsimError(f"the flow model covers {', '.join(FLOW_COLLECTIVES)}, not {coll.name}: use --model engine")
    if algorithm == "auto":
        from ..algorithms import candidates
        algos = [a for a in candidates(coll, topo.nranks, topo) if flow_covers(coll, a, topo) is None]
    else:
        algos = [algorithm]
    for a in algos:
        if a not in FLOW_ALGORITHMS:
            raise CollsimError(f"the flow model covers the {', '.join(FLOW_ALGORITHMS)} algorithm, not {a}: "
                               f"use --model engine, or --algorithm auto")
    if coll.rooted and not 0 <= root < topo.nranks:
        raise CollsimError(f"root {root} is not a rank: choose 0..{topo.nranks - 1}")
    if (nchannels is not None and nchannels < 1) or (pipeline is not None and pipeline < 1):
        raise CollsimError(f"nchannels={nchannels} and pipeline={pipeline} must both be at least 1")
    best: Result | None = None
    protocols = protocols_for(protocol)
    if protocol == "auto":
        # as sim.nccl.select does for the engine: NCCL's own model picks the protocol, then this model times it
        from ..nccl.tuner import rank_pairs
        ranked = rank_pairs(coll, int(nbytes), topo, list(algos), protocols)
        if ranked:
            algos, protocols = [ranked[0].algorithm], [ranked[0].protocol]
    for a in algos:
        for name in protocols:
            r = flow_predict(coll, int(nbytes), topo, a, get_protocol(name), nchannels=nchannels, pipeline=pipeline,
                             root=root, method=method)
            if best is None or r.time_us < best.time_us:
                best = r
    if best is None:
        raise CollsimError(f"the flow model has no algorithm for {coll.name} on {topo.name}: use --model engine")
    return best


def flow_covers(coll, algorithm: str, topo: Topology) -> str | None:
    """None if the flow model can time ``algorithm`` for ``coll`` on ``topo``, else a short reason."""
    if algorithm in REPLICA_ALGORITHMS:
        from .replica import covers as replica_covers
        return replica_covers(algorithm, topo)
    if algorithm == "p2p":
        from .flow_alltoall import covers as alltoall_covers
        return alltoall_covers(coll, topo)
    if algorithm == "pat":
        from ..algorithms import why_not
        return why_not("pat", coll, topo.nranks, topo)
    if algorithm in STEP_ALGORITHMS:
        from .flow_steps import covers as steps_covers
        return steps_covers(coll, algorithm, topo)
    if algorithm != "ring":
        return (f"it covers the ring, tree, NVLS, CollNet, p2p (all_to_all) and textbook algorithms "
                f"({', '.join(STEP_ALGORITHMS)}), not {algorithm}")
    if coll.name not in RING_COLLECTIVES:
        return f"its rings cover {', '.join(RING_COLLECTIVES)}, not {coll.name}"
    return None


def flow_predict(coll, nbytes: int, topo: Topology, algorithm: str, proto: Protocol, *, nchannels=None, pipeline=None,
                 root: int = 0, method: str = "auto", cache: dict | None = None) -> Result:
    """The flow model's prediction of one (algorithm, protocol): rings as flows (this module), the
    hierarchical algorithms through a replica of the cluster (:mod:`sim.prediction.replica`)."""
    if algorithm in REPLICA_ALGORITHMS:
        return replica_simulate(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline, root=root)
    reason = flow_covers(coll, algorithm, topo)
    if reason:
        raise CollsimError(f"the flow model cannot run {algorithm} {coll.name}: {reason}; use --model engine")
    if algorithm in STEP_ALGORITHMS:
        from .flow_steps import step_predict
        return step_predict(coll, int(nbytes), topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline, root=root)
    if algorithm == "p2p":
        if proto.name == IDEAL.name:
            raise CollsimError("the flow model times all_to_all (p2p) with NCCL's protocols (LL, LL128, Simple), "
                               "not ideal: pick one, or use --model engine")
        from .flow_alltoall import alltoall_predict
        return alltoall_predict(coll, int(nbytes), topo, proto, nchannels=nchannels, pipeline=pipeline)
    if algorithm == "pat":
        return _pat(coll, int(nbytes), topo, proto)
    run = _ideal if proto.name == IDEAL.name else _nccl
    return run(coll, int(nbytes), topo, proto, nchannels, pipeline, root, method, {} if cache is None else cache)


def _pat(coll, nbytes: int, topo: Topology, proto: Protocol) -> Result:
    """PAT (:mod:`sim.algorithms.pat`) as flows: step d moves min(2^d, n-2^d) shards from every rank r to
    r - 2^d at once; the step takes as long as its slowest flow, a flow's cost per byte being its
    busiest link's (flows sharing the link / effective bandwidth). The steps run one after the other,
    as the engine's program does. Up to :data:`PAT_EXACT_RANKS` every flow is routed; beyond, every
    step runs at the rate of the NICs (one flow each way per rank per step, no core contention)."""
    from ..algorithms.pat import pat_steps
    from ..nccl.execution import link_efficiency, plan_nccl
    n = topo.nranks
    k = pat_steps(n)
    engine_proto, lat, eff = proto, 0.0, None
    if proto.name != IDEAL.name:
        plan = plan_nccl(coll, nbytes, topo, "pat", proto, steps=k, split=n)
        engine_proto, lat, eff = plan.engine_protocol, plan.latency_us, (lambda l: link_efficiency(topo, l))
    cost = _Cost(topo, eff, proto.name == IDEAL.name)
    shard = engine_proto.wire_bytes(nbytes / n)
    data = 0.0
    for d in range(k):
        dist, m = 1 << d, min(1 << d, n - (1 << d))
        lat_d, per_byte = _pat_step_cost(topo, cost, dist)
        data += lat_d + m * shard * per_byte
    t = lat + data + (proto.launch_us if proto.name == IDEAL.name else 0.0)
    return Result(coll.name, nbytes, n, "pat", proto.name, t, analytic.algbw_GBps(nbytes, t),
                  analytic.busbw_GBps(coll.name, n, nbytes, t), k, "flow", topo.name, 1, 1,
                  explain={"latency_us": lat, "bandwidth_term_us": data, "pat_steps": k,
                           "hop_method": "routes" if n <= PAT_EXACT_RANKS else "nic rate"})


def _pat_step_cost(topo: Topology, cost: "_Cost", dist: int) -> tuple[float, float]:
    """(latency us, us per byte) of PAT's step at distance ``dist``: the slowest flow r -> r - dist (the
    links' latency only with the ideal protocol: NCCL's is in its latency term)."""
    n = topo.nranks
    sources = range(n) if n <= PAT_EXACT_RANKS else range(min(n, 64))
    routes = [topo.route(r, (r - dist) % n) for r in sources]
    share = Counter(l for route in routes for l in route) if n <= PAT_EXACT_RANKS else {l: 1 for route in routes for l in route}
    hops = [cost.hop(route, share) for route in routes]
    return max(h[0] for h in hops), max(h[1] for h in hops)


def _rings(cache: dict, topo: Topology, key, orders=None, **kw) -> Rings:
    if key not in cache:
        cache[key] = ring_flows(topo, orders, **kw)
    return cache[key]


def _ideal(coll, nbytes, topo, proto, nchannels, pipeline, root, method, cache) -> Result:
    """:func:`sim.api.run_engine`'s recipe: one ring in rank order, channels and pieces share it."""
    n = topo.nranks
    nch = nchannels or 1
    chain = coll.rooted
    steps = coll.ring_steps(n)
    if pipeline is None:
        pipeline = default_pipeline("ring", coll.name, nbytes, topo, proto, nch, steps if chain else 0)
    first = _first(coll, n, [root]) if chain else None
    rings = _rings(cache, topo, ("ideal", method, first), method=method, unused=_closing(first, n))
    pieces = nch * pipeline
    t = _data_time(coll, nbytes, rings, pieces, 1, proto, first) + proto.launch_us
    return _result(coll, nbytes, topo, proto, t, steps, nch, pipeline, rings, {})


def _nccl(coll, nbytes, topo, proto, nchannels, pipeline, root, method, cache) -> Result:
    """:func:`sim.nccl.execution.simulate_with_plan`'s recipe (:func:`sim.nccl.execution.plan_nccl`): its latency term plus data
    movement at effective bandwidths."""
    from ..nccl.execution import (
        NCCL_TESTS_LOOP_NOTE,
        channel_order,
        link_efficiency,
        plan_nccl,
        software_overlap_shift_us,
        spread_explain,
        used_channel_pieces,
    )
    n = topo.nranks
    chain = coll.rooted
    steps = coll.ring_steps(n)
    plan = plan_nccl(coll, nbytes, topo, "ring", proto, nchannels=nchannels, pipeline=pipeline, steps=steps)
    spread, nch, pieces = plan.spread, plan.nchannels, plan.pieces
    orders = [channel_order(topo, c, nch, ring=True) for c in range(nch)] if spread else None
    # a spread channel runs its own ring, with the root at its position there; else channels are pieces
    roots = [int(np.flatnonzero(o == root)[0]) for o in orders] if orders is not None else [root]
    first = _first(coll, n, roots) if chain else None
    rings = _rings(cache, topo, ("nccl", spread, nch, method, first), orders, method=method, latency=False,
                   efficiency=lambda l: link_efficiency(topo, l), unused=_closing(first, n))
    per_ring, rings_run = (pieces, nch) if spread else (nch * pieces, 1)
    lat = plan.latency_us
    extra = {}
    if plan.single_call_latency_us is None:
        data = _data_time(coll, nbytes, rings, per_ring, rings_run, plan.engine_protocol, first)
    else:
        # nccl-tests' back-to-back calls overlap down the chain (sim.nccl.execution.loop_period_us): a call
        # costs its busiest hop's transfer, one call alone the chain's latency, fill and drain
        proto = plan.engine_protocol
        wire = proto.wire_bytes(coll.chunk_nbytes(nbytes, n, rings_run * per_ring))
        one_call = chain_time_us(rings, first, *used_channel_pieces(per_ring, wire, plan.small_share),
                                 proto.hop_latency_us)
        extra = {"single_call_us": plan.single_call_latency_us + one_call, "nccl_tests_loop": NCCL_TESTS_LOOP_NOTE}
        data = float(np.max(rings.us_per_byte)) * wire * per_ring
    lat += software_overlap_shift_us(plan, data)   # the software hides behind the data time charged here
    extra.update(plan.channels_used_explain())   # as the engine says it
    return _result(coll, nbytes, topo, proto, lat + data, steps, nch, pieces, rings,
                   {"latency_us": lat, "bandwidth_term_us": data, "payload_share": plan.payload_share * plan.small_share,
                    **spread_explain(plan), **extra})


def _first(coll, n: int, roots) -> tuple[int, ...]:
    """Ring position where each channel's chain starts: the root (broadcast) or the rank after it (reduce)."""
    return tuple(r if coll.root_is_source else (r + 1) % n for r in roots)


def _closing(first, n: int):
    """The hop a chain from ``first`` never uses: the one into ``first``."""
    return None if first is None else [(f - 1) % n for f in first]


def _data_time(coll, nbytes, rings: Rings, pieces: int, nch: int, proto: Protocol, first) -> float:
    """Data movement of ``nch`` rings (one per channel in ``rings``), ``pieces`` chunks each; chains
    (broadcast, reduce) start at ring positions ``first``."""
    n = rings.nranks
    if first is not None:
        wire = proto.wire_bytes(coll.chunk_nbytes(nbytes, n, nch * pieces))
        return chain_time_us(rings, first, pieces, wire, proto.hop_latency_us)
    wire = proto.wire_bytes(coll.chunk_nbytes(nbytes, n, n * nch * pieces))
    return ring_time_us(rings, analytic.ring_steps(coll.name, n), pieces, wire, proto.hop_latency_us)


def _result(coll, nbytes, topo, proto, t, steps, nch, pieces, rings: Rings, extra: dict) -> Result:
    n = topo.nranks
    worst = np.unravel_index(int(np.argmax(rings.us_per_byte)), rings.us_per_byte.shape)
    per_byte = float(rings.us_per_byte[worst])
    explain = {"hop_method": rings.method, "period": rings.period,
               "bottleneck_GBps": 1e-3 / per_byte if per_byte else math.inf, **extra}
    return Result.of(coll, nbytes, n, "ring", proto.name, t, steps, model="flow", topology=topo.name, nchannels=nch,
                     pipeline=pieces, explain=explain)
