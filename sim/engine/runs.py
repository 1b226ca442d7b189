"""Engine runs, each made once per input and counted: what a prediction cost.

An engine run is a pure function of (program, topology, bytes, protocol, engine). Different predictions
can ask for the same run: the engine extrapolates large NVLSTree sizes from runs of a fixed number of
fixed-size pieces, so 2, 4 and 8 GiB ask for the same two runs; ``--select fastest`` and the
faster-choice note time pairs selection has timed already. :func:`timed` answers a repeat from a small
LRU (:data:`CACHE_SIZE` runs of at most :data:`CACHE_MAX_OPS` ops each, so a large cluster's runs are not
held in memory) and :data:`LEDGER` counts the runs actually made, and the distinct inputs among them:
``collsim simulate --format json`` reports them as ``"stats"``.

A program's key is a digest of what the engine reads from it (its ops, chunk layout and switches), so
two equal programs built apart are one input.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> topo, before = load_topology("switch:n=4"), LEDGER.snapshot()
>>> from sim.engine.fast import simulate_program
>>> from sim.nccl.protocols import IDEAL
>>> def run(p, t, nbytes, proto, engine): return simulate_program(p, t, nbytes, proto)
>>> a = timed(run, build_program("ring", "all_reduce", 4), topo, 1e6, IDEAL)
>>> b = timed(run, build_program("ring", "all_reduce", 4), topo, 1e6, IDEAL)    # built again: the same input
>>> a is b, LEDGER.since(before)["engine_runs"]
(True, 1)
"""
from __future__ import annotations

import hashlib
import time
import weakref
from collections import OrderedDict

CACHE_SIZE = 64            # runs kept for reuse
CACHE_MAX_OPS = 200_000    # programs with more ops are run every time they are asked for (memory)


class Ledger:
    """Engine runs made in this process: how many, their distinct inputs, the seconds they took."""

    def __init__(self) -> None:
        self.runs = 0
        self.keys: set = set()
        self.seconds = 0.0

    def record(self, key, seconds: float) -> None:
        self.runs += 1
        self.keys.add(key)
        self.seconds += seconds

    def snapshot(self) -> tuple:
        """The ledger now, to subtract later (:meth:`since`)."""
        return self.runs, frozenset(self.keys), self.seconds

    def since(self, snap: tuple) -> dict:
        """``{"engine_runs", "distinct_engine_runs", "engine_seconds"}`` made after :meth:`snapshot`
        gave ``snap`` (distinct: inputs not run before it either)."""
        runs, keys, seconds = snap
        return {"engine_runs": self.runs - runs, "distinct_engine_runs": len(self.keys - keys),
                "engine_seconds": self.seconds - seconds}

    def delta(self, snap: tuple) -> tuple:
        """What :meth:`absorb` takes: the runs, keys and seconds since ``snap`` (a worker process's share)."""
        runs, keys, seconds = snap
        return self.runs - runs, frozenset(self.keys - keys), self.seconds - seconds

    def absorb(self, delta: tuple) -> None:
        """Add a worker process's runs (:meth:`delta`) to this process's ledger."""
        runs, keys, seconds = delta
        self.runs += runs
        self.keys |= keys
        self.seconds += seconds


LEDGER = Ledger()
_CACHE: OrderedDict = OrderedDict()
_DIGESTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # Program/Topology -> digest (both immutable)


def program_digest(program) -> str:
    """A digest of everything the engine reads from ``program`` (cached per program object)."""
    d = _DIGESTS.get(program)
    if d is None:
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((program.collective.name, program.nranks, program.nchunks, program.steps, program.root,
                       program.algorithm, repr(program.switches))).encode())
        for name in ("src", "dst", "chunk", "step", "channel", "reduce", "rotation"):
            arr = getattr(program, name)     # rotation: the symmetry the fast engine may exploit
            h.update(name.encode())
            h.update(b"-" if arr is None else arr.tobytes())
        d = _DIGESTS[program] = h.hexdigest()
    return d


def topology_digest(topo) -> str:
    """A digest of what the engine reads from ``topo``: its nodes and links (cached per topology object;
    an effective copy of a topology keeps its name but not its bandwidths, so the name is not enough)."""
    d = _DIGESTS.get(topo)
    if d is None:
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((topo.name, topo.nodes)).encode())
        h.update(repr([(l.src, l.dst, l.bandwidth_GBps, l.latency_us, l.kind) for l in topo.links]).encode())
        d = _DIGESTS[topo] = h.hexdigest()
    return d


def timed(run, program, topo, nbytes: float, protocol, *, engine: str = "default"):
    """``run(program, topo, nbytes, protocol, engine=engine)`` (:func:`sim.engine.run_program` passes
    its engines), once per input: a repeat is answered from the cache and not counted. The returned
    :class:`~sim.engine.fast.EngineRun` is shared: read it, do not change it."""
    key = (program_digest(program), topology_digest(topo), float(nbytes), protocol, engine)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    start = time.perf_counter()
    out = run(program, topo, nbytes, protocol, engine=engine)
    LEDGER.record(key, time.perf_counter() - start)
    if program.nops <= CACHE_MAX_OPS:
        _CACHE[key] = out
        if len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return out


def clear() -> None:
    """Forget the kept runs (the ledger keeps counting)."""
    _CACHE.clear()


__all__ = ["CACHE_MAX_OPS", "CACHE_SIZE", "LEDGER", "Ledger", "clear", "program_digest", "timed", "topology_digest"]
