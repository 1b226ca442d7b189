"""One training step of one rank as tasks on streams, and the times those streams give them.

The builder lays out what rank 0 (every rank does the same, on its own groups) issues in one step, in
the order its CPU issues it. Compute runs on the ``compute`` stream; each process-group family (``dp``,
``tp``, ``shard``, ``replicate``, ``pp``) has its own communication stream, as ProcessGroupNCCL gives each
group its own CUDA stream. A stream runs its tasks one after another in issue order; a task also waits
for the tasks it depends on (CUDA events), at their end or, for a prefetch, their start:

- DDP: the gradient bucket that a layer's backward completes is all_reduced on ``dp`` while the next
  layers' backward computes (buckets fill in reverse layer order; ``bucket_mb`` caps them);
- ZeRO-1/2: the same buckets are reduce_scattered; after the optimizer step the updated parameters are
  all_gathered, bucket by bucket;
- ZeRO-3/FSDP: each layer's parameters are all_gathered before its forward and again before its
  backward (with ``prefetch``, the gather of layer i+1 is issued when layer i starts computing); its
  gradients are reduce_scattered after its backward; with a shard group smaller than the DP group (HSDP)
  the shard is then all_reduced across the replicas;
- tensor parallelism: each layer's forward and backward is two halves, each followed by an all_reduce
  of the activations (or their gradients) on ``tp`` that the next half waits for (Megatron-LM);
- pipeline parallelism: GPipe order (all microbatches forward, then all backward), with the fill-and-
  drain bubble ``(pp - 1) * (forward + backward of one microbatch + two activation transfers)`` as one
  idle block; activations travel to the next stage on ``pp`` without blocking this stage.

Gradients are reduced in the last microbatch's backward only (DDP's ``no_sync``), except ZeRO-3, which
gathers and reduce_scatters in every microbatch.

>>> t = run_streams([Task(0, "compute", "compute", "a", "forward", 5.0),
...                  Task(1, "comm", "dp", "b", "backward", 3.0, ((0, "end"),)),
...                  Task(2, "compute", "compute", "c", "backward", 1.0)])
>>> t
((0.0, 5.0), (5.0, 8.0), (5.0, 6.0))
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import CollsimError
from .costs import CollectiveCost


@dataclass(frozen=True)
class Task:
    """One kernel (or idle block) on one stream. ``deps``: ``(task id, "start"|"end")`` pairs.
    ``duration_us`` in microseconds; comm tasks carry the collective (``op``, ``nbytes`` in nccl-tests'
    convention, the group ``ranks``) and its simulated ``cost``."""

    id: int
    kind: str            # "compute" | "comm" | "bubble"
    lane: str            # "compute" or a process-group family
    name: str
    phase: str           # "forward" | "backward" | "optimizer" | "after optimizer"
    duration_us: float
    deps: tuple = ()
    op: str = ""
    nbytes: int = 0
    ranks: tuple = ()
    cost: CollectiveCost | None = None
    blocking: bool = False   # a compute task waits for this collective to finish


def run_streams(tasks) -> tuple[tuple[float, float], ...]:
    """(start, end) of every task, in microseconds: a task starts when its stream is free and its
    dependencies have started/ended. Tasks must be listed in issue order (dependencies first)."""
    free: dict[str, float] = {}
    times: list[tuple[float, float]] = []
    for t in tasks:
        start = free.get(t.lane, 0.0)
        for dep, when in t.deps:
            if dep >= t.id:
                raise CollsimError(f"task {t.name!r} depends on a later task: tasks must be in issue order")
            start = max(start, times[dep][0 if when == "start" else 1])
        end = start + t.duration_us
        free[t.lane] = end
        times.append((start, end))
    return tuple(times)


def pad(nbytes: int, parts: int, elem: int) -> int:
    """``nbytes`` rounded up so it splits into ``parts`` whole elements each (NCCL's all_gather and
    reduce_scatter need equal shards; FSDP pads its flat parameter the same way)."""
    unit = parts * elem
    return int(math.ceil(nbytes / unit) * unit)


def buckets(layer_nbytes: list[int], first_cap: int, cap: int, elem: int) -> list[tuple[int, int]]:
    """Gradient buckets as ``(nbytes, layer)``: gradients fill buckets in reverse layer order (the order
    backward produces them); a bucket is sent after the backward of ``layer``, the lowest layer in it.
    The first bucket holds at most ``first_cap`` bytes, the others ``cap`` (both rounded down to whole
    elements). Tensor boundaries are ignored: the byte stream is cut exactly at the cap.

    >>> buckets([100, 100, 100], 50, 120, 2)
    [(50, 2), (120, 1), (120, 0), (10, 0)]
    """
    caps = [max(elem, c // elem * elem) for c in (first_cap, cap)]
    out, cur, limit = [], 0, caps[0]
    for layer in reversed(range(len(layer_nbytes))):
        left = layer_nbytes[layer]
        while left > 0:
            take = min(left, limit - cur)
            cur, left = cur + take, left - take
            if cur == limit:
                out.append((cur, layer))
                cur, limit = 0, caps[1]
    if cur:
        out.append((cur, 0))
    return out


class Builder:
    """Appends tasks in issue order; ``cost(op, nbytes, family)`` times collectives."""

    def __init__(self, cost, group_of):
        self.tasks: list[Task] = []
        self._cost = cost          # (op, nbytes, family) -> CollectiveCost
        self._group_of = group_of  # family -> ranks of rank 0's group

    def compute(self, name: str, phase: str, duration_us: float, deps=(), kind: str = "compute") -> int:
        return self._add(Task(len(self.tasks), kind, "compute", name, phase, duration_us, tuple(deps)))

    def comm(self, op: str, nbytes: int, family: str, name: str, phase: str, deps=(), blocking=False) -> int | None:
        """Issue a collective; returns its id, or None when the group is a single rank (nothing to do)."""
        ranks = self._group_of(family)
        if len(ranks) < 2 or nbytes <= 0:
            return None
        c = self._cost(op, nbytes, family)
        return self._add(Task(len(self.tasks), "comm", family, name, phase, c.time_us, tuple(deps), op, int(nbytes),
                              tuple(ranks), c, blocking))

    def cost_of(self, op: str, nbytes: int, family: str) -> float:
        """Time (us) of a collective without issuing it (0 for a single-rank group)."""
        if len(self._group_of(family)) < 2 or nbytes <= 0:
            return 0.0
        return self._cost(op, nbytes, family).time_us

    def _add(self, task: Task) -> int:
        self.tasks.append(task)
        return task.id
