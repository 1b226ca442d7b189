"""A simpy model of ranks issuing collectives, with a flight recorder, a watchdog and hang detection.

Granularity is one collective: each rank is a process running its program (compute, enqueue, wait);
each (rank, process group) pair has a communication stream, as ProcessGroupNCCL has one CUDA stream per
group, which runs that rank's collectives on the group in order. A collective instance ``(pg, seq)``
starts when every member's stream has reached it and lasts ``duration_us`` (the cost function, stretched
by link faults). It never completes if the members disagree on the collective or its byte count (NCCL
does not check; in practice this hangs or corrupts memory, we model the hang), if its ring needs a link
that is down with no other route, or if a member crashed.

Flight recorder: every enqueue creates an entry (``scheduled``), the stream marks it ``started`` when it
reaches the head and ``completed`` when the instance ends. Watchdog: an entry not completed
``timeout_ms`` after it was created times out (PyTorch measures from creation too); the first timeout
stops the run and all live ranks dump, as ``TORCH_NCCL_DUMP_ON_TIMEOUT`` makes them do. Hang: the moment
nothing is running (no compute, no collective in flight) while collectives are pending, nothing can
progress any more; the run records that time and goes on to the timeout.

>>> from sim.flight.rank_workload import ddp_step
>>> r = run(ddp_step(world_size=4, buckets=2, bucket_nbytes="1M", steps=1))
>>> r.finished, r.hang_at_us, round(r.end_us)
(True, None, 32046)
"""
from __future__ import annotations

import contextlib
import gc
import json
import math
from dataclasses import dataclass, field

import simpy

from ..collectives import COLLECTIVES
from ..errors import CollsimError
from .cost import AlphaBeta, LinkModel, duration_us
from .faults import Crash
from .rank_workload import DTYPES, Call, Compute, Wait, Workload
from .records import dump, new_entry, ns

DEFAULT_TIMEOUT_MS = 600_000  # ProcessGroupNCCL's default: 10 minutes


@dataclass
class Instance:
    """One collective ``(pg, seq)`` across its members: who joined when, and when it ran."""
    pg: str
    seq: int
    members: tuple
    joined: dict = field(default_factory=dict)  # rank -> (time_us, Call)
    start_us: float | None = None
    end_us: float | None = None
    stuck: str = ""  # why it will never complete, once known


@dataclass(frozen=True)
class RunResult:
    """What a run produced. Times in microseconds of simulated time."""
    workload: Workload
    end_us: float
    finished: bool  # every live rank ran its whole program
    hang_at_us: float | None  # when nothing could progress any more
    timeout: dict | None  # {"rank", "pg", "seq", "at_us"} of the first watchdog timeout
    crashed: dict  # rank -> time_us
    entries: dict  # rank -> list of flight-recorder entries
    instances: tuple  # Instance, in (start or first join) order
    events: tuple  # (time_us, text)

    def dumps(self) -> dict[int, dict]:
        """Flight-recorder dumps of the ranks still alive (a crashed rank writes none)."""
        groups = self.workload.groups
        # each group's member list is written once and shared by every member's dump: per-rank copies made
        # the dumps of N ranks in one group N x N long (quadratic in time and memory)
        shared = {name: {"name": name, "desc": g.desc, "ranks": json.dumps(list(g.ranks))} for name, g in groups.items()}
        mine: dict[int, list] = {r: [] for r in range(self.workload.world_size)}
        for name, g in groups.items():
            for r in g.ranks:
                mine[r].append(name)
        return {r: dump(self.entries[r], groups, r, config={name: shared[name] for name in mine[r]})
                for r in range(self.workload.world_size) if r not in self.crashed}


class _Model:
    def __init__(self, env, workload, cost, links, timeout_ms, crashes):
        self.env, self.w, self.cost, self.links = env, workload, cost, links
        self.timeout_us = timeout_ms * 1e3
        self.timeout_ms = timeout_ms
        self.crash_at = {c.rank: c.at_us for c in crashes}
        self.crashed: dict[int, float] = {}
        self.active = 0  # compute phases and in-flight collectives: what can still make progress
        self.instances: dict[tuple, Instance] = {}
        self.done: dict[tuple, simpy.Event] = {}
        self.entries = {r: [] for r in range(workload.world_size)}
        self.seq = {}  # (rank, pg) -> last sequence id
        self.queues = {(r, pg): simpy.Store(env) for pg, g in workload.groups.items() for r in g.ranks}
        self.finished: set[int] = set()
        self.events: list[tuple[float, str]] = []
        self.stop = env.event()
        self.timeout = None
        self.procs: dict[int, list] = {r: [] for r in range(workload.world_size)}
        # What the run loop asks after every simulation step, kept up to date as it changes rather than
        # recounted over every rank and entry (that made a run quadratic in world size: 4,096 ranks took 60 s):
        # live ranks that have not finished their program, and live ranks' entries not yet completed.
        self.unfinished_live = workload.world_size
        self.open_by_rank = {r: 0 for r in range(workload.world_size)}
        self.open_live = 0

    def log(self, text: str):
        self.events.append((self.env.now, text))

    # -- the rank's CPU thread --------------------------------------------------------------
    def rank(self, r: int):
        outstanding = []
        try:
            for item in self.w.programs[r]:
                if getattr(item, "note", ""):
                    self.log(item.note)
                if isinstance(item, Compute):
                    self.active += 1
                    try:
                        yield self.env.timeout(item.time_us)
                    finally:
                        self.active -= 1
                elif isinstance(item, Call):
                    ev = self.enqueue(r, item)
                    outstanding.append(ev)
                    if item.wait:
                        yield ev
                elif isinstance(item, Wait):
                    yield self.env.all_of(outstanding)
                    outstanding = []
            yield self.env.all_of(outstanding)
            self.finished.add(r)
            if r not in self.crashed:
                self.unfinished_live -= 1
        except simpy.Interrupt:
            return

    def enqueue(self, r: int, call: Call) -> simpy.Event:
        g = self.w.groups[call.pg]
        seq = self.seq[(r, call.pg)] = self.seq.get((r, call.pg), 0) + 1
        e = new_entry(len(self.entries[r]), call.pg, g.desc, seq, call.op, call.nbytes, call.dtype,
                      len(g.ranks), self.env.now, self.timeout_ms)
        self.entries[r].append(e)
        self.open_by_rank[r] += 1
        if r not in self.crashed:
            self.open_live += 1
        ev = self.env.event()
        self.queues[(r, call.pg)].put((call, e, ev))
        return ev

    # -- the rank's stream on one process group ----------------------------------------------
    def stream(self, r: int, pg: str):
        try:
            while True:
                call, e, ev = yield self.queues[(r, pg)].get()
                e["state"], e["time_discovered_started_ns"] = "started", ns(self.env.now)
                inst = self.join(r, pg, e["collective_seq_id"], call)
                done = self.done[(pg, inst.seq)]
                left = e["time_created_ns"] / 1e3 + self.timeout_us - self.env.now
                yield done | self.env.timeout(max(left, 0.0))
                if not done.triggered:
                    self.on_timeout(r, pg, inst.seq)
                    return
                e.update(state="completed", retired=True, time_discovered_completed_ns=ns(inst.end_us),
                         duration_ms=(inst.end_us - inst.start_us) / 1e3)
                self.open_by_rank[r] -= 1
                if r not in self.crashed:
                    self.open_live -= 1
                ev.succeed()
        except simpy.Interrupt:
            return

    def join(self, r: int, pg: str, seq: int, call: Call) -> Instance:
        key = (pg, seq)
        if key not in self.instances:
            self.instances[key] = Instance(pg, seq, self.w.groups[pg].ranks)
            self.done[key] = self.env.event()
        inst = self.instances[key]
        inst.joined[r] = (self.env.now, call)
        if len(inst.joined) == len(inst.members):
            self.env.process(self.execute(inst))
        return inst

    def execute(self, inst: Instance):
        calls = [c for _, c in inst.joined.values()]
        ops = {c.op for c in calls}
        sizes = {c.nbytes for c in calls}
        inst.start_us = self.env.now
        if len(ops) > 1 or len(sizes) > 1:
            inst.stuck = f"members disagree: {sorted(ops)} of {sorted(sizes)} B"
            self.log(f"pg {inst.pg} seq {inst.seq}: {inst.stuck}; it can never complete")
            return
        if len({c.dtype for c in calls}) > 1:  # same bytes, different types: NCCL just runs it
            self.log(f"pg {inst.pg} seq {inst.seq}: dtypes differ ({sorted({c.dtype for c in calls})}) "
                     "with equal byte counts: completes with corrupt values")
        call = calls[0]
        n = len(inst.members)
        self.active += 1
        try:
            # Walk through link changes: the share of the work done so far is kept when the speed changes.
            t, remaining = self.env.now, 1.0
            changes = [c for c in self.links.change_times() if c > t]
            while True:
                slow, lat, down = self.links.state(inst.members, t)
                if down:
                    inst.stuck = "its ring needs a link that is down with no other route"
                    self.log(f"pg {inst.pg} seq {inst.seq}: {inst.stuck}")
                    return
                d = duration_us(self.cost, call.op, call.nbytes, n, slow, lat) * remaining
                if changes and changes[0] < t + d:
                    remaining *= 1 - (changes[0] - t) / d
                    yield self.env.timeout(changes[0] - t)
                    t = changes.pop(0)
                    continue
                yield self.env.timeout(d)
                break
            dead = [m for m in inst.members if m in self.crashed]
            if dead:
                inst.stuck = f"rank(s) {dead} died during it"
                return
            inst.end_us = self.env.now
            self.done[(inst.pg, inst.seq)].succeed()
        finally:
            self.active -= 1

    def on_timeout(self, r, pg, seq):
        if self.timeout is None:
            self.timeout = {"rank": r, "pg": pg, "seq": seq, "at_us": self.env.now}
            self.log(f"watchdog: rank {r} pg {pg} seq {seq} timed out after {self.timeout_ms:g} ms; all ranks dump")
            self.stop.succeed()

    def crash(self, r: int, at_us: float):
        yield self.env.timeout(at_us)
        self.crashed[r] = self.env.now
        # a dead rank's program and entries no longer count (its dump is never written)
        self.open_live -= self.open_by_rank[r]
        if r not in self.finished:
            self.unfinished_live -= 1
        self.log(f"rank {r} crashes")
        for p in self.procs[r]:
            if p.is_alive:
                p.interrupt()

    def pending(self) -> bool:
        """Whether a live rank has an entry not completed (O(1): see ``open_live``)."""
        return self.open_live > 0

    def all_live_finished(self) -> bool:
        """Whether every rank still alive ran its whole program (O(1): see ``unfinished_live``)."""
        return self.unfinished_live == 0


def check(workload: Workload) -> None:
    """Refuse calls the records cannot describe (all_gather/reduce_scatter counts must split evenly)."""
    for r in range(workload.world_size):
        for c in workload.calls(r):
            n = len(workload.groups[c.pg].ranks)
            count = c.nbytes // DTYPES[c.dtype][1]
            coll = COLLECTIVES.get(c.op)   # c.op may also be barrier, send, recv...
            if coll is not None and coll.sharded and count % n:
                raise CollsimError(f"rank {r}: {c.op} of {count} elements does not split over {n} ranks: "
                                   f"use a size that is a multiple of {n} elements")


@contextlib.contextmanager
def no_cyclic_gc():
    """Pause CPython's cyclic garbage collector (restored after, if it was on). A run allocates an entry,
    several events and a few dicts per call and keeps them all, and the generational collector rescans that
    growing heap again and again: with it on, 4,096 ranks of ``ddp_step`` took 6.7 s instead of 2.7 s. What a
    run drops is freed by reference counting (peak memory 228 MB with the collector off, 199 MB with it on)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def run(workload: Workload, cost=None, link_faults=(), crashes=(), topology=None,
        timeout_ms: float = DEFAULT_TIMEOUT_MS, until_us: float = math.inf) -> RunResult:
    """Run ``workload`` (faulty programs already applied) and return what happened.

    ``cost(op, nbytes, group_size) -> us`` (default :class:`AlphaBeta`); ``link_faults`` are
    :class:`~sim.flight.faults.LinkFault`; ``crashes`` are :class:`~sim.flight.faults.Crash`;
    ``topology`` (a ``sim.topology.Topology``) lets link faults find routes."""
    with no_cyclic_gc():
        return _run(workload, cost, link_faults, crashes, topology, timeout_ms, until_us)


def _run(workload, cost, link_faults, crashes, topology, timeout_ms, until_us) -> RunResult:
    check(workload)
    env = simpy.Environment()
    m = _Model(env, workload, cost or AlphaBeta(), LinkModel(tuple(link_faults), topology), timeout_ms,
               [c for c in crashes if isinstance(c, Crash)])
    # each rank's groups, in the groups' order (the processes' creation order orders simultaneous events);
    # asking every group whether it holds every rank was N x N
    groups_of: dict[int, list] = {r: [] for r in range(workload.world_size)}
    for pg, g in workload.groups.items():
        for r in g.ranks:
            groups_of[r].append(pg)
    for r in range(workload.world_size):
        m.procs[r].append(env.process(m.rank(r)))
        m.procs[r] += [env.process(m.stream(r, pg)) for pg in groups_of[r]]
    for r, t in m.crash_at.items():
        env.process(m.crash(r, t))
    for f in link_faults:
        env.process(_announce(env, m, f))
    hang_at = None
    while not m.stop.triggered and env.peek() < until_us:
        env.step()
        if m.all_live_finished() and not m.pending():
            break
        # Only judge once every event of this instant has been processed.
        if hang_at is None and env.peek() > env.now and m.active == 0 and m.pending():
            hang_at = env.now
            m.log("hang: collectives are pending and nothing is running, so none can progress")
    insts = sorted(m.instances.values(), key=lambda i: (i.start_us if i.start_us is not None
                                                        else min(t for t, _ in i.joined.values()), i.pg, i.seq))
    return RunResult(workload, env.now, m.all_live_finished(), hang_at, m.timeout,
                     dict(m.crashed), m.entries, tuple(insts), tuple(sorted(m.events, key=lambda x: x[0])))


def _announce(env, m: _Model, f):
    yield env.timeout(f.at_us)
    what = (f"keeps {f.bandwidth_fraction:g} of its bandwidth" if f.kind == "degraded_link" else "goes down")
    where = f"link(s) {', '.join(f.links)}" if f.links else f"link between ranks {f.a} and {f.b}"
    m.log(f"{where} {what}")
