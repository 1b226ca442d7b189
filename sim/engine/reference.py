"""The reference engine: the link model of :mod:`sim.engine.fast`, written as plain SimPy, to be read.

One SimPy process per op, one :class:`Link` (a ``simpy.Resource`` of capacity 1, FIFO, that remembers
when its last message's tail passed) per link and per reducing switch's reduction unit. An op's process

1. waits for the ops that write the chunk it sends (``yield env.all_of(...)``),
2. queues on every link of its route at once (a link serves one transfer at a time, in request order),
3. walks the route cut-through: on each link it starts once the link is free *and* the head of the
   message has arrived; it holds the link for B/bandwidth, and at least until the tail has arrived
   from the previous link; the head moves on after the link's latency,
4. arrives when the tail has crossed the last link (plus the protocol's per-transfer latency).

It is the oracle for the fast engine (``collsim simulate --engine reference``; tests compare both):
same answer, no batching, no numpy, no symmetry: 15-45x slower than the fast engine run op by op (a
few seconds for 10,000s of ops), so use it on small worlds. Ties are broken as the fast
engine breaks them: transfers arriving at one instant are delivered in the order they were sent
(:class:`Delivery`, with explicit send numbers), and the ops one arrival releases start in op order
(data dependencies before flow control). Only simpy's public API is used. ``docs/engine.md`` walks one
ring step through this engine and the fast one.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> run = simulate_program(build_program("ring", "all_gather", 4), load_topology("ring:n=4"), 4e6)
>>> round(run.time_us, 3)  # 3 steps x (1 us + 1 MB / 100 GB/s), as the fast engine says
33.0
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Generator

import numpy as np
import simpy

from ..errors import CollsimError
from ..program import Program
from ..topology import Topology
from .fast import EngineRun
from .transfer import IDEAL, Protocol


def waits_for(p: Program) -> tuple[list[list[int]], list[list[int]]]:
    """For every op, the ops it waits for: (data) the writes to the chunk it sends, made in earlier
    steps, since (and including) the last overwrite, copies landing before reductions within a step;
    (window) the op ``window`` places back on its connection, if the program has flow control."""
    deps: list[list[int]] = [[] for _ in range(p.nops)]
    slots: list[list[int]] = [[] for _ in range(p.nops)]
    writes: dict[tuple[int, int], list[int]] = {}        # (agent, chunk) -> ops whose data it holds
    order = p.order()
    for step_ops in np.split(order, np.flatnonzero(np.diff(p.step[order])) + 1):
        for i in step_ops.tolist():                       # reads see the chunk as after the last step
            deps[i] = list(writes.get((int(p.src[i]), int(p.chunk[i])), ()))
        for i in sorted(step_ops.tolist(), key=lambda i: bool(p.reduce[i])):  # copies first, stable
            slot = (int(p.dst[i]), int(p.chunk[i]))
            writes[slot] = writes.get(slot, []) + [i] if p.reduce[i] else [i]
    window = int(p.params.get("window") or 0)
    if window:  # flow control: on each connection, op k waits for op k - window (NCCL's buffer slots)
        connections: dict[tuple[int, int], list[int]] = {}
        for i in np.lexsort((np.arange(p.nops), p.step)).tolist():
            queue = connections.setdefault((int(p.src[i]), int(p.dst[i])), [])
            if len(queue) >= window:
                slots[i].append(queue[-window])
            queue.append(i)
    return deps, slots


MAX_OPS = 250_000   # about a minute of plain SimPy; beyond that the fast engine is the tool


class Link:
    """A FIFO server: a link (or a reducing switch's reduction unit) carries one message at a time, in
    the order messages asked for it, and keeps its own state.

    ``serialise_us`` is the wire bytes over the bandwidth, ``latency_us`` the time from one end to the
    other; ``free_at`` (us) is when the tail of its last message has passed, ``bytes`` and ``busy_us``
    what it carried."""

    def __init__(self, env: simpy.Environment, serialise_us: float, latency_us: float, wire_bytes: float):
        self.env, self.serialise_us, self.latency_us, self.wire_bytes = env, serialise_us, latency_us, wire_bytes
        self.queue = simpy.Resource(env, capacity=1)
        self.free_at = 0.0
        self.bytes = self.busy_us = 0.0

    def request(self) -> simpy.Event:
        """Join the queue (granted in request order)."""
        return self.queue.request()

    def cross(self, request, head: float, tail: float) -> Generator[simpy.Event, object, tuple[float, float]]:
        """Carry a message whose head is here at ``head`` and whose tail leaves the previous link at
        ``tail`` (us); ``yield from`` it, holding ``request``. Returns (head, tail) at the far end."""
        yield request                                 # this link is ours ...
        # begin when the head is here and the previous message has left, computed from the two times
        # themselves: env.now after a timeout can be one rounding off, and a rounding can flip which of
        # two same-instant transfers queues first on the next link
        begin = max(head, self.free_at)
        if begin > self.env.now:
            yield self.env.timeout(begin - self.env.now)  # ... and the head of the message is here
        end = max(begin + self.serialise_us, tail)    # no sooner than the tail is in from the last link
        self.free_at = end
        self.env.process(self._release(request, end))  # busy until the tail has passed
        self.bytes += self.wire_bytes
        self.busy_us += self.serialise_us
        return begin + self.latency_us, end + self.latency_us

    def _release(self, request, at: float) -> Generator[simpy.Event, object, None]:
        yield self.env.timeout(at - self.env.now)
        self.queue.release(request)


class Delivery:
    """Hands over messages that land at one instant in the order they were sent, each once everything
    the one before it set in motion at that instant has run: the fast engine's order, which decides who
    queues first on a shared link. (simpy itself runs same-time events in the order they were
    scheduled, and a message's last timeout is scheduled when its tail leaves, not when it was sent.)"""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.landed: list[tuple[int, int, simpy.Event]] = []   # heap of (send number, op, its arrival event)
        self.busy = False

    def land(self, sent: int, op: int, arrived: simpy.Event) -> None:
        heapq.heappush(self.landed, (sent, op, arrived))
        if not self.busy:
            self.busy = True
            self.env.process(self._hand_over())

    def _hand_over(self) -> Generator[simpy.Event, object, None]:
        env = self.env
        while self.landed:
            while env.peek() == env.now:              # something else is due now: let it run first
                yield env.timeout(0)
            heapq.heappop(self.landed)[2].succeed()   # the earliest sent; its waiters start before the next
        self.busy = False


def _network(env: simpy.Environment, p: Program, topo: Topology, wire: float) -> tuple[list[Link], dict]:
    """A :class:`Link` per topology link, and the route of every (src, dst) agent pair of ``p``: its
    links, then the reduction unit of a reducing switch it ends at (one :class:`Link` per switch)."""
    links = [Link(env, wire / (link.bandwidth_GBps * 1e3), link.latency_us, wire) for link in topo.links]
    units = {}
    for s in p.switches:
        node = topo.nodes[topo.node_index[s]]
        if node.reduce and (node.reduce_bandwidth_GBps != float("inf") or node.reduce_latency_us):
            units[s] = Link(env, wire / (node.reduce_bandwidth_GBps * 1e3), node.reduce_latency_us, wire)
    node_of = [topo.gpus[r] for r in range(p.nranks)] + [topo.node_index[s] for s in p.switches]
    routes: dict[tuple[int, int], list[Link]] = {}
    for src, dst in zip(p.src.tolist(), p.dst.tolist()):
        if (src, dst) not in routes:
            hops = [links[k] for k in topo.route_nodes(node_of[src], node_of[dst])]
            if dst >= p.nranks and p.switches[dst - p.nranks] in units:
                hops.append(units[p.switches[dst - p.nranks]])
            routes[src, dst] = hops
    return links, routes


def simulate_program(p: Program, topo: Topology, nbytes: float, protocol: Protocol = IDEAL) -> EngineRun:
    """Run ``p`` moving ``nbytes`` on ``topo``, one process per op: same result as the fast engine."""
    if p.nranks > topo.nranks or not set(p.switches) <= set(topo.node_index):
        raise CollsimError(f"{p.algorithm} program does not fit topology {topo.name!r} (its ranks or switches)")
    if p.nops > MAX_OPS:
        raise CollsimError(f"the reference engine runs every op as a SimPy process and {p.algorithm} has {p.nops:,} ops "
                           f"(limit {MAX_OPS:,}): use the default engine, or a smaller world or size")
    env = simpy.Environment()
    links, routes = _network(env, p, topo, protocol.wire_bytes(p.nbytes_per_chunk(nbytes)))

    def transfer(i: int, hops: list[Link], ready: simpy.Event) -> Generator[simpy.Event, object, None]:
        yield ready                                   # 1. the data is complete, a buffer slot free
        start[i], sent = env.now, next(launches)
        requests = [link.request() for link in hops]  # 2. queue on every link of the route now
        head = tail = env.now
        for link, request in zip(hops, requests):     # 3. cut-through, link by link
            head, tail = yield from link.cross(request, head, tail)
        # 4. the tail crossed the last link: land at the instant the fast engine files it under (launch
        # time + delay, as simpy adds them), exactly, so same-instant arrivals stay same-instant; from
        # within [3/4, 1] of that instant the remaining delay is exact in floating point (Sterbenz)
        due = start[i] + (tail + protocol.hop_latency_us - start[i])
        if env.now < 0.75 * due:
            yield env.timeout(0.75 * due - env.now)
        yield env.timeout(due - env.now)
        end_us[i] = env.now
        delivery.land(sent, i, arrived[i])

    start, end_us, launches = np.zeros(p.nops), np.zeros(p.nops), itertools.count()
    arrived = [env.event() for _ in range(p.nops)]
    delivery = Delivery(env)
    data, window = waits_for(p)
    # data conditions first, then flow control, each in op order: ops that one arrival releases start
    # in that order (the fast engine's); the order decides who queues first on a shared link
    has_data = [env.all_of([arrived[j] for j in after]) for after in data]
    has_slot = [env.all_of([arrived[j] for j in after]) for after in window]
    for i in range(p.nops):
        env.process(transfer(i, routes[int(p.src[i]), int(p.dst[i])], has_data[i] & has_slot[i]))
    env.run()
    if not all(a.triggered for a in arrived):
        raise CollsimError(f"{p.algorithm}: some op never became ready (a dependency cycle in the program)")
    link_bytes = np.array([link.bytes for link in links])
    link_busy = np.array([link.busy_us for link in links])
    return EngineRun(float(end_us.max()) + protocol.launch_us, start, end_us, np.arange(p.nops), link_bytes,
                     link_busy, False, p.nops)     # events: counted as one process per op
