"""Does ``collsim bench`` add time to what it measures? Harness vs a bare torch.distributed loop.

Both time the same all_reduce in the same process group at the same sizes, in interleaved runs whose
order rotates (bare, harness, bare again; harness, bare again, bare; ...) so load drifts hit all alike. The bare loop is the textbook one::

    dist.barrier(); t0 = perf_counter(); for _ in range(iters): dist.all_reduce(x); t = perf_counter() - t0

and the harness is :func:`real.measure.harness.run_sweep` with one size and no check; both are averaged over
ranks. The script prints, per size, the best (minimum) and median per-call time of each over the
repetitions, and the ratio of the minima: the minimum is the time the code needs when nothing else
gets in the way (noise only ever adds time), so it is the fair comparison on a shared machine. A second
bare series gives an A/A ratio: how far two identical loops differ here (the noise floor). The overall
ratio is the geometric mean over sizes. Exit status: 0 when the harness is at most 5% slower, 1 when it
is slower than that, 2 when it looks slower but two identical loops already differ by 5% or more here
(too noisy to tell).

Run::

    python benchmarks/bench_harness_overhead.py                 # 2 gloo ranks on the CPU
    python benchmarks/bench_harness_overhead.py --backend nccl --nprocs 8 --sizes 1M,64M,1G
"""
from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import sys
import time

LIMIT = 1.05


def _bare(x, iters: int, warmup: int, device) -> float:
    import torch
    import torch.distributed as dist
    for _ in range(warmup):
        dist.all_reduce(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.item() / dist.get_world_size() * 1e6


def _rank(rank: int, args, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(args.nprocs))
    import torch
    import torch.distributed as dist

    from real.measure.harness import run_sweep
    from real.measure.options import BenchOptions
    from sim.units import parse_size
    device = torch.device("cuda", rank) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=args.nprocs)
    results = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        x = torch.ones(size // 4, dtype=torch.float32, device=device)
        opts = BenchOptions(sizes=(size,), minbytes=size, maxbytes=size, iters=args.iters, warmup=args.warmup,
                            check=0, backend=args.backend, nprocs=args.nprocs)
        runs = {"bare": [], "harness": [], "bare2": []}
        measure = {"bare": lambda x=x: _bare(x, args.iters, args.warmup, device),
                   "harness": lambda opts=opts: run_sweep(opts, rank, args.nprocs, device)[0]["time_us"]}
        measure["bare2"] = measure["bare"]  # a second bare series: the A/A ratio shows the machine's noise
        measure["bare"](), measure["harness"]()  # untimed first pass
        order = list(runs)
        for rep in range(args.reps):  # interleaved in rotating order, so load changes hit all series alike
            for name in order[rep % 3:] + order[:rep % 3]:
                runs[name].append(measure[name]())
        results.append((size, *(min(runs[k]) for k in ("bare", "harness", "bare2")),
                        statistics.median(runs["bare"]), statistics.median(runs["harness"])))
    dist.destroy_process_group()
    if rank == 0:
        queue.put(results)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--sizes", default="256K,1M,4M", help="comma-separated sizes (K/M/G)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20, help="interleaved repetitions per size")
    args = ap.parse_args(argv)
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_rank, args=(args, port, queue), nprocs=args.nprocs, start_method="spawn")
    results = queue.get()
    print(f"# harness overhead: all_reduce, {args.backend}, {args.nprocs} ranks, {args.iters} iters, "
          f"{args.reps} interleaved runs (time per call in us, averaged over ranks)")
    print(f"{'size (B)':>12}  {'bare min':>9}  {'harness min':>11}  {'ratio':>6}  {'A/A ratio':>9}  "
          f"{'bare median':>11}  {'harness median':>14}")
    ratios, noise = [], []
    for size, bare, harness, bare2, bare_med, harness_med in results:
        ratios.append(harness / bare)
        noise.append(bare2 / bare)
        print(f"{size:12d}  {bare:9.1f}  {harness:11.1f}  {harness / bare:6.3f}  {bare2 / bare:9.3f}  "
              f"{bare_med:11.1f}  {harness_med:14.1f}")
    overall = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    floor = math.exp(sum(abs(math.log(r)) for r in noise) / len(noise)) - 1
    noisy = floor >= LIMIT - 1  # two identical loops differ by as much as the limit: the verdict means little
    verdict = "OK" if overall <= LIMIT else ("INCONCLUSIVE (machine too noisy: rerun when idle or with more --reps)"
                                             if noisy else "TOO SLOW")
    print(f"overall ratio (geometric mean): {overall:.3f}  (limit {LIMIT:.2f}: {verdict}); "
          f"noise floor from the A/A ratios: {100 * floor:.1f}%")
    return 0 if overall <= LIMIT else (2 if noisy else 1)


if __name__ == "__main__":
    sys.exit(main())
