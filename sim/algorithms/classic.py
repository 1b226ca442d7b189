"""The textbook algorithms (Thakur, Rabenseifner & Gropp 2005): ``recursive_hd``, ``direct``, ``binomial``.

``recursive_hd`` (Rabenseifner): reduce_scatter by recursive halving, all_gather by recursive doubling,
all_reduce = both. With p = 2^k ranks, step i pairs rank v with v XOR 2^(k-1-i) (halving: exchange
the half of the current chunk set that the partner's side will own, summing it) and doubling mirrors
that. Other world sizes fold first: with p' the largest power of two <= n, rank p'+i hands its data to
rank i (one extra step), the p' ranks run the power-of-two schedule (rank i also standing for p'+i),
and rank i hands the result back (one more step). Steps: all_reduce ``2 log2 p'`` (+2 if n != p'),
reduce_scatter and all_gather ``log2 p'`` (+2). all_reduce cuts the buffer into p' chunks; the sharded
collectives keep n shards, assigned to the virtual rank ``s mod p'`` that stands for their owner.

Recursive halving on 8 ranks (partners at distance 4, then 2, then 1; doubling runs it backwards)::

    step 0: 0-4 1-5 2-6 3-7      each sends the half its partner's side will own
    step 1: 0-2 1-3 4-6 5-7      a quarter
    step 2: 0-1 2-3 4-5 6-7      an eighth: rank v now owns chunk v, summed

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

from ..chunk_program import ChunkProgram
from . import algorithm


def _log2(p: int) -> int:
    return p.bit_length() - 1


def _blocks(owner: np.ndarray, shift: int, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index into ``group``, chunk) of every chunk whose owner's high bits ``owner >> shift`` equal
    ``group[j]``, for each j in turn, chunks in ascending order: the sends of one step, generated
    directly (memory of the sends made, not of every (rank, chunk) pair: 16,384 ranks held 2^28)."""
    key = owner >> shift
    order = np.argsort(key, kind="stable")                 # chunks grouped by key, ascending inside
    start = np.searchsorted(key[order], np.arange(int(key.max(initial=0)) + 2))
    lo = start[group]
    count = start[group + 1] - lo
    j = np.repeat(np.arange(len(group), dtype=np.int64), count)
    offset = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    return j, order[np.repeat(lo, count) + offset]


def halving(p: ChunkProgram, p2: int, owner: np.ndarray, step0: int) -> None:
    """Recursive halving among ranks 0..p2-1 over chunks whose final owner is ``owner[c]``: at step i
    rank v sends to v XOR bit (bit = p2/2, p2/4, ...) every chunk it still holds whose owner is on the
    partner's side of the bit (owner >> log2(bit) == (v >> log2(bit)) XOR 1), and the partner sums it."""
    ranks = np.arange(p2, dtype=np.int64)
    for i in range(_log2(p2)):
        bit = p2 >> (i + 1)
        v, c = _blocks(owner, _log2(bit), (ranks >> _log2(bit)) ^ 1)
        p.send(v, v ^ bit, chunk=c, step=step0 + i, reduce=True)


def doubling(p: ChunkProgram, p2: int, owner: np.ndarray, step0: int) -> None:
    """Recursive doubling, the mirror of :func:`halving`: at step i rank v copies every chunk of its
    group of 2^i ranks (owner >> i == v >> i) to v XOR 2^i."""
    ranks = np.arange(p2, dtype=np.int64)
    for i in range(_log2(p2)):
        v, c = _blocks(owner, i, ranks >> i)
        p.send(v, v ^ (1 << i), chunk=c, step=step0 + i)


@algorithm("recursive_hd", ("all_reduce", "reduce_scatter", "all_gather"),
           "Rabenseifner: recursive halving reduce-scatter + doubling all-gather; 2 log2 n steps")
def build_recursive_hd(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    p2 = 1 << _log2(n)
    extra = n - p2              # ranks p2..n-1 fold onto 0..extra-1
    fold, k = (1 if extra else 0), _log2(p2)
    if coll.name == "all_reduce":          # p2 chunks; rank p2+i's data is summed into rank i first
        p = ChunkProgram(coll, n, p2)
        i, c = p.grid(extra, p2)
        p.send(p2 + i, i, chunk=c, step=0, reduce=True)
        halving(p, p2, np.arange(p2), fold)
        doubling(p, p2, np.arange(p2), fold + k)
        p.send(i, p2 + i, chunk=c, step=fold + 2 * k)
        steps = 2 * k + 2 * fold
    else:                                  # n shards; shard s ends at virtual rank s mod p2
        p = ChunkProgram(coll, n, n)
        owner = np.arange(n) % p2
        i, c = p.grid(extra, n)
        if coll.name == "reduce_scatter":
            p.send(p2 + i, i, chunk=c, step=0, reduce=True)
            halving(p, p2, owner, fold)
            p.send(np.arange(extra), p2 + np.arange(extra), chunk=p2 + np.arange(extra), step=fold + k)
        else:  # all_gather
            p.send(p2 + np.arange(extra), np.arange(extra), chunk=p2 + np.arange(extra), step=0)
            doubling(p, p2, owner, fold)
            p.send(i, p2 + i, chunk=c, step=fold + k, where=c != p2 + i)
        steps = k + 2 * fold
    return p.program("recursive_hd", steps=steps, nchannels=nchannels, pipeline=pipeline, p2=p2)


@algorithm("direct", ("all_to_all", "all_gather"), "everyone sends to everyone at once; 1 step")
def build_direct(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    p = ChunkProgram(coll, n, n * n if coll.name == "all_to_all" else n)
    a, b = p.grid(n, n)
    # all_to_all: block (a -> b) is chunk a*n + b; all_gather: a's shard
    p.send(a, b, chunk=a * n + b if coll.name == "all_to_all" else a, step=0, where=a != b)
    return p.program("direct", steps=1, nchannels=nchannels, pipeline=pipeline)


@algorithm("binomial", ("broadcast", "reduce"), "binomial tree from/to the root; ceil(log2 n) steps of the whole buffer")
def build_binomial(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    p = ChunkProgram(coll, n, 1, root=root)    # ranks count from the root
    k = (n - 1).bit_length()                   # ceil(log2 n)
    for i in range(k):
        q = np.arange(min(1 << i, n - (1 << i)))   # the ranks that have the data send it 2^i further
        if coll.name == "broadcast":
            p.send(q, q + (1 << i), chunk=0, step=i)
        else:  # reduce: the same edges backwards, deepest level first
            p.send(q + (1 << i), q, chunk=0, step=k - 1 - i, reduce=True)
    return p.program("binomial", steps=k, nchannels=nchannels, pipeline=pipeline)
