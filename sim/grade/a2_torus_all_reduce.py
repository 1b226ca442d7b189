"""Assignment a2: an all-reduce for a 2D torus that beats a plain ring.

The student defines ``torus_all_reduce(rows, cols) -> sim.Program`` for ``rows * cols`` ranks
(rank ``i * cols + j`` sits at row i, column j of :func:`sim.grade.torus.torus2d`), in the notebook written in
the chunk-program language (:mod:`sim.chunk_program`). The checks:

1. the function exists;  2. it returns an all_reduce Program with rows*cols ranks;
3. ``sim.verify`` proves it on 2x2, 2x3, 3x3, 3x4, 4x3 and 4x4;
4. every transfer crosses one torus link (neighbours only) on 3x4 and 4x4;
5. large messages: at 256 MiB on the 4x4 torus (100 GB/s, 1 us links) it takes at most 0.6x the time
   of an ideal ring on the same links, 2(n-1)(alpha + S/(nB)): a ring uses one of the four links out of
   each GPU; an algorithm that keeps more of them busy at once wins;
6. small messages: at 1 KiB it takes at most 0.6x the ideal ring (a 2D algorithm crosses
   2(rows-1) + 2(cols-1) links in sequence, the ring 2(n-1)).

>>> TITLE
'an all-reduce for a 2D torus that beats a ring'
"""
from __future__ import annotations

from .checks import Fail, need, program_from, run_checks

TITLE = "an all-reduce for a 2D torus that beats a ring"
NOTEBOOK = "a2_torus_all_reduce.ipynb"
FUNCTION = "torus_all_reduce"
SHAPES = ((2, 2), (2, 3), (3, 3), (3, 4), (4, 3), (4, 4))
PERF_SHAPE, BW, LAT = (4, 4), 100.0, 1.0
LARGE, SMALL, RATIO = 256 << 20, 1 << 10, 0.6


def _program(ns, rows, cols):
    return program_from(ns, FUNCTION, (rows, cols), "all_reduce", rows * cols, f": a {rows}x{cols} torus has {rows * cols}")


def defines(ns):
    need(ns, FUNCTION)
    return f"found `{FUNCTION}`"


def returns_program(ns):
    for r, c in SHAPES:
        _program(ns, r, c)
    return "all_reduce Programs for " + ", ".join(f"{r}x{c}" for r, c in SHAPES)


def correct(ns):
    import sim
    for r, c in SHAPES:
        try:
            sim.verify(_program(ns, r, c))
        except sim.VerificationError as e:
            raise Fail(f"{r}x{c} torus: {e}", expected="every rank ends with the sum of every chunk", got=str(e)[:200]) from None
    return "sim.verify proves it on " + ", ".join(f"{r}x{c}" for r, c in SHAPES)


def neighbours(ns):
    from .torus import torus_neighbours
    for rows, cols in ((3, 4), (4, 4)):
        p = _program(ns, rows, cols)
        n = rows * cols
        for i in range(p.nops):
            s, d = int(p.src[i]), int(p.dst[i])
            if s >= n or d >= n:
                raise Fail(f"{rows}x{cols}: op {i} involves agent {max(s, d)}, but a torus has no reducing switch; use ranks 0..{n - 1}",
                           expected=f"ranks 0..{n - 1}", got=f"agent {max(s, d)}")
            if d not in torus_neighbours(rows, cols, s):
                raise Fail(f"{rows}x{cols}: at step {int(p.step[i])} rank {s} at (row {s // cols}, col {s % cols}) sends "
                           f"chunk {int(p.chunk[i])} to rank {d} at (row {d // cols}, col {d % cols}), which is not a torus "
                           "neighbour: that transfer crosses other GPUs' links. Send only to (i, j±1) and (i±1, j), wrapping around",
                           expected="a torus neighbour", got=f"rank {s} -> rank {d}")
    return "every transfer crosses one torus link"


def _times(ns, nbytes):
    from sim.algorithms.analytic import ring_time_us
    from sim.engine import simulate_program

    from .torus import torus2d
    rows, cols = PERF_SHAPE
    p = _program(ns, rows, cols)
    t = simulate_program(p, torus2d(rows, cols, BW, LAT), nbytes).time_us
    return t, ring_time_us("all_reduce", rows * cols, nbytes, BW, LAT)


def large(ns):
    t, ring = _times(ns, LARGE)
    if not t <= RATIO * ring:
        raise Fail(f"at 256 MiB on the 4x4 torus your all-reduce takes {t:.0f} us = {t / ring:.2f}x an ideal ring "
                   f"({ring:.0f} us); to pass it must take at most {RATIO}x. A ring keeps one of the four links out of "
                   "each GPU busy: cut the data into parts that travel different dimensions and directions at the same time",
                   expected=f"<= {RATIO * ring:.0f} us", got=f"{t:.0f} us")
    return f"{t:.0f} us at 256 MiB = {t / ring:.2f}x the ideal ring ({ring:.0f} us)"


def small(ns):
    t, ring = _times(ns, SMALL)
    rows, cols = PERF_SHAPE
    if not t <= RATIO * ring:
        raise Fail(f"at 1 KiB your all-reduce takes {t:.1f} us = {t / ring:.2f}x an ideal ring ({ring:.1f} us); a 2D "
                   f"algorithm needs only 2(rows-1) + 2(cols-1) = {2 * (rows - 1) + 2 * (cols - 1)} hops in sequence, "
                   f"the ring 2(n-1) = {2 * (rows * cols - 1)}: check that your phases do not wait for more than that",
                   expected=f"<= {RATIO * ring:.1f} us", got=f"{t:.1f} us")
    return f"{t:.1f} us at 1 KiB = {t / ring:.2f}x the ideal ring ({ring:.1f} us)"


def check(ns: dict):
    return run_checks(ns, [
        ("defines torus_all_reduce", defines, [], 0),
        ("returns an all_reduce Program", returns_program, ["defines torus_all_reduce"]),
        ("correct (sim.verify)", correct, ["returns an all_reduce Program"]),
        ("only torus neighbours", neighbours, ["returns an all_reduce Program"]),
        ("beats the ring at 256 MiB", large, ["correct (sim.verify)", "only torus neighbours"]),
        ("beats the ring at 1 KiB", small, ["correct (sim.verify)", "only torus neighbours"]),
    ])


__all__ = ["check", "TITLE", "NOTEBOOK"]
