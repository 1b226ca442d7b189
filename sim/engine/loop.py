"""The engine's event loop: ops with dependencies crossing FIFO links, timed in simpy.

:func:`sim.engine.fast.simulate_program` turns a Program into plain arrays (a route per op, dependency counts,
successor lists) and hands them here. The link model is the engine's (see :mod:`sim.engine.fast`): a link
serves transfers one at a time in the order they ask for it; multi-hop routes are cut-through.

Speed without changing the answer:

* Ops that complete at the same instant share one simpy event. simpy runs same-time events in the order
  they were scheduled; a batch keeps its ops in launch order and closes when it fires, so ops are
  handled in exactly the order one event per op would give.
* A large batch is handled with numpy: its successors' dependency counts drop together, and ready ops
  whose routes share no link are launched elementwise. Each op then sees the same link state and does
  the same float operations as in the op-at-a-time loop, so times are bit-identical (tests compare).
  Groups whose ops share a link fall back to the loop, which is what FIFO order needs.
* State lives in flat numpy buffers (8 bytes per op), read through memoryviews in the scalar loop.

>>> import numpy as np
>>> routes = [((0, 10.0, 1.0),)]               # one route: link slot 0, 10 us to serialise, 1 us latency
>>> out = run_ops(routes, np.array([0, 0]), np.array([0, 0]), np.array([], int), np.array([0, 0, 0]), 1, 0.0)
>>> out.end_us.tolist()                        # two independent transfers queue on the same link
[11.0, 21.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VECTOR_MIN = 48  # below this many ops a numpy pass costs more than the Python loop


@dataclass(frozen=True, eq=False)
class LoopRun:
    start_us: np.ndarray     # launch time of each op
    end_us: np.ndarray       # arrival time of each op at its destination
    remaining: np.ndarray    # dependencies never satisfied (all zero unless the program has a cycle)
    events: int              # simpy events processed (one per distinct completion instant)


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


def run_ops(routes: list, route_of: np.ndarray, ndeps: np.ndarray, succ: np.ndarray, succ_ptr: np.ndarray,
            nslots: int, hop_latency_us: float) -> LoopRun:
    """Time every op. ``routes[route_of[i]]`` is op i's route as ``(slot, serialise_us, latency_us)`` hops;
    op i starts once ``ndeps[i]`` ops listing it in ``succ[succ_ptr[k]:succ_ptr[k+1]]`` have arrived."""
    import simpy  # here, not at import time: ``import sim`` stays light for the CLI
    nops = len(route_of)
    rid_a = np.ascontiguousarray(route_of, dtype=np.int64)
    remaining_a = np.array(ndeps, dtype=np.int64)
    succ_a = np.ascontiguousarray(succ, dtype=np.int64)
    ptr_a = np.ascontiguousarray(succ_ptr, dtype=np.int64)
    free_a = np.zeros(nslots)
    start_a, end_a = np.zeros(nops), np.zeros(nops)
    rid, remaining, succ_m, ptr_m = map(memoryview, (rid_a, remaining_a, succ_a, ptr_a))
    free, start_m, end_m = map(memoryview, (free_a, start_a, end_a))
    # routes as padded tables for the numpy path (slot -1 marks "no such hop")
    nhops = max((len(r) for r in routes), default=0)
    r_len = np.array([len(r) for r in routes], dtype=np.int64)
    r_slot = np.full((len(routes), nhops), -1, dtype=np.int64)
    r_ser = np.zeros((len(routes), nhops))
    r_lat = np.zeros((len(routes), nhops))
    for k, r in enumerate(routes):
        for h, (s, ser, lat) in enumerate(r):
            r_slot[k, h], r_ser[k, h], r_lat[k, h] = s, ser, lat
    slot_stamp = np.zeros(nslots, dtype=np.int64)   # scratch for _distinct
    op_stamp = np.zeros(nops, dtype=np.int64)
    env = simpy.Environment()
    pending: dict[float, list[int]] = {}
    events = 0

    def launch(i: int, now: float) -> None:
        nonlocal events
        head, tail = now, -1.0
        for slot, ser, lat in routes[rid[i]]:
            f = free[slot]
            begin = head if head > f else f
            end = begin + ser
            if end < tail:
                end = tail  # the tail cannot outrun the previous hop
            free[slot] = end
            head = begin + lat
            tail = end + lat
        arrive = (tail if tail >= 0.0 else now) + hop_latency_us
        start_m[i], end_m[i] = now, arrive
        delay = arrive - now
        key = now + delay   # the float simpy files the event under (env.now when it fires)
        batch = pending.get(key)
        if batch is None:
            pending[key] = [i]
            env.timeout(delay).callbacks.append(fire)
            events += 1
        else:
            batch.append(i)

    def launch_group(ops: np.ndarray, now: float) -> None:
        r = rid_a[ops]
        slots = r_slot[r]
        used = slots[slots >= 0]
        if len(ops) < VECTOR_MIN or not _distinct(used, slot_stamp):
            for i in ops.tolist():
                launch(i, now)
            return
        head = np.full(len(ops), now)
        tail = np.full(len(ops), -1.0)
        for h in range(int(r_len[r].max(initial=0))):
            act = r_len[r] > h
            s, a = slots[act, h], act.nonzero()[0]
            begin = np.maximum(head[a], free_a[s])
            end = np.maximum(begin + r_ser[r[a], h], tail[a])
            free_a[s] = end
            head[a] = begin + r_lat[r[a], h]
            tail[a] = end + r_lat[r[a], h]
        arrive = np.where(tail >= 0.0, tail, now) + hop_latency_us
        start_a[ops], end_a[ops] = now, arrive
        delay = arrive - now
        key = now + delay
        if key.min() == key.max():  # the common case: everything lands at once
            add(ops.tolist(), float(delay[0]), float(key[0]))
            return
        # batches in order of each key's first op, ops within a key in launch order (as the loop would)
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        by_key = np.argsort(inv, kind="stable")
        bounds = np.cumsum(np.bincount(inv))
        for k in np.argsort(first).tolist():
            members = ops[by_key[(bounds[k - 1] if k else 0):bounds[k]]].tolist()
            add(members, float(delay[first[k]]), float(key[first[k]]))

    def add(ops: list[int], delay: float, key: float) -> None:
        nonlocal events
        batch = pending.get(key)
        if batch is None:
            pending[key] = ops
            env.timeout(delay).callbacks.append(fire)
            events += 1
        else:
            batch.extend(ops)

    def fire(_event) -> None:
        now = env.now
        batch = pending.pop(now)  # this event's batch: one open batch per instant, closed here
        if len(batch) >= VECTOR_MIN:
            waiters = _gather(ptr_a, succ_a, np.asarray(batch, dtype=np.int64))
            if _distinct(waiters, op_stamp):
                remaining_a[waiters] -= 1
                launch_group(waiters[remaining_a[waiters] == 0], now)
                return
            # an op becomes ready at its last dependency in this batch: launch in that order
            rev_unique, rev_first, counts = np.unique(waiters[::-1], return_index=True, return_counts=True)
            remaining_a[rev_unique] -= counts
            ready = remaining_a[rev_unique] == 0
            last = len(waiters) - 1 - rev_first[ready]
            launch_group(rev_unique[ready][np.argsort(last)], now)
            return
        for i in batch:
            for k in range(ptr_m[i], ptr_m[i + 1]):
                j = succ_m[k]
                left = remaining[j] - 1
                remaining[j] = left
                if left == 0:
                    launch(j, now)

    launch_group(np.flatnonzero(remaining_a == 0), 0.0)
    env.run()
    return LoopRun(start_a, end_a, remaining_a, events)
