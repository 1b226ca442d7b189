"""The Program: what every rank (and every reducing switch) sends, as data.

An algorithm is a pure function that returns a :class:`Program`. The verifier, the simpy engine, the
closed-form model and the real executor all read the same Program.

Data model. Each rank's buffer of S bytes is cut into ``nchunks`` equal chunks. An *op* moves one
chunk from agent ``src`` to agent ``dst``; at ``dst`` it either replaces the chunk (copy) or is summed
into it (``reduce``). Agents ``0..nranks-1`` are the ranks; agents ``nranks..`` are the reducing
switches named in ``switches`` (topology node names), for in-network reduction (SHARP, NVLS).

Ordering. Ops carry a ``step``: steps are synchronous rounds for the *meaning* of the program (every op
of step s reads its source chunk as it stood after step s-1), which is how :mod:`sim.verify` and the
real executor run it. The engine only keeps the data dependencies that this implies (an op waits for
the writes to its source chunk in earlier steps), so independent work overlaps as it would on a GPU.
``channel`` says which of NCCL's parallel channels an op belongs to (informational; channels share
links in the engine because they share them in hardware).

Compactness. Ops live in numpy arrays (six small integers per op), not in one Python object per op,
so a ring all-reduce over 1024 ranks (2 million ops) is ~30 MB.

>>> from sim.algorithms import build_program
>>> p = build_program("ring", "all_reduce", 4)
>>> p.nops, p.steps, p.nchunks
(24, 6, 4)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .collectives import Collective, get_collective
from .errors import CollsimError


@dataclass(frozen=True, eq=False)
class Program:
    """A collective algorithm as chunk ops. Build with :meth:`from_ops`."""

    collective: Collective
    nranks: int
    nchunks: int
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    step: np.ndarray
    channel: np.ndarray
    reduce: np.ndarray
    algorithm: str
    steps: int                        # communication steps one piece of data crosses (NCCL's "nsteps")
    root: int = 0
    switches: tuple[str, ...] = ()    # topology node names of agents nranks, nranks+1, ...
    rotation: np.ndarray | None = None  # chunk map for rank r -> r+1 if the program is rotation invariant
    params: dict = field(default_factory=dict)  # algorithm parameters (nchannels, pipeline, ...)

    @classmethod
    def from_ops(cls, collective, nranks: int, nchunks: int, src, dst, chunk, step, reduce, *,
                 algorithm: str, steps: int, channel=None, root: int = 0, switches=(), rotation=None,
                 params: dict | None = None) -> "Program":
        """Make a Program from op columns (sequences or arrays of equal length) and check its shape."""
        coll = get_collective(collective)
        src = np.ascontiguousarray(src, dtype=np.int32)
        n = len(src)
        cols = {"dst": dst, "chunk": chunk, "step": step, "reduce": reduce}
        if channel is None:
            channel = np.zeros(n, dtype=np.int16)
        arrays = {}
        dtypes = {"reduce": bool, "channel": np.int16}   # by column; the rest are int32
        for column, arr in {**cols, "channel": channel}.items():
            a = np.ascontiguousarray(arr, dtype=dtypes.get(column, np.int32))
            if a.shape != (n,):
                raise CollsimError(f"program {algorithm!r}: column {column!r} has {a.shape} entries, expected ({n},) like 'src'")
            arrays[column] = a
        prog = cls(coll, int(nranks), int(nchunks), src, arrays["dst"], arrays["chunk"], arrays["step"], arrays["channel"],
                   arrays["reduce"], algorithm, int(steps), int(root), tuple(switches),
                   None if rotation is None else np.ascontiguousarray(rotation, dtype=np.int64), dict(params or {}))
        prog.check_shape()
        return prog

    @property
    def nops(self) -> int:
        return len(self.src)

    @property
    def nagents(self) -> int:
        return self.nranks + len(self.switches)

    @property
    def nrounds(self) -> int:
        """Number of synchronous rounds in the schedule (pipelining adds rounds to ``steps``)."""
        return int(self.step.max()) + 1 if self.nops else 0

    def check_shape(self) -> None:
        """Index ranges only; :func:`sim.verify.verify` checks the meaning."""
        na = self.nagents
        if self.nranks < 2:
            raise CollsimError(f"program {self.algorithm!r}: {self.nranks} rank(s); a collective needs at least 2")
        self.collective.check_nchunks(self.nranks, self.nchunks)
        if self.collective.rooted and not 0 <= self.root < self.nranks:
            raise CollsimError(f"program {self.algorithm!r}: root {self.root} is not a rank (0..{self.nranks - 1})")
        if self.nops == 0:
            raise CollsimError(f"program {self.algorithm!r} has no ops")
        for name, arr, hi in (("src", self.src, na), ("dst", self.dst, na), ("chunk", self.chunk, self.nchunks)):
            bad = np.flatnonzero((arr < 0) | (arr >= hi))
            if bad.size:
                raise CollsimError(f"program {self.algorithm!r}: op {bad[0]} has {name}={arr[bad[0]]}, outside 0..{hi - 1}")
        selfs = np.flatnonzero(self.src == self.dst)
        if selfs.size:
            raise CollsimError(f"program {self.algorithm!r}: op {selfs[0]} sends chunk {self.chunk[selfs[0]]} from agent {self.src[selfs[0]]} to itself")
        if (self.step < 0).any():
            raise CollsimError(f"program {self.algorithm!r}: negative step")

    def agent_name(self, agent: int) -> str:
        return f"rank {agent}" if agent < self.nranks else f"switch {self.switches[agent - self.nranks]}"

    def order(self) -> np.ndarray:
        """Op indices sorted by step (stable): the order the verifier and executor apply them in."""
        return np.argsort(self.step, kind="stable")

    def ops(self, limit: int | None = None):
        """Iterate ops as tuples (src, dst, chunk, step, channel, reduce) in step order (for reading)."""
        for i in self.order()[:limit]:
            yield int(self.src[i]), int(self.dst[i]), int(self.chunk[i]), int(self.step[i]), int(self.channel[i]), bool(self.reduce[i])

    def with_ops(self, keep: np.ndarray | None = None, **columns) -> "Program":
        """A copy with ops filtered (``keep`` mask or indices) and/or columns replaced: for tests that
        break a program on purpose, and for tools that edit one."""
        cols = {k: getattr(self, k) for k in ("src", "dst", "chunk", "step", "channel", "reduce")}
        cols.update({k: np.asarray(v) for k, v in columns.items()})
        if keep is not None:
            cols = {k: v[keep] for k, v in cols.items()}
        return Program.from_ops(self.collective, self.nranks, self.nchunks, cols["src"], cols["dst"], cols["chunk"],
                                cols["step"], cols["reduce"], channel=cols["channel"], algorithm=self.algorithm,
                                steps=self.steps, root=self.root, switches=self.switches, rotation=None, params=self.params)

    def nbytes_per_chunk(self, nbytes: float) -> float:
        return self.collective.chunk_nbytes(nbytes, self.nranks, self.nchunks)

    def rotation_holds(self) -> bool:
        """Check the declared rotation symmetry: shifting every rank by one (and chunks by ``rotation``)
        maps the set of ops onto itself. Cost O(nops log nops); the engine trusts the declaration, tests
        call this."""
        if self.rotation is None:
            return False
        n = self.nranks

        def shift(agent):
            return np.where(agent < n, (agent + 1) % n, agent)

        def keys(src, dst, chunk):
            return np.stack([src, dst, chunk, self.step, self.channel, self.reduce.astype(np.int32)], axis=1)

        a = keys(self.src, self.dst, self.chunk)
        b = keys(shift(self.src), shift(self.dst), self.rotation[self.chunk])
        a = a[np.lexsort(a.T[::-1])]
        b = b[np.lexsort(b.T[::-1])]
        return bool(np.array_equal(a, b))

    def describe(self, limit: int = 40) -> str:
        """Steps as text: ``step 0: r0 -> r1 chunk 0 (reduce)`` ... (first ``limit`` ops)."""
        lines = [f"{self.algorithm} {self.collective.name}: {self.nranks} ranks, {self.nchunks} chunks, "
                 f"{self.nops} ops, {self.steps} steps, {self.nrounds} rounds"]
        for s, d, c, st, ch, red in self.ops(limit):
            lines.append(f"  step {st:3d} ch {ch}: {self.agent_name(s)} -> {self.agent_name(d)}  chunk {c}"
                         f"{'  (reduce)' if red else ''}")
        if self.nops > limit:
            lines.append(f"  ... {self.nops - limit} more")
        return "\n".join(lines)
