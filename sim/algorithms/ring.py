"""Ring algorithms for all six collectives (NCCL's default at large sizes).

Ranks form a ring in rank order; rank r sends to r+1::

    0 -> 1 -> 2 -> ... -> n-1 -> 0

=============== ===================================================== ==========
collective      schedule (step s, every rank r at once)                steps
=============== ===================================================== ==========
reduce_scatter  r sends chunk r-s-1 to r+1, which adds it              n-1
all_gather      r sends chunk r-s to r+1, which keeps it               n-1
all_reduce      reduce-scatter (chunk r-s), then all-gather (r+1-s)    2(n-1)
broadcast       chain from the root: root+s -> root+s+1                n-1
reduce          chain ending at the root, summing on the way           n-1
all_to_all      the block from a to b walks (b-a) mod n hops           n-1
=============== ===================================================== ==========

Each channel and pipelined piece runs this schedule one step behind the previous piece (the language
does that, :mod:`sim.chunk_program`), which is how NCCL's chunks keep every link busy.

>>> from sim.algorithms import build_program
>>> [build_program("ring", c, 8).steps for c in ("all_reduce", "all_gather", "broadcast")]
[14, 7, 7]
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..chunk_program import ChunkProgram
from . import algorithm
from .analytic import ring_steps

_ALL = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")


@algorithm("ring", _ALL, "pipelined ring in rank order; bandwidth-optimal, 2(n-1) steps for all_reduce",
           pipelined=("broadcast", "reduce"),
           nccl=("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"))   # all_to_all: NCCL uses p2p
def build_ring(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    chunks = {"broadcast": 1, "reduce": 1, "all_to_all": n * n}.get(coll.name, n)
    p = ChunkProgram(coll, n, chunks, root=root)
    r = p.ranks
    shift: Callable[[Any], Any] | None = lambda c: c + 1     # moving every rank one place moves shard k to shard k+1
    if coll.name == "all_reduce":
        for s in p.steps(n - 1):
            p.send(r, r + 1, chunk=r - s, reduce=True)
        for s in p.steps(n - 1):
            p.send(r, r + 1, chunk=r + 1 - s)
    elif coll.name == "reduce_scatter":
        for s in p.steps(n - 1):
            p.send(r, r + 1, chunk=r - s - 1, reduce=True)
    elif coll.name == "all_gather":
        for s in p.steps(n - 1):
            p.send(r, r + 1, chunk=r - s)
    elif coll.name == "broadcast":   # ranks count from the root
        for s in p.steps(n - 1):
            p.send(s, s + 1, chunk=0)
        shift = None
    elif coll.name == "reduce":
        for s in p.steps(n - 1):
            p.send(s + 1, s + 2, chunk=0, reduce=True)
        shift = None
    else:  # all_to_all: block (a -> b) is chunk a*n + b; hop h of a block travelling d+1 hops
        a, d, h = p.grid(n, n - 1, n - 1)
        p.send(a + h, a + h + 1, chunk=a * n + (a + d + 1) % n, step=h, where=h <= d)
        shift = lambda c: (c // n + 1) % n * n + (c + 1) % n
    return p.program("ring", steps=ring_steps(coll.name, n), nchannels=nchannels, pipeline=pipeline, rotation=shift)
