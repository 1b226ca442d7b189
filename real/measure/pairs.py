"""``collsim bench --pairs``: measure every pair of ranks on its own, and what each pair should give.

**Measurement.** For every pair (i, j), in turn, while the other ranks wait at a barrier: ranks i and j
send each other ``S`` bytes at once (``isend`` + ``irecv``; NCCL: one grouped ``batch_isend_irecv``),
as in one step of a ring, ``-w`` warm-up and ``-n`` timed rounds. ``measured_GBps`` is ``S`` over the
median round (decimal GB/s, one direction; both directions carry ``S`` at the same time). One pair at
a time, so a pair's number is its own path's, not shared with other pairs' traffic; a job of n ranks
takes n(n-1)/2 such runs.

**Prediction** (``predicted_GBps``) of the same exchange: ``S / (latency + S / bandwidth)`` with the
bandwidth and latency of the pair's path (the worse of its two directions):

- ``--topology SPEC``: the route between the pair's GPUs in that topology (its bottleneck link and the
  sum of its latencies: the simulator's link model for a lone transfer). Rank r is GPU r when the
  topology has exactly the job's ranks, else GPU ``local_rank`` of the topology's host number
  (the order hosts first appear among the ranks).
- default, gloo on one host: loopback TCP is memory traffic (a rank that sends m and receives m moves
  4 m bytes: :data:`real.compare.hostmodel.LOOPBACK_BYTES_PER_WIRE_BYTE`), so the bandwidth is this
  host's copy rate at the pair's size (measured by rank 0 before the pairs: copies of ``S`` bytes, the
  best of several, so a size that fits in cache is priced at the cache's rate) over 4, and the
  latency the 4-byte exchange latency measured between ranks 0 and 1; gloo across hosts: the speed
  Linux reports for the interface that reaches rank 0 (``/sys/class/net/IF/speed``) for pairs on two
  hosts, the loopback model within a host.
- default, NCCL: the DGX preset of the GPU (A100, H100, H200, B200) with one node per host.

Example (inside an initialised process group)::

    rows = measure_pairs(rank, world, torch.device("cpu"), 1 << 16, iters=5, warmup=1)
"""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from sim.errors import CollsimError

COPY_BYTES = 16 << 20
NCCL_PRESETS = (("B200", "dgx-b200"), ("H200", "dgx-h200"), ("H100", "dgx-h100"), ("A100", "dgx-a100"))


def pair_order(world: int) -> list[tuple[int, int]]:
    """Every pair (i < j), in a fixed order that every rank computes alike.

    >>> pair_order(4)
    [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    """
    return [(i, j) for i in range(world) for j in range(i + 1, world)]


def measure_pairs(rank: int, world: int, device, nbytes: int, iters: int, warmup: int) -> dict[tuple[int, int], list[float]]:
    """Seconds of each timed round of every pair this rank is the lower rank of (the other ranks' pairs
    are gathered by the caller). Every rank must call it."""
    import torch
    import torch.distributed as dist
    count = max(1, nbytes // 4)
    out = torch.ones(count, dtype=torch.float32, device=device)
    into = torch.zeros(count, dtype=torch.float32, device=device)
    mine: dict[tuple[int, int], list[float]] = {}
    delay = _test_delay(rank)
    for i, j in pair_order(world):
        if device.type == "cuda":
            dist.barrier(device_ids=[device.index])
        else:
            dist.barrier()
        if rank not in (i, j):
            continue
        peer = j if rank == i else i
        times = []
        for k in range(warmup + iters):
            t0 = time.perf_counter()
            if device.type == "cuda":   # grouped, or both sends would wait for their receives
                reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, peer), dist.P2POp(dist.irecv, into, peer)])
            else:
                reqs = [w for w in (dist.isend(out, peer), dist.irecv(into, peer)) if w is not None]
            if delay:
                time.sleep(delay)   # test hook: a slow rank (see _test_delay)
            for r in reqs:
                r.wait()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if k >= warmup:
                times.append(time.perf_counter() - t0)
        if rank == i:
            mine[(i, j)] = times
    return mine


def _test_delay(rank: int) -> float:
    """Test hook (tests/real/test_real_multinode.py shows a slow rank is named): ``COLLSIM_TEST_SLOW_RANK=R``
    makes rank R wait ``COLLSIM_TEST_SLOW_MS`` (default 20) ms in every round of its pairs."""
    target = os.environ.get("COLLSIM_TEST_SLOW_RANK")
    if target is None or not target.isdigit() or int(target) != rank:
        return 0.0
    return float(os.environ.get("COLLSIM_TEST_SLOW_MS", "20")) / 1e3


def host_copy_GBps(nbytes: int, repeats: int | None = None) -> float:
    """This host's memory copy rate (GB/s, bytes read + written) for buffers of ``nbytes`` (in cache or not,
    as the exchange's own buffers are), best of ``repeats`` copies (default: enough to copy ~64 MiB, 5 to 200)."""
    import torch
    repeats = repeats or max(5, min(200, COPY_BYTES * 4 // max(nbytes, 1)))
    a = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        b.copy_(a)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best / 1e9


def exchange_GBps(nbytes: int, bandwidth_GBps: float, latency_us: float) -> float:
    """GB/s of an S-byte exchange over a path: ``S / (latency + S / bandwidth)``.

    >>> round(exchange_GBps(10**6, 10.0, 100.0), 3)    # 100 us + 100 us
    5.0
    """
    t_us = latency_us + nbytes / (bandwidth_GBps * 1e3)
    return nbytes / t_us / 1e3


def nic_GBps(iface: str | None) -> float | None:
    """Speed Linux reports for ``iface`` (``/sys/class/net/IF/speed``, Mb/s) in GB/s; None if unknown."""
    if not iface or "/" in iface:
        return None
    try:
        with open(f"/sys/class/net/{iface}/speed") as f:
            mbps = int(f.read(32).strip())
    except (OSError, ValueError):
        return None
    return mbps / 8000.0 if mbps > 0 else None


def rank_gpus(topo, hosts: list[str], local_ranks: list[int]) -> list[int]:
    """Topology GPU index of each rank (see the module docstring)."""
    world = len(hosts)
    if topo.nranks == world:
        return list(range(world))
    order = list(dict.fromkeys(hosts))
    groups = topo.hosts
    out = []
    for h, lr in zip(hosts, local_ranks):
        k = order.index(h)
        if len(groups) <= k or lr >= len(groups[k]):
            raise CollsimError(f"--topology {topo.name} has {topo.nranks} GPUs in {len(groups)} host(s), too few for "
                               f"{world} ranks on {len(order)} host(s): give a topology with one GPU per rank")
        out.append(groups[k][lr])
    return out


def default_topology_spec(backend: str, gpu_names: list[str], nhosts: int) -> str | None:
    """The DGX preset of the GPU for NCCL; None for gloo (the loopback/NIC model applies)."""
    if backend != "nccl":
        return None
    for key, preset in NCCL_PRESETS:
        if any(key in name.upper() for name in gpu_names):
            return f"{preset}:nodes={nhosts}" if nhosts > 1 else preset
    raise CollsimError(f"no preset for GPU {', '.join(sorted(set(gpu_names))) or 'unknown'}: give --pairs a "
                       "--topology (a preset spec, or the file `collsim env --topology-out` writes)")


def predictor(spec: str | None, hosts: list[str], local_ranks: list[int], nbytes: int, copy_GBps: float | None,
              latency_us: float | None, nic: float | None) -> tuple[Callable[[int, int], float], str]:
    """``(predict(i, j) -> GB/s, description)`` for the pairs (see the module docstring)."""
    if spec:
        from sim.presets import load_topology
        topo = load_topology(spec)
        gpu = rank_gpus(topo, hosts, local_ranks)

        def on_topology(i: int, j: int) -> float:
            return min(exchange_GBps(nbytes, topo.path_bandwidth_GBps(a, b), topo.path_latency_us(a, b))
                       for a, b in ((gpu[i], gpu[j]), (gpu[j], gpu[i])))
        return on_topology, f"routes of topology {topo.name}: bottleneck link bandwidth and summed latency"
    if not copy_GBps:
        raise CollsimError("no host copy rate was measured for the loopback model: give --topology")
    from ..compare.hostmodel import LOOPBACK_BYTES_PER_WIRE_BYTE
    loop_bw, lat = copy_GBps / LOOPBACK_BYTES_PER_WIRE_BYTE, latency_us or 0.0
    if len(set(hosts)) > 1 and not nic:
        raise CollsimError("gloo across hosts: the speed of the interface that reaches rank 0 is unknown "
                           "(/sys/class/net/IF/speed): give --topology, e.g. switch:n=N,bandwidth_GBps=12.5 for 100 GbE")

    def loopback(i: int, j: int) -> float:
        return exchange_GBps(nbytes, loop_bw if hosts[i] == hosts[j] else min(loop_bw, nic or loop_bw), lat)
    desc = (f"gloo model: within a host loopback TCP at the host copy rate {copy_GBps:.2f} GB/s / "
            f"{LOOPBACK_BYTES_PER_WIRE_BYTE:g} = {loop_bw:.2f} GB/s, latency {lat:.1f} us (ranks 0-1, 4 B)"
            + (f"; across hosts the NIC's {nic:.2f} GB/s" if nic and len(set(hosts)) > 1 else ""))
    return loopback, desc


def pair_rows(times: dict[tuple[int, int], list[float]], nbytes: int, predict: Callable[[int, int], float]) -> list[dict]:
    """The JSON ``pairs`` rows: ``{"ranks": [i, j], "measured_GBps", "predicted_GBps", "ratio", ...}``."""
    rows = []
    for (i, j) in sorted(times):
        t = statistics.median(times[(i, j)])
        measured, predicted = nbytes / t / 1e9, predict(i, j)
        rows.append({"ranks": [i, j], "nbytes": nbytes, "measured_GBps": measured, "predicted_GBps": predicted,
                     "ratio": measured / predicted, "median_time_us": t * 1e6,
                     "min_time_us": min(times[(i, j)]) * 1e6, "rounds": len(times[(i, j)])})
    return rows
