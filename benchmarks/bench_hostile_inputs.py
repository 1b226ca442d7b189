"""Does reading a hostile NCCL debug log grow linearly with its size?

A log whose first line is one long run of host-name characters (``[\\w.-]``) once made the record
search retry the host name from every position: 10 KB took 1.6 s, 40 KB 15.6 s, 80 KB over a minute
(quadratic). This reads such lines of growing length, and a long line of '#' device-line look-alikes,
and prints each time as a ratio to the shortest: linear reading keeps the ratio near the length ratio.
Then a gzip bomb read as a profiler trace and as a flight dump: its peak memory as a ratio to the reader's alone.

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
    gzip_bomb()
    return 0


def gzip_bomb() -> None:
    """A 1 MB gzip of 1 GiB of spaces, read as a profiler trace in a child process: its peak memory against a
    child that only imports the reader. Refusing it once held the 512 MiB the limit allows (1.1 GB peak);
    counting its expanded size in pieces first holds one piece."""
    import gzip
    import subprocess
    with tempfile.NamedTemporaryFile(suffix=".json.gz", delete=False) as f:
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9) as z:
            piece = b" " * (16 << 20)
            for _ in range(64):
                z.write(piece)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    size_mb = os.path.getsize(f.name) / 1e6
    readers = {"profiler trace": ("from sim.evidence.kineto import load_trace as read", "CollsimError"),
               "flight dump": ("from sim.flight.loader import read_raw as read", "Exception")}
    try:
        for what, (imp, caught) in readers.items():
            code = (f"import resource, sys; {imp}; from sim.errors import CollsimError\n"
                    f"try:\n    read(sys.argv[1]) if sys.argv[1] != '-' else None\nexcept {caught}:\n    pass\n"
                    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
            peaks = [int(subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, cwd=root,
                                        check=True).stdout) for arg in ("-", f.name)]
            print(f"gzip bomb read as a {what} ({size_mb:.1f} MB of gzip, 1 GiB expanded): peak {peaks[1] / 1024:.0f} "
                  f"MiB against {peaks[0] / 1024:.0f} MiB for the reader alone ({peaks[1] / peaks[0]:.2f}x)")
    finally:
        os.unlink(f.name)


if __name__ == "__main__":
    raise SystemExit(main())
