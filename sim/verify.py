"""Symbolic verification: does a Program really compute its collective?

Every (agent, chunk) slot holds the set of ranks whose input has been summed into it (a bitmask, see
:mod:`sim.collectives`). The verifier starts from the collective's precondition, applies the ops round
by round (every op of a step reads its source as it stood after the previous step), and checks:

* an op never sends a chunk its source does not hold;
* a reduce never counts a rank twice (``{0,1} + {1,2}`` is an error: rank 1 would be added twice);
* two ops of one step never both overwrite the same slot;
* at the end, every slot the postcondition names holds exactly what it must.

On failure it raises :class:`VerificationError` naming the rank, the chunk, what it holds and what it
should, in the spirit of msccl-tools' ``check()``.

>>> from sim.algorithms import build_program
>>> verify(build_program("ring", "all_reduce", 4)).ok
True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import CollsimError
from .program import Program


class VerificationError(CollsimError):
    """The program does not compute its collective; the message says where."""


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    algorithm: str
    collective: str
    nranks: int
    nops: int
    steps: int


def format_ranks(mask: int, nranks: int) -> str:
    """``0b1011`` -> ``{0,1,3}``; all ranks -> ``all 4 ranks``; 0 -> ``nothing``."""
    if mask == 0:
        return "nothing"
    if mask == (1 << nranks) - 1:
        return f"the sum of all {nranks} ranks"
    ranks = [r for r in range(mask.bit_length()) if mask >> r & 1]
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if j - i < 2 else f"{ranks[i]}-{ranks[j]}")
        if 0 < j - i < 2:
            parts.extend(str(r) for r in ranks[i + 1:j + 1])
        i = j + 1
    return "{" + ",".join(parts) + "}" if len(ranks) > 1 else f"rank {ranks[0]}'s input"


def verify(program: Program) -> VerifyReport:
    """Run ``program`` symbolically; raise :class:`VerificationError` if it is wrong."""
    p = program
    n, coll = p.nranks, p.collective
    state = coll.precondition(n, p.nchunks, p.root) + [[0] * p.nchunks for _ in p.switches]
    order = p.order()
    steps = p.step[order]
    bounds = np.flatnonzero(np.diff(steps)) + 1
    src, dst, chunk, red = p.src[order].tolist(), p.dst[order].tolist(), p.chunk[order].tolist(), p.reduce[order].tolist()
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(order)]
    for lo, hi in zip(starts, ends):
        step = int(steps[lo])
        values = [state[src[i]][chunk[i]] for i in range(lo, hi)]  # reads see the state before this step
        copied: set[tuple[int, int]] = set()
        for k, i in enumerate(range(lo, hi)):
            s, d, c, v = src[i], dst[i], chunk[i], values[k]
            if v == 0:
                raise VerificationError(f"{p.algorithm} {coll.name} (n={n}): at step {step}, {p.agent_name(s)} sends chunk {c} "
                                        f"to {p.agent_name(d)} but holds nothing for that chunk yet")
            if red[i]:
                cur = state[d][c]
                if cur & v:
                    raise VerificationError(f"{p.algorithm} {coll.name} (n={n}): at step {step}, {p.agent_name(d)} adds "
                                            f"{format_ranks(v, n)} from {p.agent_name(s)} into chunk {c}, which already holds "
                                            f"{format_ranks(cur, n)}: ranks {format_ranks(cur & v, n)} would be counted twice")
                state[d][c] = cur | v
            else:
                if (d, c) in copied:
                    raise VerificationError(f"{p.algorithm} {coll.name} (n={n}): at step {step}, two ops overwrite chunk {c} "
                                            f"of {p.agent_name(d)}: only one copy into a slot per step")
                copied.add((d, c))
                state[d][c] = v
    want = coll.postcondition(n, p.nchunks, p.root)
    for r in range(n):
        for c in range(p.nchunks):
            w = want[r][c]
            if w is not None and state[r][c] != w:
                raise VerificationError(f"{p.algorithm} {coll.name} (n={n}): rank {r} ends with chunk {c} holding "
                                        f"{format_ranks(state[r][c], n)}, but it should hold {format_ranks(w, n)}")
    return VerifyReport(True, p.algorithm, coll.name, n, p.nops, p.steps)
