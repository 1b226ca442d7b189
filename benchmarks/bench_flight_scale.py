"""Does the flight simulator's time grow linearly with the world size?

``collsim flight simulate`` once rescanned every rank after every simulation step: 1,024 ranks took 4.3 s,
4,096 ranks 58 s and 0.9 GB, 16,384 never finished (a tester's trial, thirty-second pass). This times one
DDP step (2 buckets of 1 MiB) at growing world sizes in one run and prints each time as a ratio to the
smallest: linear work keeps the ratio near the world-size ratio (the event heap adds a log factor), the
old per-step scan grew with its square.

    python benchmarks/bench_flight_scale.py          # about 10 s on 2 cores
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sim.flight import replay  # noqa: E402
from sim.flight.rank_workload import ddp_step  # noqa: E402

WORLDS = (256, 1024, 4096, 16384)


def seconds(world: int) -> float:
    """The best of two runs of one DDP step on ``world`` ranks."""
    w = ddp_step(world_size=world, buckets=2, bucket_nbytes="1M", steps=1)
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        replay.run(w)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    times = [seconds(n) for n in WORLDS]
    print(f"{'ranks':>8s} {'seconds':>8s} {'ratio':>7s} {'linear':>7s} {'quadratic':>9s}")
    for n, t in zip(WORLDS, times):
        k = n / WORLDS[0]
        print(f"{n:>8d} {t:>8.2f} {t / times[0]:>7.1f} {k:>7.0f} {k * k:>9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
