"""The nccl-tests harness on one rank: warm-up, timed iterations, the ``#wrong`` check, the rank average.

For each (type, op), as nccl-tests' ``TimeTest``: ``-w`` warm-up calls at the largest size, then at the
smallest; then for every size, out-of-place and then in-place (``BenchTime``):

1. barrier, device sync;
2. host clock around ``-n`` calls followed by one device sync (``--timer events``: CUDA events recorded
   on the current stream before the first and after the last call); every call is also timed on its
   own (host clock after each call on the CPU, CUDA events between calls on a GPU);
3. per-iteration times combined over ranks by ``-a`` (0 rank 0, 1 average, 2 min, 3 max); ``time`` is
   their mean (nccl-tests' elapsed / iters), and each row also carries the median, minimum, maximum
   and every iteration (``time_samples_us``): on a shared machine the median and minimum are the
   statistics to trust (``collsim compare/calibrate --statistic``);
3b. ``--repeat R``: the whole sweep runs R times and each size pools its R x ``-n`` iterations, so a
   burst of load from another process spreads over all sizes instead of spoiling one;
4. ``-c`` times: fresh test data, one call, count wrong elements; ``#wrong`` is their sum over ranks
   (the worst of the ``-c`` checks).

Bandwidths are decimal GB/s: ``algbw = size / time``, ``busbw = algbw * factor`` with nccl-tests'
factors (2(n-1)/n all_reduce, (n-1)/n all_gather, reduce_scatter, all_to_all, 1 broadcast, reduce).

Before the sweep, :func:`p2p_latency` measures the transport's message latency between ranks 0 and 1
(``collsim calibrate --measured-latency`` takes it as the per-step latency alpha).

Example (inside an initialised process group)::

    rows = run_sweep(opts, rank=0, nranks=2, device=torch.device("cpu"))
    rows[0]["busbw_GBps"]
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

from sim.collectives import get_collective

from . import torch_collectives as C
from .backends import type_plan
from .options import DTYPES, BenchOptions, Layout, layout

# (layout, send, recv, op, inplace) -> a no-argument call that runs the collective once
CallFactory = Callable[[Layout, torch.Tensor, torch.Tensor, "str | None", bool], Callable[[], None]]


def torch_calls(opts: BenchOptions, rank: int) -> CallFactory:
    """The default ``--impl torch``: torch.distributed's own collective."""
    return lambda lay, send, recv, op, inplace: C.make_call(opts.collective, lay, send, recv, op, opts.root, rank, inplace)


def run_sweep(opts: BenchOptions, rank: int, nranks: int, device: torch.device,
              calls: CallFactory | None = None, on_row: Callable[[dict], None] | None = None,
              steps: int | None = None) -> list[dict]:
    """Run the whole sweep; every rank returns the same rows (JSON-ready dicts, see real.measure.bench_report)."""
    coll = get_collective(opts.collective)
    calls = calls or torch_calls(opts, rank)
    plan, _ = type_plan(opts, coll.reduces)
    rows = []
    for dname, op in plan:
        dt = DTYPES[dname]
        most = max(max(layout(opts.collective, s, dt.nbytes, nranks).send,
                       layout(opts.collective, s, dt.nbytes, nranks).recv) for s in opts.sizes)
        send = torch.zeros(most, dtype=C.torch_dtype(dname), device=device)
        recv = torch.zeros(most, dtype=C.torch_dtype(dname), device=device)
        for size in (max(opts.sizes), min(opts.sizes)):  # nccl-tests warms up at both ends of the sweep
            warm = calls(layout(opts.collective, size, dt.nbytes, nranks), send, recv, op, False)
            for _ in range(opts.warmup):
                warm()
        _sync(device)
        laid = [(size, layout(opts.collective, size, dt.nbytes, nranks)) for size in opts.sizes]
        samples: dict[tuple[int, str], list[float]] = {}
        wrongs: dict[tuple[int, str], int | None] = {}
        for rep in range(opts.repeat):  # --repeat: whole sweeps again, so slow drifts in load hit every size
            for size, lay in laid:
                for prefix, inplace in (("", False), ("inplace_", True)):
                    call = calls(lay, send, recv, op, inplace)
                    per_iter = _combine(_time(call, opts.iters, device, opts.timer), opts.average, nranks, device)
                    samples.setdefault((size, prefix), []).extend(per_iter)
                    if rep == 0:
                        wrongs[(size, prefix)] = _check(opts, lay, call, send, recv, op, dname, rank, nranks,
                                                        inplace, device)
                if rep == opts.repeat - 1:
                    row = {"nbytes": lay.nbytes, "count": lay.count, "dtype": dname, "redop": op or "none",
                           "root": opts.root if coll.rooted else -1}
                    for prefix in ("", "inplace_"):
                        row.update(timing_fields(prefix, samples[(size, prefix)], lay.nbytes,
                                                 coll.bus_factor(nranks), wrongs[(size, prefix)]))
                    row.update({"algorithm": f"measured:{opts.backend}", "protocol": None, "steps": steps})
                    rows.append(row)
                    if on_row:
                        on_row(row)
    return rows


P2P_ROUNDS, P2P_WARMUP = 30, 5


def p2p_latency(rank: int, nranks: int, device: torch.device, rounds: int = P2P_ROUNDS,
                warmup: int = P2P_WARMUP) -> dict | None:
    """Message latency between ranks 0 and 1 (us), measured as a ring step on two ranks is run: in each
    round both ranks send one 4-byte tensor to the other and wait for the other's (``isend`` +
    ``irecv``), so a round takes one one-way latency plus the per-message software cost. Rank 0 returns
    ``{"latency_us": median round, "min_us", "rounds", "nbytes": 4, "method": "exchange"}``; the
    other ranks (and ranks >= 2, which take no part) return None.

    Why not a blocking ping-pong: on gloo over loopback TCP on a loaded 2-core machine a send/recv
    ping-pong of a tiny tensor waits ~4 ms (one scheduler tick) in most round trips, about 70x what a
    collective's step takes; simultaneous sends both ways, as in every ring step, mostly take 30-80 us
    (they too can fall into the 4 ms mode; ``collsim calibrate --measured-latency`` then finds the
    value larger than the measured calls and does not use it). 35 rounds: a few ms, 0.15 s at worst.

    Example (inside an initialised 2-rank process group)::

        p2p_latency(0, 2, torch.device("cpu"))["latency_us"]    # ~50 on an idle 2-core machine
    """
    if nranks < 2 or rank > 1:
        return None
    peer = 1 - rank
    out = torch.zeros(1, dtype=torch.float32, device=device)
    into = torch.zeros(1, dtype=torch.float32, device=device)
    times = []
    for i in range(warmup + rounds):
        t0 = time.perf_counter()
        if device.type == "cuda":  # NCCL: a grouped send/recv pair, else both sends wait for their receives
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, peer), dist.P2POp(dist.irecv, into, peer)])
        else:
            reqs = [dist.isend(out, peer), dist.irecv(into, peer)]
        for r in reqs:
            r.wait()
        _sync(device)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e6)
    if rank != 0:
        return None
    return {"latency_us": statistics.median(times), "min_us": min(times), "rounds": rounds, "nbytes": 4,
            "method": "exchange"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _barrier(device: torch.device) -> None:
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def timing_fields(prefix: str, seconds: list[float], nbytes: int, bus_factor: float, wrong: int | None) -> dict:
    """A row's columns for one mode (``prefix`` "" out-of-place, "inplace_"): ``time_us`` the mean of
    the timed iterations (what nccl-tests prints), ``median_/min_/max_time_us``, every iteration in
    ``time_samples_us``, and algbw/busbw from the mean, as nccl-tests computes them.

    >>> f = timing_fields("", [1e-3, 2e-3, 6e-3], 4000, 1.0, 0)
    >>> round(f["time_us"]), round(f["median_time_us"]), round(f["min_time_us"]), round(f["max_time_us"])
    (3000, 2000, 1000, 6000)
    """
    us = [s * 1e6 for s in seconds]
    mean = sum(us) / len(us)
    algbw = nbytes / mean / 1e3 if mean > 0 else 0.0
    return {f"{prefix}time_us": mean, f"{prefix}algbw_GBps": algbw, f"{prefix}busbw_GBps": algbw * bus_factor,
            f"{prefix}wrong": wrong, f"{prefix}median_time_us": statistics.median(us),
            f"{prefix}min_time_us": min(us), f"{prefix}max_time_us": max(us),
            f"{prefix}time_samples_us": [round(u, 3) for u in us]}


def _time(call: Callable[[], None], iters: int, device: torch.device, timer: str) -> list[float]:
    """Seconds of each of ``iters`` calls on this rank. Their mean is nccl-tests' time: on the CPU
    (gloo blocks until its data has arrived) the host clock is read after every call, which sums to
    the elapsed time; on a GPU the calls stay queued back to back (no sync between them) and CUDA
    events between calls split the elapsed time (host clock, or the events' own span with
    ``--timer events``) into iterations."""
    _barrier(device)
    _sync(device)
    if device.type != "cuda":
        stamps = [time.perf_counter()]
        for _ in range(iters):
            call()
            stamps.append(time.perf_counter())
        return [b - a for a, b in zip(stamps, stamps[1:])]
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    t0 = time.perf_counter()
    events[0].record()
    for ev in events[1:]:
        call()
        ev.record()
    events[-1].synchronize()
    _sync(device)
    host = time.perf_counter() - t0
    gaps = [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
    total = sum(gaps)
    if timer == "events" or total <= 0:
        return gaps if total > 0 else [host / iters] * iters
    return [g * host / total for g in gaps]  # the host-clock mean, split as the events saw it


def _combine(seconds: list[float], average: int, nranks: int, device: torch.device) -> list[float]:
    """``-a``, iteration by iteration: 0 rank 0's time, 1 the average, 2 the minimum, 3 the maximum over ranks."""
    if average == 0 or nranks == 1:
        return seconds  # only rank 0 prints, so its own time is the answer
    t = torch.tensor(seconds, dtype=torch.float64, device=device)
    op = {1: dist.ReduceOp.SUM, 2: dist.ReduceOp.MIN, 3: dist.ReduceOp.MAX}[average]
    dist.all_reduce(t, op=op)
    return [float(v) / (nranks if average == 1 else 1) for v in t.tolist()]


def _check(opts: BenchOptions, lay: Layout, call: Callable[[], None], send: torch.Tensor, recv: torch.Tensor,
           op: str | None, dname: str, rank: int, nranks: int, inplace: bool, device: torch.device) -> int | None:
    """Wrong elements summed over ranks (worst of ``-c`` checks); None when ``-c 0``."""
    if opts.check == 0:
        return None
    worst = 0
    for _ in range(opts.check):
        C.fill_inputs(opts.collective, lay, send, recv, op, dname, opts.root, rank, nranks, inplace)
        call()  # a collective waits for every rank's input, so no barrier is needed here
        _sync(device)
        mine = C.count_wrong(opts.collective, lay, C.result_view(opts.collective, lay, recv, rank, inplace),
                             op, dname, opts.root, rank, nranks)
        total = torch.tensor([mine], dtype=torch.int64, device=device)
        dist.all_reduce(total)
        worst = max(worst, int(total.item()))
    return worst
