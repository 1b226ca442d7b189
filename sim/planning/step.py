"""Lay out one training step of rank 0 as tasks (see :mod:`sim.planning.schedule` for the model).

>>> from sim.planning.training_workload import from_dict
>>> from sim.planning.layout import Layout
>>> w = from_dict({"model": {"params": 4000, "layers": 2, "dtype": "float32"},
...                "parallelism": {"strategy": "ddp", "bucket_mb": 0.01}, "compute": {"layer_forward_ms": 1}})
>>> s = StepShape.of(w, Layout.build(4), {})
>>> s.layer_nbytes, s.forward_us, s.backward_us
([8000, 8000], 1000.0, 2000.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import CollsimError
from .layout import Layout
from .schedule import Builder, buckets, pad
from .training_workload import Workload


@dataclass(frozen=True)
class StepShape:
    """Sizes and times of one pipeline stage on one rank: per-layer gradient bytes (this rank's tensor-
    parallel slice), per-layer-per-microbatch forward/backward time (us), activation bytes per microbatch."""

    layer_nbytes: list
    forward_us: float
    backward_us: float
    optimizer_us: float
    activation_nbytes: int
    elem: int

    @classmethod
    def of(cls, w: Workload, lay: Layout, meta: dict) -> "StepShape":
        m, p, c = w.model, w.parallel, w.compute
        if m.layers % lay.pp:
            raise CollsimError(f"{m.layers} layers do not split into pp={lay.pp} equal stages: pick pp dividing {m.layers}")
        per_stage = m.layers // lay.pp
        elem = m.elem_bytes
        layer_nbytes = [math.ceil(n / lay.tp) * elem for n in m.layer_params()[:per_stage]]
        if c.layer_forward_ms is not None:
            fwd, bwd = c.layer_forward_ms * 1e3, c.layer_backward_ms * 1e3
        else:
            # 6 * params * tokens FLOPs per step, shared by all GPUs; forward is one third of it.
            flops_per_gpu = 6.0 * m.params * c.tokens_per_step / lay.world
            step_us = flops_per_gpu / (c.peak(meta) * 1e12 * c.mfu) * 1e6
            fwd = step_us / 3 / (per_stage * p.microbatches)
            bwd = 2 * fwd
        act = 0
        if lay.tp > 1 or lay.pp > 1:
            if m.hidden is None or c.tokens_per_step is None:
                raise CollsimError("tensor/pipeline parallelism moves activations: give model.hidden and compute.tokens_per_step")
            tokens = c.tokens_per_step / (lay.dp * p.microbatches)
            act = int(math.ceil(tokens)) * m.hidden * elem
        return cls(layer_nbytes, fwd, bwd, c.optimizer_ms * 1e3, act, elem)


def build_step(w: Workload, lay: Layout, shape: StepShape, b: Builder) -> None:
    """Append rank 0's step to builder ``b`` in issue order."""
    p = w.parallel
    L, mbs = len(shape.layer_nbytes), p.microbatches
    shard_fam = "dp" if lay.shard == lay.dp else "shard"
    grad_comm: list[int] = []
    last = None  # the last compute task issued (the CPU's program order)

    def layer(name: str, phase: str, total_us: float, deps) -> tuple[int, int, int]:
        """A layer's compute; with tp > 1 two halves, each followed by a blocking tp all_reduce.
        Returns (first compute id, last compute id, id the next layer waits for)."""
        if lay.tp == 1:
            t = b.compute(name, phase, total_us, deps)
            return t, t, t
        first = b.compute(name + " (attention)", phase, total_us / 2, deps)
        ar1 = b.comm("all_reduce", shape.activation_nbytes, "tp", name + " tp all_reduce 1", phase, [(first, "end")], True)
        second = b.compute(name + " (mlp)", phase, total_us / 2, [(ar1, "end")])
        ar2 = b.comm("all_reduce", shape.activation_nbytes, "tp", name + " tp all_reduce 2", phase, [(second, "end")], True)
        return first, second, ar2

    def gather(l: int, mb: int, phase: str, deps) -> int | None:
        n = pad(shape.layer_nbytes[l], lay.shard, shape.elem)
        return b.comm("all_gather", n, shard_fam, f"{phase} all_gather L{l} mb{mb}", phase, deps, True)

    zero3 = p.strategy == "zero3"
    # ---- forward -------------------------------------------------------------------------------
    tail = None
    for mb in range(mbs):
        pending = gather(0, mb, "forward", [(tail, "end")] if tail is not None else []) if zero3 else None
        for l in range(L):
            deps = [(x, "end") for x in (tail, pending) if x is not None]
            first, last, tail = layer(f"forward L{l} mb{mb}", "forward", shape.forward_us, deps)
            if zero3 and l + 1 < L:
                pending = gather(l + 1, mb, "forward", [(first, "start") if p.prefetch else (last, "end")])
        if lay.pp > 1:
            b.comm("broadcast", -(-shape.activation_nbytes // lay.tp), "pp", f"send activations mb{mb}", "forward", [(last, "end")])
    if lay.pp > 1:
        tf = L * (shape.forward_us + 2 * _tp_time(b, shape))
        tb = L * (shape.backward_us + 2 * _tp_time(b, shape))
        p2p = b.cost_of("broadcast", -(-shape.activation_nbytes // lay.tp), "pp")
        tail = last = b.compute(f"pipeline bubble ({lay.pp - 1} x one microbatch)", "bubble",
                                (lay.pp - 1) * (tf + tb + 2 * p2p), [(tail, "end")], kind="bubble")
    # ---- backward ------------------------------------------------------------------------------
    plan = buckets(shape.layer_nbytes, p.first_bucket_bytes, p.bucket_bytes, shape.elem) if not zero3 else []
    ready_at: dict[int, list[tuple[int, int]]] = {}   # layer -> (bucket index, bytes) its backward completes
    for i, (n, ready) in enumerate(plan):
        ready_at.setdefault(ready, []).append((i, n))
    for mb in range(mbs):
        final = mb == mbs - 1
        pending = gather(L - 1, mb, "backward", [(tail, "end")]) if zero3 else None
        for l in reversed(range(L)):
            deps = [(x, "end") for x in (tail, pending) if x is not None]
            first, last, tail = layer(f"backward L{l} mb{mb}", "backward", shape.backward_us, deps)
            if zero3 and l > 0:
                pending = gather(l - 1, mb, "backward", [(first, "start") if p.prefetch else (last, "end")])
            if zero3:
                n = pad(shape.layer_nbytes[l], lay.shard, shape.elem)
                grad_comm += _reduce(b, lay, shard_fam, n, f"L{l} mb{mb}", last)
            elif final:
                for i, n in ready_at.get(l, ()):
                    if p.strategy == "ddp":
                        grad_comm.append(b.comm("all_reduce", n, "dp", f"all_reduce bucket {i}", "backward", [(last, "end")]))
                    else:
                        grad_comm += _reduce(b, lay, shard_fam, pad(n, lay.shard, shape.elem), f"bucket {i}", last)
        if lay.pp > 1:
            b.comm("broadcast", -(-shape.activation_nbytes // lay.tp), "pp", f"send gradients mb{mb}", "backward", [(last, "end")])
    # ---- optimizer -----------------------------------------------------------------------------
    deps = [(x, "end") for x in [tail] + grad_comm if x is not None]
    opt = b.compute("optimizer step", "optimizer", shape.optimizer_us, deps)
    if p.strategy in ("zero1", "zero2") and lay.shard > 1:
        for i, (n, _) in enumerate(plan):
            b.comm("all_gather", pad(n, lay.shard, shape.elem), shard_fam, f"all_gather params {i}", "after optimizer", [(opt, "end")])


def _reduce(b: Builder, lay: Layout, shard_fam: str, nbytes: int, what: str, after: int) -> list[int]:
    """reduce_scatter over the shard group, then (HSDP) all_reduce of the shard across replicas."""
    out = []
    rs = b.comm("reduce_scatter", nbytes, shard_fam, f"reduce_scatter {what}", "backward", [(after, "end")])
    if rs is not None:
        out.append(rs)
    if lay.replicas > 1:
        dep = [(rs, "end")] if rs is not None else [(after, "end")]
        ar = b.comm("all_reduce", nbytes // lay.shard, "replicate", f"all_reduce shard {what}", "backward", dep)
        out.append(ar)
    return [x for x in out if x is not None]


def _tp_time(b: Builder, shape: StepShape) -> float:
    """One tensor-parallel all_reduce of a microbatch's activations (us)."""
    return b.cost_of("all_reduce", shape.activation_nbytes, "tp")
