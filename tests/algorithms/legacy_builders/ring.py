"""Ring algorithms for all six collectives (NCCL's default at large sizes).

Ranks form a ring in rank order (r sends to r+1). With ``nchannels`` channels and ``pipeline`` chunks
per channel, each rank's data is cut into ``slots = nchannels * pipeline`` pieces that run the same
schedule; piece ``p`` of a channel runs one round behind piece ``p-1``, so consecutive pieces overlap
on the links (the pipelining NCCL does with its chunks and slices).

Steps (n ranks), the counts NCCL's model calls ``nsteps``:

=============== =========================================== ==========
collective      schedule                                     steps
=============== =========================================== ==========
all_reduce      reduce-scatter then all-gather around ring   2(n-1)
reduce_scatter  pass partial sums n-1 times                  n-1
all_gather      pass shards n-1 times                        n-1
broadcast       pipelined chain root -> root+1 -> ...        n-1
reduce          pipelined chain ending at the root           n-1
all_to_all      each block walks (dst-src) mod n hops        n-1
=============== =========================================== ==========

Chunk layout is shard-major: chunk ``k * slots + slot`` is piece ``slot`` of shard ``k``.
"""
from __future__ import annotations

import numpy as np

from sim.program import Program

from .registry import algorithm

_ALL = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")


def _grid(*sizes):
    """Flattened index arrays over a dense grid (like itertools.product, vectorized)."""
    # int32: half the memory and time of int64 for the millions of ops of a 1024-rank ring (Program stores int32)
    return [a.ravel() for a in np.meshgrid(*[np.arange(s, dtype=np.int32) for s in sizes], indexing="ij")]


@algorithm("ring", _ALL, "pipelined ring in rank order; bandwidth-optimal, 2(n-1) steps for all_reduce",
           pipelined=("broadcast", "reduce"))
def build_ring(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    slots = nchannels * pipeline
    params = {"nchannels": nchannels, "pipeline": pipeline}
    if coll.name in ("broadcast", "reduce"):
        return _chain(coll, n, slots, nchannels, pipeline, root, params)
    if coll.name == "all_to_all":
        return _all_to_all(coll, n, slots, nchannels, pipeline, params)
    nsteps = 2 * (n - 1) if coll.name == "all_reduce" else n - 1
    slot, s, r = _grid(slots, nsteps, n)
    ch, piece = slot // pipeline, slot % pipeline
    if coll.name == "all_reduce":
        rs = s < n - 1
        k = np.where(rs, r - s, r + 1 - (s - (n - 1))) % n
        reduce = rs
    elif coll.name == "reduce_scatter":
        k, reduce = (r - s - 1) % n, np.ones_like(r, dtype=bool)
    else:  # all_gather
        k, reduce = (r - s) % n, np.zeros_like(r, dtype=bool)
    c = np.arange(n * slots)
    rotation = ((c // slots + 1) % n) * slots + c % slots  # rank r -> r+1 moves shard k to k+1
    return Program.from_ops(coll, n, n * slots, r, (r + 1) % n, k * slots + slot, s + piece, reduce,
                            channel=ch, algorithm="ring", steps=nsteps, rotation=rotation, params=params)


def _chain(coll, n, slots, nchannels, pipeline, root, params) -> Program:
    # broadcast: root -> root+1 -> ... ; reduce: root+1 -> root+2 -> ... -> root, summing on the way
    slot, s = _grid(slots, n - 1)
    first = root if coll.name == "broadcast" else root + 1
    src = (first + s) % n
    piece = slot % pipeline
    return Program.from_ops(coll, n, slots, src, (src + 1) % n, slot, s + piece,
                            np.full(src.shape, coll.name == "reduce"), channel=slot // pipeline,
                            algorithm="ring", steps=n - 1, root=root, params=params)


def _all_to_all(coll, n, slots, nchannels, pipeline, params) -> Program:
    # block (a -> b) hops a, a+1, ..., b: hop h (1-based) leaves rank a+h-1 at step h-1
    slot, a, d, h = _grid(slots, n, n - 1, n - 1)
    b = (a + d + 1) % n                       # destination, never a itself
    hops = d + 1
    keep = h < hops
    slot, a, b, h = slot[keep], a[keep], b[keep], h[keep]
    src = (a + h) % n
    chunk = (a * n + b) * slots + slot
    c = np.arange(n * n * slots)
    blk, sub = c // slots, c % slots
    rotation = ((((blk // n) + 1) % n) * n + ((blk % n) + 1) % n) * slots + sub
    return Program.from_ops(coll, n, n * n * slots, src, (src + 1) % n, chunk, h + slot % pipeline,
                            np.zeros(src.shape, bool), channel=slot // pipeline, algorithm="ring",
                            steps=n - 1, rotation=rotation, params=params)
