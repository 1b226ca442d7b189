"""Sweeps over sizes, topologies and algorithms, on every core, with a progress bar.

A sweep is a list of :class:`Task` (one :func:`sim.simulate` call each). :func:`run` maps them over a
pool of worker processes (``jobs``; 0 means every core) and returns the results in task order, so a
parallel sweep prints exactly what the serial one does. Workers receive topology *specs* (strings or
paths), load each once and keep it, so a 16,384-GPU preset is built once per worker, not per task.
A tqdm bar on stderr appears when a sweep runs longer than a couple of seconds (and stderr is a
terminal).

>>> tasks = [Task("all_reduce", s, "ring:n=8", "ring", "ideal") for s in (1 << 20, 1 << 30)]
>>> [round(r.time_us, 2) for r in run(tasks, jobs=1)]
[32.35, 18804.48]
>>> grid = sweep("all_gather", [1 << 20], ["ring:n=4", "switch:n=4"], algorithm="ring", protocol="ideal")
>>> [(r.topology, r.steps) for r in grid]
[('ring:n=4', 3), ('switch:n=4', 3)]
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import CollsimError

PROGRESS_DELAY_S = 2.0  # a bar for sweeps that take longer than this


@dataclass(frozen=True)
class Task:
    """One prediction: the arguments of :func:`sim.simulate` (``topology`` a spec string or file path)."""

    collective: str
    nbytes: int
    topology: str
    algorithm: str = "auto"
    protocol: str = "auto"
    options: dict = field(default_factory=dict)  # model, nchannels, pipeline, root, trace


def jobs_for(jobs: int | None, ntasks: int) -> int:
    """Worker processes to use: ``None``/1 serial, 0 every core, never more than there are tasks."""
    if jobs is None:
        return 1
    if jobs < 0:
        raise CollsimError(f"--jobs {jobs}: give a number of processes (0 = every core)")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(jobs or cores, ntasks))


def run(tasks: list[Task], jobs: int | None = 0, progress: bool | None = None, desc: str = "simulate") -> list:
    """Run ``tasks`` and return their :class:`~sim.engine.result.Result` in order.

    ``jobs``: worker processes (0 = every core, 1 = in this process). ``progress``: force the bar on or
    off (default: shown on a terminal for sweeps slower than ``PROGRESS_DELAY_S``). A task that fails
    with a :class:`~sim.errors.CollsimError` fails the sweep with that error.
    """
    tasks = list(tasks)
    n = jobs_for(jobs, len(tasks))
    bar = _bar(len(tasks), progress, desc)
    try:
        if n == 1:
            out = []
            for t in tasks:
                out.append(_run_one(t))
                bar.update()
            return out
        import multiprocessing as mp
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        from ..engine.runs import LEDGER
        with ctx.Pool(n) as pool:
            out = []
            for r, runs in pool.imap(_run_counted, tasks, chunksize=1):   # imap keeps task order
                out.append(r)
                LEDGER.absorb(runs)   # the workers' engine runs count as this command's
                bar.update()
            return out
    finally:
        bar.close()


def sweep(collective, sizes, topologies, algorithm: str = "auto", protocol: str = "auto", *, jobs: int | None = 0,
          progress: bool | None = None, **options) -> list:
    """Every (topology, size) pair, topologies outermost; ``options`` go to :func:`sim.simulate`."""
    tasks = [Task(str(collective), int(s), t, algorithm, protocol, dict(options)) for t in topologies for s in sizes]
    return run(tasks, jobs, progress)


def _run_one(task: Task):
    from ..api import simulate
    return simulate(task.collective, task.nbytes, _topology(task.topology), task.algorithm, task.protocol,
                    **task.options)


def _run_counted(task: Task):
    """In a worker: the task's Result and the engine runs it made (:meth:`sim.engine.runs.Ledger.delta`)."""
    from ..engine.runs import LEDGER
    before = LEDGER.snapshot()
    r = _run_one(task)
    return r, LEDGER.delta(before)


@lru_cache(maxsize=8)
def _topology(spec):
    """Each worker builds a topology once (specs are strings; a Topology object is used as is)."""
    from ..presets import load_topology
    return load_topology(spec)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, progress: bool | None, desc: str):
    if progress is False or total < 2:
        return _NoBar()
    from tqdm import tqdm
    # disable=None: tqdm shows the bar only on a terminal, unless progress=True forces it
    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, delay=0 if progress else PROGRESS_DELAY_S,
                disable=False if progress else None, leave=False)
