"""The textbook algorithms (Thakur, Rabenseifner & Gropp 2005): ``recursive_hd``, ``direct``, ``binomial``.

``recursive_hd`` (Rabenseifner): reduce_scatter by recursive halving, all_gather by recursive doubling,
all_reduce = both. With p = 2^k ranks, step i pairs rank v with v XOR 2^(k-1-i) (halving: exchange
the half of the current chunk set that the partner's side will own, summing it) and doubling mirrors
that. Other world sizes fold first: with p' the largest power of two <= n, rank p'+i hands its data to
rank i (one extra step), the p' ranks run the power-of-two schedule (rank i also standing for p'+i),
and rank i hands the result back (one more step). Steps: all_reduce ``2 log2 p'`` (+2 if n != p'),
reduce_scatter and all_gather ``log2 p'`` (+2). all_reduce cuts the buffer into p' chunks; the sharded
collectives keep n shards, assigned to the virtual rank ``s mod p'`` that stands for their owner.

``direct``: every rank sends straight to every other rank in one step (all_to_all, all_gather);
contention is whatever the topology makes of n(n-1) simultaneous transfers.

``binomial``: broadcast / reduce over a binomial tree rooted at ``root``: in step i the ranks that
have the data (relative rank q < 2^i) send it to q + 2^i; reduce runs the same tree backwards.
``ceil(log2 n)`` steps, every step moving the whole buffer.

>>> from sim.algorithms import build_program
>>> [build_program("recursive_hd", "all_reduce", n).steps for n in (8, 6)]
[6, 6]
"""
from __future__ import annotations

import numpy as np

from sim.program import Program

from .registry import algorithm
from .tree import tile


def _log2(p: int) -> int:
    return p.bit_length() - 1


def _halving(p2: int, owner_of: np.ndarray, step0: int):
    """Recursive halving among virtual ranks 0..p2-1 over chunks whose final owner is ``owner_of``.

    At step i rank v sends to partner v ^ bit (bit = p2 >> (i+1)) every chunk it still holds whose
    owner is on the partner's side of that bit (same higher bits as v), and sums what it receives."""
    ops = []
    for i in range(_log2(p2)):
        bit = p2 >> (i + 1)
        for v in range(p2):
            w = v ^ bit
            mine = owner_of >> _log2(bit) + 1 == v >> _log2(bit) + 1       # chunks still held (same higher bits)
            send = np.flatnonzero(mine & ((owner_of & bit) == (w & bit)))
            ops += [(v, w, int(c), step0 + i, True) for c in send]
    return ops


def _doubling(p2: int, owner_of: np.ndarray, step0: int):
    """Recursive doubling: the mirror of :func:`_halving`, copying instead of summing."""
    ops = []
    k = _log2(p2)
    for i in range(k):
        bit = 1 << i
        for v in range(p2):
            held = np.flatnonzero(owner_of >> i == v >> i)   # chunks of v's current group of 2^i ranks
            ops += [(v, v ^ bit, int(c), step0 + i, False) for c in held]
    return ops


@algorithm("recursive_hd", ("all_reduce", "reduce_scatter", "all_gather"),
           "Rabenseifner: recursive halving reduce-scatter + doubling all-gather; 2 log2 n steps")
def build_recursive_hd(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    p2 = 1 << _log2(n)
    extra = n - p2              # ranks p2..n-1 fold onto 0..extra-1
    fold = 1 if extra else 0
    ops = []
    if coll.name == "all_reduce":
        nbase = p2
        owner = np.arange(p2)
        chunks = np.arange(p2)
        ops += [(p2 + i, i, int(c), 0, True) for i in range(extra) for c in chunks]
        ops += _halving(p2, owner, fold)
        ops += _doubling(p2, owner, fold + _log2(p2))
        ops += [(i, p2 + i, int(c), fold + 2 * _log2(p2), False) for i in range(extra) for c in chunks]
        steps = 2 * _log2(p2) + 2 * fold
    else:
        nbase = n
        owner = np.arange(n) % p2  # shard s is held at the end by virtual rank s mod p2
        if coll.name == "reduce_scatter":
            ops += [(p2 + i, i, c, 0, True) for i in range(extra) for c in range(n)]
            ops += _halving(p2, owner, fold)
            ops += [(i, p2 + i, p2 + i, fold + _log2(p2), False) for i in range(extra)]
        else:  # all_gather
            ops += [(p2 + i, i, p2 + i, 0, False) for i in range(extra)]
            ops += _doubling(p2, owner, fold)
            ops += [(i, p2 + i, c, fold + _log2(p2), False) for i in range(extra) for c in range(n) if c != p2 + i]
        steps = _log2(p2) + 2 * fold
    (src, dst, chunk, step, red), channel, nchunks = tile([np.array(c) for c in zip(*ops)], nbase, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm="recursive_hd",
                            steps=steps, params={"nchannels": nchannels, "pipeline": pipeline, "p2": p2})


@algorithm("direct", ("all_to_all", "all_gather"), "everyone sends to everyone at once; 1 step")
def build_direct(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    a, b = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    a, b = a[a != b], b[a != b]
    if coll.name == "all_to_all":
        chunk, nbase = a * n + b, n * n   # block (a -> b)
    else:
        chunk, nbase = a, n               # a's shard
    cols = [a, b, chunk, np.zeros(len(a), np.int64), np.zeros(len(a), bool)]
    (src, dst, chunk, step, red), channel, nchunks = tile(cols, nbase, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm="direct",
                            steps=1, params={"nchannels": nchannels, "pipeline": pipeline})


@algorithm("binomial", ("broadcast", "reduce"), "binomial tree from/to the root; ceil(log2 n) steps of the whole buffer")
def build_binomial(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    k = (n - 1).bit_length()      # ceil(log2 n)
    ops = []
    for i in range(k):
        for q in range(min(1 << i, n - (1 << i))):   # q < 2^i sends to q + 2^i
            s, d = (q + root) % n, (q + (1 << i) + root) % n
            # broadcast: step i forward; reduce: the same edge backwards, deepest level first
            ops.append((s, d, 0, i, False) if coll.name == "broadcast" else (d, s, 0, k - 1 - i, True))
    (src, dst, chunk, step, red), channel, nchunks = tile([np.array(c) for c in zip(*ops)], 1, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm="binomial",
                            steps=k, root=root, params={"nchannels": nchannels, "pipeline": pipeline})
