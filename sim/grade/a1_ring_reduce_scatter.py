"""Assignment a1: write ring reduce-scatter as a Program.

The student defines ``ring_reduce_scatter(nranks) -> sim.Program``: a reduce_scatter in which rank r
ends with shard r of the sum, moving data only between ring neighbours, in n-1 steps, each rank
sending (n-1)/n of the buffer (the bandwidth optimum). The notebook has the student write it in the
chunk-program language (:mod:`sim.chunk_program`, one ``p.send`` in the step loop); any Program is graded
the same. The checks, in order:

1. the function exists;  2. it returns a reduce_scatter Program for n = 2..8;
3. ``sim.verify`` proves it for n = 2..8 and 16 (its message names the rank and chunk that are wrong);
4. every transfer goes to a ring neighbour;  5. n-1 rounds, and ``steps=n-1`` declared;
6. every rank sends exactly (n-1)/n of the buffer;
7. on ``ring:n=8`` (100 GB/s, 1 us) at 64 MiB the engine's time is within 1% of the ring's
   (n-1)(alpha + S/(nB)).

>>> TITLE
'ring reduce-scatter as a Program'
"""
from __future__ import annotations

import numpy as np

from .checks import Fail, close, need, program_from, run_checks

TITLE = "ring reduce-scatter as a Program"
NOTEBOOK = "a1_ring_reduce_scatter.ipynb"
FUNCTION = "ring_reduce_scatter"
SIZES = tuple(range(2, 9))
PERF_N, PERF_NBYTES, PERF_BW, PERF_LAT = 8, 64 << 20, 100.0, 1.0


def _program(ns, n):
    return program_from(ns, FUNCTION, (n,), "reduce_scatter", n, own=("ring",))   # not the library's ring


def defines(ns):
    need(ns, FUNCTION)
    return f"found `{FUNCTION}`"


def returns_program(ns):
    for n in SIZES:
        _program(ns, n)
    return f"reduce_scatter Programs for n = {SIZES[0]}..{SIZES[-1]}"


def correct(ns):
    import sim
    for n in (4, 8, 2, 3, 5, 6, 7, 16):   # a mid-size ring first: its message is the most telling
        p = _program(ns, n)
        try:
            sim.verify(p)
        except sim.VerificationError as e:
            hint = "" if p.reduce.any() else (" (none of your ops reduces: a reduce-scatter sums, so its ops "
                                               "need reduce=True)")
            raise Fail(f"n={n}: {e}{hint}", expected="rank r ends with chunk r summed over all ranks", got=str(e)[:200]) from None
    return f"sim.verify proves it for n = {SIZES[0]}..{SIZES[-1]} and 16"


def neighbours(ns):
    for n in (3, 5, 8):
        p = _program(ns, n)
        hop = (p.dst.astype(int) - p.src.astype(int)) % n
        bad = np.flatnonzero((hop != 1) & (hop != n - 1))
        if bad.size:
            i = int(bad[0])
            raise Fail(f"n={n}: at step {int(p.step[i])} rank {int(p.src[i])} sends chunk {int(p.chunk[i])} to rank "
                       f"{int(p.dst[i])}, which is not its ring neighbour ({(int(p.src[i]) + 1) % n} or {(int(p.src[i]) - 1) % n}); "
                       "on a ring, that transfer would have to cross other GPUs",
                       expected="sends to rank r+1 or r-1 only", got=f"rank {int(p.src[i])} -> rank {int(p.dst[i])}")
    return "every transfer goes to a ring neighbour"


def steps(ns):
    for n in (4, 8):
        p = _program(ns, n)
        if p.nrounds != n - 1:
            raise Fail(f"n={n}: your program has {p.nrounds} rounds (steps 0..{p.nrounds - 1}); a ring reduce-scatter needs "
                       f"n-1 = {n - 1}: in every round every rank sends one chunk to its neighbour at once",
                       expected=f"{n - 1} rounds", got=f"{p.nrounds} rounds")
        busy = {(int(s), int(r)) for s, r in zip(p.step, p.src)}
        idle = [(s, r) for s in range(n - 1) for r in range(n) if (s, r) not in busy]
        if idle:
            s, r = idle[0]
            raise Fail(f"n={n}: rank {r} sends nothing in step {s}: every rank should send in every step",
                       expected="every rank sends in every step", got=f"rank {r} idle in step {s}")
        if p.steps != n - 1:
            raise Fail(f"n={n}: the ops take {n - 1} rounds (good) but the Program declares steps={p.steps}; pass steps=nranks-1",
                       expected=f"steps={n - 1}", got=f"steps={p.steps}")
    return "n-1 rounds, every rank sending in each"


def traffic(ns):
    for n in (4, 8):
        p = _program(ns, n)
        sent = np.bincount(p.src, minlength=n)[:n]
        want = (n - 1) * p.nchunks / n   # (n-1)/n of the buffer, in chunks
        for r in range(n):
            if sent[r] != want:
                frac = sent[r] / p.nchunks
                raise Fail(f"n={n}: rank {r} sends {sent[r]} chunks = {frac:.3g} of its buffer; the ring optimum is "
                           f"(n-1)/n = {(n - 1) / n:.3g} ({want:g} chunks of {p.nchunks})",
                           expected=f"{want:g} chunks", got=f"{sent[r]} chunks")
    return "each rank sends (n-1)/n of the buffer"


def performance(ns):
    from sim.algorithms.analytic import ring_time_us
    from sim.engine import simulate_program
    from sim.presets import load_topology
    n = PERF_N
    p = _program(ns, n)
    topo = load_topology(f"ring:n={n},bandwidth_GBps={PERF_BW},latency_us={PERF_LAT}")
    t = simulate_program(p, topo, PERF_NBYTES).time_us
    bound = ring_time_us("reduce_scatter", n, PERF_NBYTES, PERF_BW, PERF_LAT)
    if not (t <= bound * 1.01):
        raise Fail(f"on {topo.name} (100 GB/s, 1 us links) at 64 MiB your program takes {t:.1f} us; the ring takes "
                   f"(n-1)(alpha + S/(nB)) = {bound:.1f} us. Look at which transfers wait for each other "
                   "(sim.viz.plot_link_timeline shows it)", expected=f"<= {bound * 1.01:.1f} us", got=f"{t:.1f} us")
    if not close(t, bound, 0.01):
        return f"{t:.1f} us at 64 MiB, faster than the ring's {bound:.1f} us"
    return f"{t:.1f} us at 64 MiB on 8 ranks = the ring bound {bound:.1f} us"


def check(ns: dict):
    """All checks on the student's namespace, in order (later ones skip if their basis failed)."""
    return run_checks(ns, [
        ("defines ring_reduce_scatter", defines, [], 0),
        ("returns a reduce_scatter Program", returns_program, ["defines ring_reduce_scatter"]),
        ("correct (sim.verify)", correct, ["returns a reduce_scatter Program"]),
        ("only ring neighbours", neighbours, ["returns a reduce_scatter Program"]),
        ("n-1 steps", steps, ["returns a reduce_scatter Program"]),
        ("bandwidth-optimal traffic", traffic, ["returns a reduce_scatter Program"]),
        ("time = ring bound", performance, ["correct (sim.verify)"]),
    ])


__all__ = ["check", "TITLE", "NOTEBOOK"]
