"""The reference engine: the link model of :mod:`sim.engine.fast`, written as plain SimPy, to be read.

One SimPy process per op, one ``simpy.Resource`` (capacity 1, FIFO) per link and per reducing switch's
reduction unit. An op's process

1. waits for the ops that write the chunk it sends (``yield env.all_of(...)``),
2. queues on every link of its route at once (a link serves one transfer at a time, in request order),
3. walks the route cut-through: on each link it starts once the link is free *and* the head of the
   message has arrived; it holds the link for B/bandwidth, and at least until the tail has arrived
   from the previous link; the head moves on after the link's latency,
4. arrives when the tail has crossed the last link (plus the protocol's per-transfer latency).

It is the oracle for the fast engine (``collsim simulate --engine reference``; tests compare both):
same answer, no batching, no numpy, no symmetry: 15-45x slower than the fast engine run op by op (a
few seconds for 10,000s of ops), so use it on small worlds. Ties are broken as the fast
engine breaks them: transfers arriving at one instant are delivered in the order they were sent, and
the ops one arrival releases start in op order (data dependencies before flow control).

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> run = simulate_program(build_program("ring", "all_gather", 4), load_topology("ring:n=4"), 4e6)
>>> round(run.time_us, 3)  # 3 steps x (1 us + 1 MB / 100 GB/s), as the fast engine says
33.0
"""
from __future__ import annotations

import itertools

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
    deps, slots = [[] for _ in range(p.nops)], [[] for _ in range(p.nops)]
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


class Arrival(simpy.Event):
    """A timeout that also carries an order: transfers arriving at the same instant are delivered in
    the order they were sent (simpy orders same-time events by priority, then by scheduling)."""

    def __init__(self, env: simpy.Environment, delay: float, order: int):
        super().__init__(env)
        self._ok, self._value = True, None      # what simpy.Timeout does, with our priority
        env.schedule(self, 1 + order, delay)    # 1 + ...: after simpy's own events at that instant


def simulate_program(p: Program, topo: Topology, nbytes: float, protocol: Protocol = IDEAL) -> EngineRun:
    """Run ``p`` moving ``nbytes`` on ``topo``, one process per op: same result as the fast engine."""
    if p.nranks > topo.nranks or not set(p.switches) <= set(topo.node_index):
        raise CollsimError(f"{p.algorithm} program does not fit topology {topo.name!r} (its ranks or switches)")
    if p.nops > MAX_OPS:
        raise CollsimError(f"the reference engine runs every op as a SimPy process and {p.algorithm} has {p.nops:,} ops "
                           f"(limit {MAX_OPS:,}): use the default engine, or a smaller world or size")
    env = simpy.Environment()
    links = [simpy.Resource(env) for _ in topo.links]
    units = {s: simpy.Resource(env) for s in p.switches}  # a reducing switch's reduction unit
    for res in [*links, *units.values()]:
        res.free_at = 0.0                                 # when its last message's tail has passed
    node_of = [topo.gpus[r] for r in range(p.nranks)] + [topo.node_index[s] for s in p.switches]
    wire = protocol.wire_bytes(p.nbytes_per_chunk(nbytes))
    link_bytes, link_busy = np.zeros(len(topo.links)), np.zeros(len(topo.links))

    def route(src: int, dst: int) -> list[tuple]:
        """(resource, serialise us, latency us, link) per link, then a reducing switch's unit (link None)."""
        hops = [(links[k], wire / (topo.links[k].bandwidth_GBps * 1e3), topo.links[k].latency_us, k)
                for k in topo.route_nodes(node_of[src], node_of[dst])]
        node = topo.nodes[node_of[dst]]
        if dst >= p.nranks and node.reduce and (node.reduce_bandwidth_GBps != float("inf") or node.reduce_latency_us):
            hops.append((units[p.switches[dst - p.nranks]], wire / (node.reduce_bandwidth_GBps * 1e3),
                         node.reduce_latency_us, None))
        return hops

    def hold(resource: simpy.Resource, request, until: float):
        yield env.timeout(until - env.now)
        resource.release(request)

    def transfer(i: int, hops, ready: simpy.Event):
        yield ready                                   # 1. the data is complete, a buffer slot free
        start[i], sent = env.now, next(launches)
        requests = [res.request() for res, *_ in hops]  # 2. queue on every link of the route now
        head = tail = env.now
        for (res, serialise, latency, link), request in zip(hops, requests):
            yield request                             # 3. this link is ours ...
            # begin when the head is here and the previous message has left, computed from the two
            # times themselves: env.now after a timeout can be one rounding off, and a rounding can
            # flip which of two same-instant transfers queues first on the next link
            begin = max(head, res.free_at)
            if begin > env.now:
                yield env.timeout(begin - env.now)    # ... and the head of the message is here
            end = max(begin + serialise, tail)        # no sooner than the tail is in from the last link
            res.free_at = end
            env.process(hold(res, request, end))      # busy until the tail has passed
            if link is not None:
                link_bytes[link] += wire
                link_busy[link] += serialise
            head, tail = begin + latency, end + latency
        # 4. the tail crossed the last link: arrive at the instant the fast engine files it under (launch
        # time + delay, as simpy adds them), exactly, so same-instant arrivals stay same-instant; from
        # within [3/4, 1] of that instant the remaining delay is exact in floating point (Sterbenz)
        due = start[i] + (tail + protocol.hop_latency_us - start[i])
        if env.now < 0.75 * due:
            yield env.timeout(0.75 * due - env.now)
        yield Arrival(env, due - env.now, sent)
        end_us[i] = env.now
        arrived[i].succeed()

    start, end_us, launches = np.zeros(p.nops), np.zeros(p.nops), itertools.count()
    arrived = [env.event() for _ in range(p.nops)]
    data, window = waits_for(p)
    # data conditions first, then flow control, each in op order: ops that one arrival releases start
    # in that order (the fast engine's); the order decides who queues first on a shared link
    has_data = [env.all_of([arrived[j] for j in after]) for after in data]
    has_slot = [env.all_of([arrived[j] for j in after]) for after in window]
    for i in range(p.nops):
        env.process(transfer(i, route(int(p.src[i]), int(p.dst[i])), has_data[i] & has_slot[i]))
    env.run()
    if not all(a.triggered for a in arrived):
        raise CollsimError(f"{p.algorithm}: some op never became ready (a dependency cycle in the program)")
    return EngineRun(float(end_us.max()) + protocol.launch_us, start, end_us, np.arange(p.nops), link_bytes,
                     link_busy, False, p.nops)     # events: counted as one process per op
