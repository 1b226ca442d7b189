"""Closed-form costs: the alpha-beta model of the ring algorithms, and the classic textbook formulas.

Notation: n ranks, S bytes (nccl-tests' size), alpha = per-hop latency (us), B = link bandwidth
(GB/s), P = pieces each rank's share is pipelined into (channels x pipeline), b = bytes of one piece.

Ring (all_reduce 2(n-1) steps, all_gather/reduce_scatter n-1, each piece b = S/(nP)):

    T = max( steps * (alpha + b/B) + (P-1) * b/B ,   steps * P * b/B + alpha )

The first term is the latency-bound pipeline (a piece crosses every step, the others follow one piece
apart); the second is the bandwidth bound (every link carries steps*P pieces back to back, plus the
last hop's latency). With P = 1 both reduce to the textbook ``steps * (alpha + S/(nB))``. The chain
broadcast/reduce (b = S/P) is ``(n-1) * (alpha + b/B) + (P-1) * b/B``. These are exact for the
engine on a uniform ring, mesh or single switch (tests check it for n = 2..16 and 1 KB..1 GB). The
all_to_all form is exact for n <= 3 and an upper bound beyond (the engine overlaps later hops).

>>> round(ring_time_us("all_reduce", 8, 1 << 30, 100.0, 1.0), 2)   # 14 * (1 + 2^30/8/1e5)
18804.48
"""
from __future__ import annotations

import math

from ..collectives import Collective, get_collective
from ..errors import CollsimError


def ring_steps(collective: str | Collective, nranks: int) -> int:
    """Communication steps of the ring algorithms (NCCL's ``nsteps`` for Ring)."""
    return get_collective(collective).ring_steps(nranks)


def ring_time_us(collective: str | Collective, nranks: int, nbytes: float, bandwidth_GBps: float, latency_us: float,
                 pieces: int = 1) -> float:
    """Time of collsim's ring algorithm on a uniform ring (alpha-beta, exact for the engine)."""
    coll = get_collective(collective)
    n, B = nranks, bandwidth_GBps * 1e3  # bytes per microsecond
    if n < 2 or pieces < 1 or B <= 0 or latency_us < 0:
        raise CollsimError("ring_time_us needs nranks >= 2, pieces >= 1, bandwidth > 0 and latency >= 0")
    steps = ring_steps(coll.name, n)
    if coll.rooted:
        b = nbytes / pieces
        return steps * (latency_us + b / B) + (pieces - 1) * b / B
    if coll.pairwise:
        # block d hops (d = 1..n-1); link r->r+1 carries sum_{h}(n-h) blocks of S/n: (n-1)/2 * S in all
        if pieces != 1:
            raise CollsimError("the all_to_all ring closed form is for pieces=1")
        return _a2a_ring(n, nbytes, B, latency_us)
    b = nbytes / (n * pieces)
    return max(steps * (latency_us + b / B) + (pieces - 1) * b / B, steps * pieces * b / B + latency_us)


def _a2a_ring(n: int, nbytes: float, B: float, alpha: float) -> float:
    # Block (a->b) leaves a at step 0 and hops one rank per step; link r->r+1 sends, in FIFO order, the
    # blocks that reach it. Upper bound when each step waits for the previous: the engine overlaps more.
    return (n - 1) * alpha + (n - 1) / 2 * nbytes / B


def busbw_GBps(collective: str | Collective, nranks: int, nbytes: float, time_us: float) -> float:
    """nccl-tests' bus bandwidth: algbw x the collective's bus factor."""
    return algbw_GBps(nbytes, time_us) * get_collective(collective).bus_factor(nranks)


def algbw_GBps(nbytes: float, time_us: float) -> float:
    """nccl-tests' algorithm bandwidth S / t in decimal GB/s."""
    return nbytes / (time_us * 1e3) if time_us > 0 else 0.0


# ---- textbook alpha-beta formulas (Thakur, Rabenseifner, Gropp 2005; see docs/nccl-model.md) --------
def alpha_beta_time_us(collective: str | Collective, algorithm: str, nranks: int, nbytes: float, bandwidth_GBps: float,
                       latency_us: float) -> float:
    """Classic cost of ``algorithm`` for ``collective`` (no contention, no pipelining, no reduction cost).

    ``nbytes`` is nccl-tests' size (the total buffer for all_gather/reduce_scatter). Algorithms: ring,
    tree (double binary tree, pipelined: ~2 log2(n) alpha + S/B), recursive_hd (Rabenseifner),
    binomial, direct, collnet/nvls (in-network: 2 alpha + S/B).
    """
    coll = get_collective(collective)
    p, a, beta = nranks, latency_us, 1.0 / (bandwidth_GBps * 1e3)
    lg = math.ceil(math.log2(p))
    n = nbytes
    frac = (p - 1) / p
    if algorithm in ("ring", "hierarchical_ring"):
        if coll.pairwise:
            return (p - 1) * a + (p - 1) / 2 * n * beta
        return ring_time_us(coll, p, n, bandwidth_GBps, latency_us)
    if algorithm == "tree":
        if coll.passes == 2:
            return 2 * lg * a + n * beta      # two pipelined trees, each half the data, up and down
        return lg * a + n * beta
    if algorithm in ("recursive_hd", "rabenseifner"):
        if coll.passes == 2:
            return 2 * lg * a + 2 * frac * n * beta
        return lg * a + frac * n * beta
    if algorithm in ("binomial",):
        return lg * (a + n * beta)
    if algorithm == "direct":
        return a + frac * n * beta
    if algorithm.startswith(("collnet", "nvls")):
        return 2 * a + n * beta
    raise CollsimError(f"no alpha-beta formula for algorithm {algorithm!r}")
