"""Does reading a hostile NCCL debug log grow linearly with its size?

A log whose first line is one long run of host-name characters (``[\\w.-]``) once made the record
search retry the host name from every position: 10 KB took 1.6 s, 40 KB 15.6 s, 80 KB over a minute
(quadratic). This reads such lines of growing length, and a long line of '#' device-line look-alikes,
and prints each time as a ratio to the shortest: linear reading keeps the ratio near the length ratio.

    python benchmarks/bench_hostile_inputs.py            # about 10 s
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sim.errors import CollsimError  # noqa: E402
from sim.evidence.nccl_log import read_log  # noqa: E402

LENGTHS = (10_000, 40_000, 160_000, 640_000)
SHAPES = {
    "one run of name characters": lambda n: "NCCL INFO " + "x" * n + "\n",
    "device-line look-alikes": lambda n: "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2\n"
                                         + "#  Rank 1 x" * (n // 11) + "\n",
}


def seconds(text: str) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(text)
    try:
        t0 = time.perf_counter()
        try:
            read_log(f.name)
        except CollsimError:
            pass
        return time.perf_counter() - t0
    finally:
        os.unlink(f.name)


def main() -> int:
    print(f"{'input':28s} " + " ".join(f"{n // 1000:>7d}K" for n in LENGTHS) + "   (time / time at the shortest; linear: "
          + " ".join(f"{n / LENGTHS[0]:g}" for n in LENGTHS) + ")")
    worst = 0.0
    for name, make in SHAPES.items():
        times = [seconds(make(n)) for n in LENGTHS]
        base = max(times[0], 1e-4)
        ratios = [t / base for t in times]
        worst = max(worst, ratios[-1] / (LENGTHS[-1] / LENGTHS[0]))
        print(f"{name:28s} " + " ".join(f"{r:8.1f}" for r in ratios) + f"   ({times[-1]:.2f} s at the longest)")
    print(f"growth beyond linear at {LENGTHS[-1] // LENGTHS[0]}x the length: {worst:.1f}x (quadratic reading would be "
          f"{LENGTHS[-1] // LENGTHS[0]}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
