"""The six collectives on torch tensors: the call to time, the test data, and the ``#wrong`` count.

Like nccl-tests, every rank owns a send and a receive buffer sized for the largest size; one size is a
view of their first elements (:class:`real.measure.options.Layout`). In-place runs use the receive buffer only,
with nccl-tests' offsets: all_gather's input is shard ``rank`` of the output, reduce_scatter's output is
shard ``rank`` of the input.

Test data are small integers, ``value(i, r)`` for global element ``i`` of rank ``r``, chosen so every
reduction is exact in the element type (a sum of n values stays below the largest integer the type
holds exactly). So ``#wrong`` counts elements that differ from the exact answer, not rounding; only
``avg`` (a division) is compared with a tolerance of a few units in the last place.

>>> import torch
>>> values(torch.arange(4), 1, "sum", DTYPES["float"], 2).tolist()
[14, 21, 28, 35]
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from sim.collectives import get_collective

from .options import DTYPES, DType, Layout

TORCH_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
             "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
IN_PLACE_ONLY = ("all_reduce", "broadcast", "reduce")  # torch's call has one tensor
# torch 2.13 renamed these (the old names warn); torch >= 2.2 is supported, so fall back
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_SLICE = 1 << 22  # elements per slice when filling and checking: bounds the temporaries to ~100 MB
_EPS = {"half": 2**-10, "bfloat16": 2**-7, "float": 2**-23, "double": 2**-52, "f8e4m3": 2**-3, "f8e5m2": 2**-2}


def torch_dtype(dname: str) -> torch.dtype:
    return getattr(torch, DTYPES[dname].torch_name)


def values(idx: torch.Tensor, rank: "torch.Tensor | int", op: str | None, dt: DType, nranks: int) -> torch.Tensor:
    """Test value (int64) of global elements ``idx`` on rank(s) ``rank`` for reduction ``op``."""
    if op == "prod":  # a factor 2 on about a quarter of the ranks: exact powers of two
        return 1 + ((idx + rank) % 4 == 0).to(torch.int64)
    limit = dt.exact // nranks if op in ("sum", "avg") else dt.exact
    m = max(1, min(limit, 1000))
    return (idx * 7 + rank * 13) % m + 1


def _reduced(idx: torch.Tensor, op: str, dt: DType, nranks: int) -> torch.Tensor:
    """Exact reduction over all ranks of ``values(idx, q)``: int64, or float64 for avg."""
    acc = values(idx, 0, op, dt, nranks)
    for q in range(1, nranks):
        v = values(idx, q, op, dt, nranks)
        acc = {"sum": torch.add, "avg": torch.add, "prod": torch.mul,
               "min": torch.minimum, "max": torch.maximum}[op](acc, v)
    return acc.to(torch.float64) / nranks if op == "avg" else acc


def result_view(collective: str, lay: Layout, recv: torch.Tensor, rank: int, inplace: bool) -> torch.Tensor:
    """Where the result lands: the receive buffer, or this rank's shard of it (in-place reduce_scatter)."""
    c = get_collective(collective)
    if inplace and c.sharded and c.reduces:   # reduce_scatter
        return recv[rank * lay.count:(rank + 1) * lay.count]
    return recv[:lay.recv]


def make_call(collective: str, lay: Layout, send: torch.Tensor, recv: torch.Tensor, op: str | None,
              root: int, rank: int, inplace: bool) -> Callable[[], None]:
    """A no-argument function that runs the collective once (what the timed loop calls)."""
    maker = _CALLS.get(get_collective(collective).name)
    if maker is None:
        raise ValueError(f"unknown collective {collective!r}")
    return maker(lay, send, recv, TORCH_OPS[op] if op else None, root, rank, inplace)


# One torch call per collective: (layout, send, recv, torch op, root, rank, inplace) -> the call.
def _call_all_reduce(lay, send, recv, red, root, rank, inplace):
    out = recv[:lay.recv]
    return lambda: dist.all_reduce(out, op=red)


def _call_broadcast(lay, send, recv, red, root, rank, inplace):
    out = recv[:lay.recv]
    return lambda: dist.broadcast(out, src=root)


def _call_reduce(lay, send, recv, red, root, rank, inplace):
    out = recv[:lay.recv]
    return lambda: dist.reduce(out, dst=root, op=red)


def _call_all_gather(lay, send, recv, red, root, rank, inplace):
    n, out = lay.count, recv[:lay.recv]
    src = recv[rank * n:(rank + 1) * n] if inplace else send[:n]
    return lambda: _all_gather(out, src)


def _call_reduce_scatter(lay, send, recv, red, root, rank, inplace):
    n = lay.count
    src = recv[:lay.send] if inplace else send[:lay.send]
    dst = recv[rank * n:(rank + 1) * n] if inplace else recv[:n]
    return lambda: _reduce_scatter(dst, src, op=red)


def _call_all_to_all(lay, send, recv, red, root, rank, inplace):
    out = recv[:lay.recv]
    if not inplace:
        return lambda: dist.all_to_all_single(out, send[:lay.send])
    # all_to_all_single on one buffer overwrites blocks before they are sent (gloo gets it wrong, as does
    # nccl-tests' in-place alltoall): stage the input in the idle send buffer; the copy is timed.
    stage = send[:lay.send]
    return lambda: (stage.copy_(out), dist.all_to_all_single(out, stage))


_CALLS = {"all_reduce": _call_all_reduce, "broadcast": _call_broadcast, "reduce": _call_reduce,
          "all_gather": _call_all_gather, "reduce_scatter": _call_reduce_scatter, "all_to_all": _call_all_to_all}


def _fill(buf: torch.Tensor, first: int, src_rank: int, op: str | None, dt: DType, nranks: int) -> None:
    """``buf[k] = value(first + k, src_rank)``, in slices."""
    for start in range(0, buf.numel(), _SLICE):
        part = buf[start:start + _SLICE]
        idx = torch.arange(first + start, first + start + part.numel(), dtype=torch.int64, device=buf.device)
        part.copy_(values(idx, src_rank, op, dt, nranks).to(buf.dtype))


def fill_inputs(collective: str, lay: Layout, send: torch.Tensor, recv: torch.Tensor, op: str | None, dname: str,
                root: int, rank: int, nranks: int, inplace: bool) -> None:
    """Write this rank's test input, and zeros where results will land (test values are never 0)."""
    dt = DTYPES[dname]
    recv[:max(lay.send, lay.recv)].zero_()
    n = lay.count
    c = get_collective(collective)
    if c.sharded and not c.reduces:   # all_gather: my shard, in place in the output or in the send buffer
        _fill(recv[rank * n:(rank + 1) * n] if inplace else send[:n], rank * n, rank, op, dt, nranks)
        return
    if c.root_is_source and rank != root:   # broadcast
        return  # the root's data must arrive; zeros show if it does not
    # torch's all_reduce/broadcast/reduce are in place: the out-of-place run starts from the receive buffer too
    target = recv if inplace or collective in IN_PLACE_ONLY else send
    _fill(target[:lay.send], 0, rank, op, dt, nranks)


def count_wrong(collective: str, lay: Layout, result: torch.Tensor, op: str | None, dname: str, root: int,
                rank: int, nranks: int) -> int:
    """Elements of this rank's result that differ from the exact answer (0 where nothing is expected)."""
    dt = DTYPES[dname]
    c = get_collective(collective)
    if c.rooted and c.reduces and rank != root:   # reduce: only the root holds a result
        return 0
    n, wrong = lay.count, 0
    for start in range(0, result.numel(), _SLICE):
        got = result[start:start + _SLICE]
        idx = torch.arange(start, start + got.numel(), dtype=torch.int64, device=result.device)
        if c.reduces and not c.sharded:   # all_reduce, reduce: the whole sum
            want = _reduced(idx, op, dt, nranks)
        elif c.reduces:   # reduce_scatter: my shard of the sum
            want = _reduced(rank * n + idx, op, dt, nranks)
        elif c.root_is_source:   # broadcast
            want = values(idx, root, op, dt, nranks)
        elif c.sharded:   # all_gather
            want = values(idx, idx // n, op, dt, nranks)
        else:  # all_to_all: block s of my output is block `rank` of rank s's input
            want = values(rank * n + idx % n, idx // n, op, dt, nranks)
        wrong += _mismatches(got, want.to(got.dtype), op, dname, nranks)
    return wrong


def _mismatches(got: torch.Tensor, want: torch.Tensor, op: str | None, dname: str, nranks: int) -> int:
    g, w = got.to(torch.float64), want.to(torch.float64)
    if op == "avg":
        # NCCL averages by pre-scaling with 1/n (rounding per rank); integers divide the sum (off by one at most).
        tol = w.abs() * _EPS[dname] * (nranks + 1) + _EPS[dname] if dname in _EPS else torch.ones_like(w)
        bad = (g - w).abs() > tol
    else:
        bad = g != w
    bad &= ~(torch.isnan(g) & torch.isnan(w))  # an overflow to NaN on both sides is the same answer
    return int(bad.sum().item())
