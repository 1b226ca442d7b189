"""The chunk-program language: an algorithm as a loop over steps, every rank at once.

A ring all-reduce, as the textbook draws it (``r`` is every rank at once, a numpy array):

>>> n = 4
>>> p = ChunkProgram("all_reduce", n, chunks=n)
>>> r = p.ranks
>>> for s in p.steps(n - 1):                      # reduce-scatter: pass partial sums to the right
...     p.send(r, r + 1, chunk=r - s, reduce=True)
>>> for s in p.steps(n - 1):                      # all-gather: pass the finished shards on
...     p.send(r, r + 1, chunk=r + 1 - s)
>>> prog = p.program("ring", steps=2 * (n - 1))
>>> prog.nops, prog.steps, prog.describe(limit=2).splitlines()[1]
(24, 6, '  step   0 ch 0: rank 0 -> rank 1  chunk 0  (reduce)')

``p.send(src, dst, chunk=..., reduce=...)`` adds one op per element (arguments broadcast like numpy);
``for s in p.steps(k)`` runs its body at the next k steps (``step=`` names a step explicitly);
``p.switch(node)`` is a reducing switch (SHARP, NVLS) as a sender or receiver (a topology node number, or
its name: ``p.switch("switch")``). What the language does once, so that no algorithm has to:

* rank and chunk arithmetic wraps around: ``r + 1`` of the last rank is rank 0;
* rooted collectives: ranks count from the root (``ChunkProgram(..., root=3)``: rank 0 *is* rank 3),
  so broadcast and reduce are written for root 0;
* channels and pipelining: the schedule is written for one piece of data. ``program(nchannels=C,
  pipeline=P)`` runs it for all C*P pieces: chunk c of the schedule becomes chunk ``c*C*P + piece``
  (shard-major), piece q of a channel runs q steps after piece 0, so consecutive pieces overlap;
* symmetry: ``rotation=f`` says that moving every rank to rank+1 maps chunk c to ``f(c)``; the
  language extends it to the pieces, and the engine then simulates one op per orbit;
* flow control: ``window=W`` lets W pieces be in flight per connection (NCCL's buffer slots).

Algorithms import this module only; the result is a plain :class:`~sim.program.Program`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .collectives import get_collective
from .errors import CollsimError
from .program import Program


@dataclass(frozen=True)
class Switch:
    """A reducing switch as a Program agent (agents ``nranks, nranks+1, ...``, in order of first use)."""

    agent: int
    name: str


class ChunkProgram:
    """Collects sends for one piece of data and turns them into a :class:`Program`."""

    def __init__(self, collective, nranks: int, chunks: int, *, root: int = 0, topology=None,
                 ranks_from_root: bool = True):
        self.collective, self.n, self.chunks = get_collective(collective), int(nranks), int(chunks)
        collective = self.collective
        self.root = int(root) if collective.rooted else 0
        self.topology = topology
        # False: sends name ranks as they are (an algorithm that places the root itself, like the tree)
        self._shift = self.root if ranks_from_root else 0
        self.ranks = np.arange(self.n, dtype=np.int64)
        self.now = 0                      # the step ``send`` uses when none is named
        self._next_step = 0
        self._switches: dict[int | str, Switch] = {}
        self._cols: list[tuple[Any, ...]] = []   # src, dst, chunk, step, reduce, src/dst is a switch

    # ---- writing ------------------------------------------------------------------------------------
    def steps(self, count: int):
        """``for s in p.steps(count)``: the body's sends happen at the next ``count`` steps (s = 0, 1, ...)."""
        first = self._next_step
        for s in range(count):
            self.now = first + s
            yield s
        self._next_step = first + count

    def switch(self, node: int | str) -> Switch:
        """The topology node ``node`` (a reducing switch) as an agent of this program; or a switch by its
        node name (``p.switch("switch")`` for ``switch:n=8,nvls=1``), which needs no topology."""
        if node not in self._switches:
            if isinstance(node, str):
                name = node
            elif self.topology is None:
                raise CollsimError(f"switch({node}): a node number needs ChunkProgram(..., topology=...); "
                                   "or name the switch, e.g. p.switch(\"switch\")")
            else:
                name = self.topology.nodes[node].name
            self._switches[node] = Switch(self.n + len(self._switches), name)
        return self._switches[node]

    def grid(self, *sizes: int) -> list[np.ndarray]:
        """Every combination of ``range(size)`` for each size (like nested loops), as flat arrays."""
        return [a.ravel() for a in np.meshgrid(*[np.arange(s, dtype=np.int64) for s in sizes], indexing="ij")]

    def send(self, src, dst, chunk, reduce=False, step=None, where=None) -> None:
        """Send ``chunk`` from ``src`` to ``dst`` (summed into it when ``reduce``): one op per element."""
        cols = [np.asarray(v.agent if isinstance(v, Switch) else v) for v in (src, dst)]
        cols += [np.asarray(chunk), np.asarray(self.now if step is None else step), np.asarray(reduce, bool)]
        for name, c in zip(("src", "dst", "chunk", "step"), cols):
            if c.dtype.kind not in "iu" and c.size:
                raise CollsimError(f"send: {name} must be whole numbers (ranks, chunks, steps), got {c.dtype} {c.ravel()[:3]}")
        shape = np.broadcast_shapes(*(c.shape for c in cols))
        cols = [c.ravel() if c.shape == shape else np.full(shape, c) if c.ndim == 0 else np.broadcast_to(c, shape).ravel()
                for c in cols]
        if where is not None:
            keep = np.broadcast_to(np.asarray(where, bool), shape).ravel()
            cols = [c[keep] for c in cols]
        # wrapping is done once for all sends in program(); switches are agents, not ranks: never wrapped
        self._cols.append((*cols, isinstance(src, Switch), isinstance(dst, Switch)))

    # ---- the Program ----------------------------------------------------------------------------------
    def program(self, algorithm: str, *, steps: int, nchannels: int = 1, pipeline: int = 1, rotation=None,
                window: int | None = None, **params) -> Program:
        """Every (channel, piece) copy of the schedule, as a Program. ``steps``: the steps one piece
        takes (NCCL's nsteps); ``rotation``: chunk map of the rank -> rank+1 symmetry, if any;
        extra keyword arguments are recorded in ``Program.params``."""
        src, dst, chunk, step, red = (np.concatenate([c[i] for c in self._cols], dtype=np.int64 if i < 4 else bool,
                                                     casting="unsafe") for i in range(5))
        count = [len(c[0]) for c in self._cols]
        for col, k in ((src, 5), (dst, 6)):    # ranks wrap around (and count from the root); switches not
            if not any(c[k] for c in self._cols):
                if self._shift:
                    col += self._shift
                np.remainder(col, self.n, out=col)
            else:
                rank = ~np.repeat([c[k] for c in self._cols], count)
                col[rank] = (col[rank] + self._shift) % self.n
        np.remainder(chunk, self.chunks, out=chunk)
        selfs = np.flatnonzero(src == dst)
        if selfs.size:   # said here, where the wrapping that usually causes it is known
            i = int(selfs[0])
            raise CollsimError(f"{algorithm}: at step {int(step[i])} rank {int(src[i])} sends chunk {int(chunk[i])} to itself: "
                               f"rank numbers wrap around ({self.n} ranks: rank r + {self.n} is rank r); "
                               "a reducing switch is p.switch(...), not a number")
        slots = nchannels * pipeline
        piece = np.repeat(np.arange(slots, dtype=np.int64), len(src))   # slot-major, the schedule inside
        tiled = [np.tile(a, slots) if slots > 1 else a for a in (src, dst, chunk, step, red)]
        rot = None
        if rotation is not None:
            c = np.arange(self.chunks * slots)
            rot = (np.asarray(rotation(c // slots)) % self.chunks) * slots + c % slots
        params = {"nchannels": nchannels, "pipeline": pipeline, **params}
        if window:
            params["window"] = window
        return Program.from_ops(self.collective, self.n, self.chunks * slots, tiled[0], tiled[1],
                                tiled[2] * slots + piece, tiled[3] + piece % pipeline, tiled[4],
                                channel=piece // pipeline, algorithm=algorithm, steps=steps, root=self.root,
                                switches=tuple(s.name for s in self._switches.values()), rotation=rot, params=params)
