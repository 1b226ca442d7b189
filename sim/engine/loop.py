"""The engine's event loop: ops with dependencies crossing FIFO links.

:func:`sim.engine.fast.simulate_program` turns a Program into plain arrays (a route per op, dependency counts,
successor lists) and hands them here. The link model is the engine's (see :mod:`sim.engine.fast`): a link
serves transfers one at a time in the order they ask for it; multi-hop routes are cut-through.

:class:`EventLoop` is a discrete-event loop in SimPy's shape without SimPy's generality: a heap of
``(instant, order, batch)`` where SimPy has ``(time, priority, event id, event)``, and
:meth:`EventLoop.step` pops the earliest entry and processes it, as ``simpy.Environment.step`` does.
The instant an arrival is filed under is computed as SimPy computes a timeout's (``now + delay``), and
ties go in the order entries were made, as in SimPy, so the times are those of one SimPy timeout per
transfer (``docs/engine.md`` walks one ring step through this loop and the reference engine).

Speed without changing the answer:

* Ops that complete at the same instant share one event (a batch). A batch keeps its ops in launch
  order and closes when it is processed, so ops are handled in exactly the order one event per op
  would give.
* A large batch is handled with numpy (:meth:`EventLoop.complete_group`, :meth:`EventLoop.launch_group`):
  its successors' dependency counts drop together, and ready ops whose routes share no link are
  launched elementwise. Each op then sees the same link state and does the same float operations as
  in the op-at-a-time path, so times are bit-identical (tests compare). Groups whose ops share a link
  fall back to the scalar path, which is what FIFO order needs.
* State lives in flat numpy buffers (8 bytes per op), read through memoryviews in the scalar path.

>>> import numpy as np
>>> routes = [((0, 10.0, 1.0),)]               # one route: link slot 0, 10 us to serialise, 1 us latency
>>> out = run_ops(routes, np.array([0, 0]), np.array([0, 0]), np.array([], int), np.array([0, 0, 0]), 1, 0.0)
>>> out.end_us.tolist()                        # two independent transfers queue on the same link
[11.0, 21.0]
"""
from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush
from typing import cast

import numpy as np

VECTOR_MIN = 48  # below this many ops a numpy pass costs more than the Python loop


@dataclass(frozen=True, eq=False)
class LoopRun:
    start_us: np.ndarray     # launch time of each op
    end_us: np.ndarray       # arrival time of each op at its destination
    remaining: np.ndarray    # dependencies never satisfied (all zero unless the program has a cycle)
    events: int              # events processed (one per distinct completion instant)


def _gather(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[ptr[r]:ptr[r+1]]`` for every r in ``rows``, concatenated (CSR rows without a loop)."""
    starts = ptr[rows]
    counts = ptr[rows + 1] - starts
    return values[np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))]


def _distinct(values: np.ndarray, scratch: np.ndarray) -> bool:
    """True if ``values`` has no repeats; O(len) with a scratch array as long as the value range."""
    pos = np.arange(len(values))
    scratch[values] = pos  # a repeated value keeps only one of its positions
    return bool((scratch[values] == pos).all())


class EventLoop:
    """The event queue and the link state of one run.

    ``routes[route_of[i]]`` is op i's route as ``(slot, serialise_us, latency_us)`` hops; op i starts
    once ``ndeps[i]`` ops listing it in ``succ[succ_ptr[k]:succ_ptr[k+1]]`` have arrived; a transfer
    also pays ``hop_latency_us`` (the protocol's) on arrival. ``free[slot]`` is when a link's last
    booking ends (us). The queue holds ``(instant, order, batch)``: like simpy's ``(time, priority,
    event id, event)``, one entry per instant at which transfers land, in the order it was scheduled.
    """

    def __init__(self, routes: list, route_of: np.ndarray, ndeps: np.ndarray, succ: np.ndarray,
                 succ_ptr: np.ndarray, nslots: int, hop_latency_us: float):
        nops = len(route_of)
        self.routes, self.hop_latency_us = routes, hop_latency_us
        self.rid_a = np.ascontiguousarray(route_of, dtype=np.int64)
        self.remaining_a = np.array(ndeps, dtype=np.int64)
        self.succ_a = np.ascontiguousarray(succ, dtype=np.int64)
        self.ptr_a = np.ascontiguousarray(succ_ptr, dtype=np.int64)
        self.free_a = np.zeros(nslots)
        self.start_a, self.end_a = np.zeros(nops), np.zeros(nops)
        # the scalar path reads and writes the same buffers through memoryviews (fast item access)
        self.rid, self.remaining = self.rid_a.data, self.remaining_a.data
        self.succ, self.ptr = self.succ_a.data, self.ptr_a.data
        self.free, self.start, self.end = (cast("memoryview[float]", a.data) for a in (self.free_a, self.start_a, self.end_a))
        self.queue: list[tuple[float, int, list[int]]] = []
        self.pending: dict[float, list[int]] = {}   # instant -> its batch, while not yet processed
        self.events = 0
        self._route_tables(routes)
        self.slot_stamp = np.zeros(nslots, dtype=np.int64)   # scratch for _distinct
        self.op_stamp = np.zeros(nops, dtype=np.int64)

    def _route_tables(self, routes: list) -> None:
        """Routes as padded tables for the numpy path (slot -1 marks "no such hop")."""
        nhops = max((len(r) for r in routes), default=0)
        self.r_len = np.array([len(r) for r in routes], dtype=np.int64)
        self.r_slot = np.full((len(routes), nhops), -1, dtype=np.int64)
        self.r_ser = np.zeros((len(routes), nhops))
        self.r_lat = np.zeros((len(routes), nhops))
        for k, r in enumerate(routes):
            for h, (s, ser, lat) in enumerate(r):
                self.r_slot[k, h], self.r_ser[k, h], self.r_lat[k, h] = s, ser, lat

    def run(self) -> LoopRun:
        """Launch the ops that wait for nothing, then process events until none is left."""
        self.launch_group(np.flatnonzero(self.remaining_a == 0), 0.0)
        while self.queue:
            self.step()
        return LoopRun(self.start_a, self.end_a, self.remaining_a, self.events)

    # ---- the scalar path: one op at a time, as simpy would ----------------------------------------
    def step(self) -> None:
        """Pop the next event (the earliest instant; its batch holds the transfers landing then, in
        launch order) and process it: every op whose last dependency just landed starts now."""
        now, _, batch = heappop(self.queue)
        del self.pending[now]        # closed: an op launched from here on lands in a new batch
        if len(batch) >= VECTOR_MIN:
            self.complete_group(batch, now)
            return
        remaining, succ, ptr, launch = self.remaining, self.succ, self.ptr, self.launch
        for i in batch:
            for k in range(ptr[i], ptr[i + 1]):
                j = succ[k]
                left = remaining[j] - 1
                remaining[j] = left
                if left == 0:
                    launch(j, now)

    def launch(self, i: int, now: float) -> None:
        """Start op i at ``now``: book every link of its route (cut-through), file its arrival."""
        free = self.free
        head, tail = now, -1.0
        for slot, ser, lat in self.routes[self.rid[i]]:
            f = free[slot]
            begin = head if head > f else f  # noqa: FURB136 (faster than max() in the hottest loop)
            end = begin + ser
            if end < tail:  # noqa: PLR1730 (as above)
                end = tail  # the tail cannot outrun the previous hop
            free[slot] = end
            head = begin + lat
            tail = end + lat
        arrive = (tail if tail >= 0.0 else now) + self.hop_latency_us
        self.start[i], self.end[i] = now, arrive
        key = now + (arrive - now)   # the float simpy would file a timeout of that delay under
        batch = self.pending.get(key)
        if batch is None:
            self.schedule(key, [i])
        else:
            batch.append(i)

    def schedule(self, key: float, ops: list[int]) -> None:
        """File ``ops`` (landing at instant ``key``) in that instant's open batch, or open one."""
        batch = self.pending.get(key)
        if batch is None:
            self.pending[key] = ops
            heappush(self.queue, (key, self.events, ops))
            self.events += 1
        else:
            batch.extend(ops)

    # ---- the batched path: many ops at once, with numpy, same floats --------------------------------
    def complete_group(self, batch: list[int], now: float) -> None:
        """``step`` for a large batch: drop its successors' counts together, launch the ready ones."""
        waiters = _gather(self.ptr_a, self.succ_a, np.asarray(batch, dtype=np.int64))
        remaining = self.remaining_a
        if _distinct(waiters, self.op_stamp):
            remaining[waiters] -= 1
            self.launch_group(waiters[remaining[waiters] == 0], now)
            return
        # an op becomes ready at its last dependency in this batch: launch in that order
        rev_unique, rev_first, counts = np.unique(waiters[::-1], return_index=True, return_counts=True)
        remaining[rev_unique] -= counts
        ready = remaining[rev_unique] == 0
        last = len(waiters) - 1 - rev_first[ready]
        self.launch_group(rev_unique[ready][np.argsort(last)], now)

    def launch_group(self, ops: np.ndarray, now: float) -> None:
        """``launch`` for many ops at once; elementwise when their routes share no link, else one by
        one (FIFO order on a shared link is sequential)."""
        r = self.rid_a[ops]
        slots = self.r_slot[r]
        if len(ops) < VECTOR_MIN or not _distinct(slots[slots >= 0], self.slot_stamp):
            for i in ops.tolist():
                self.launch(i, now)
            return
        head, tail = np.full(len(ops), now), np.full(len(ops), -1.0)
        free = self.free_a
        for h in range(int(self.r_len[r].max(initial=0))):
            a = (self.r_len[r] > h).nonzero()[0]
            s, ser, lat = slots[a, h], self.r_ser[r[a], h], self.r_lat[r[a], h]
            begin = np.maximum(head[a], free[s])
            end = np.maximum(begin + ser, tail[a])
            free[s] = end
            head[a], tail[a] = begin + lat, end + lat
        arrive = np.where(tail >= 0.0, tail, now) + self.hop_latency_us
        self.start_a[ops], self.end_a[ops] = now, arrive
        self.schedule_group(ops, now + (arrive - now))

    def schedule_group(self, ops: np.ndarray, key: np.ndarray) -> None:
        """``schedule`` for ops launched together: batches in order of each instant's first op, ops
        within an instant in launch order (as one ``launch`` after another would file them)."""
        if key.min() == key.max():  # the common case: everything lands at once
            self.schedule(float(key[0]), ops.tolist())
            return
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        by_key = np.argsort(inv, kind="stable")
        bounds = np.cumsum(np.bincount(inv))
        for k in np.argsort(first).tolist():
            self.schedule(float(key[first[k]]), ops[by_key[(bounds[k - 1] if k else 0):bounds[k]]].tolist())


def run_ops(routes: list, route_of: np.ndarray, ndeps: np.ndarray, succ: np.ndarray, succ_ptr: np.ndarray,
            nslots: int, hop_latency_us: float) -> LoopRun:
    """Time every op (see :class:`EventLoop` for the arguments)."""
    return EventLoop(routes, route_of, ndeps, succ, succ_ptr, nslots, hop_latency_us).run()
