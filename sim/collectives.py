"""The six collectives: what each one must compute, its byte convention and its bus factor.

Symbolic data (used by :mod:`sim.verify`): a rank's buffer of S bytes is cut into ``nchunks`` equal
chunks. Every (agent, chunk) slot holds a *set of contributions*: bit ``r`` set means "rank r's input for
this chunk has been summed in". A slot with no bits holds nothing yet. So ``{0,1,2}`` is the partial sum
of three ranks' inputs, and an all-reduce is done when every rank holds every chunk with all bits set.

Byte conventions follow nccl-tests (``size`` column): all_reduce, broadcast and reduce move a buffer of S
bytes per rank; for all_gather, reduce_scatter and all_to_all, S is the *total* buffer (n shards).

>>> ALL_REDUCE.bus_factor(8)
1.75
>>> ALL_GATHER.bus_factor(4)
0.75
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import CollsimError


@dataclass(frozen=True)
class Collective:
    """A collective operation and the facts the rest of collsim reads instead of branching on its name.

    ``rooted``: broadcast and reduce take a root rank (and run as a chain from it). ``reduces``: the
    result is a sum. ``passes``: how many times the data crosses a ring (all_reduce = reduce-scatter then
    all-gather: 2; the others 1), which sets ring steps and the bus factor. ``sharded``: nccl-tests' size S
    is n shards, one per rank (all_gather, reduce_scatter). ``pairwise``: every rank sends a distinct block
    to every other (all_to_all; S per rank is n blocks).
    """

    name: str
    rooted: bool
    reduces: bool
    summary: str
    input_is_shard: bool = False  # torch's input is one rank's shard of nccl-tests' size (all_gather)
    nccl_p2p: bool = False        # NCCL runs it as grouped send/recv (its SendRecv kernel): all_to_all
    passes: int = 1               # ring passes: 2 for all_reduce (reduce-scatter + all-gather)
    sharded: bool = False         # S is n shards (all_gather, reduce_scatter)
    pairwise: bool = False        # S per rank is n blocks, one per destination (all_to_all)

    @property
    def root_is_source(self) -> bool:
        """A rooted collective whose root sends (broadcast); reduce's root receives."""
        return self.rooted and not self.reduces

    def ring_steps(self, nranks: int) -> int:
        """Communication steps of the ring algorithms (NCCL's ``nsteps`` for Ring): passes x (n - 1)."""
        return self.passes * (nranks - 1)

    def nccl_tests_bytes(self, input_bytes: float, nranks: int) -> float:
        """nccl-tests' ``size`` for a call whose per-rank *input* buffer is ``input_bytes`` (torch's count):
        the same number, except all_gather, whose size is the gathered output (n inputs).

        >>> ALL_GATHER.nccl_tests_bytes(65536, 2), ALL_REDUCE.nccl_tests_bytes(65536, 2)
        (131072, 65536)
        """
        return input_bytes * nranks if self.input_is_shard else input_bytes

    def bus_factor(self, nranks: int) -> float:
        """nccl-tests' busbw / algbw factor (doc/PERFORMANCE.md)."""
        n = nranks
        return 1.0 if self.rooted else self.passes * (n - 1) / n

    # ---- symbolic conditions ------------------------------------------------------------------
    def shard(self, chunk: np.ndarray | int, nranks: int, nchunks: int):
        """Which rank's shard a chunk belongs to, for sharded collectives (chunks are shard-major)."""
        per = nchunks // nranks
        return np.asarray(chunk) // per

    def chunk_nbytes(self, nbytes: float, nranks: int, nchunks: int) -> float:
        """Bytes in one chunk when the collective moves ``nbytes`` (nccl-tests' size). For all_to_all
        the chunks cover the n x n block matrix (each rank's S bytes are n blocks), so a chunk is
        ``S * n / nchunks``; everywhere else ``S / nchunks``."""
        return nbytes * nranks / nchunks if self.pairwise else nbytes / nchunks

    def check_nchunks(self, nranks: int, nchunks: int) -> None:
        if nchunks < 1:
            raise CollsimError(f"{self.name}: a program needs at least one chunk")
        if self.name in ("all_gather", "reduce_scatter") and nchunks % nranks:
            raise CollsimError(f"{self.name}: {nchunks} chunks do not split into {nranks} equal shards: use a multiple of {nranks}")
        if self.name == "all_to_all" and nchunks % (nranks * nranks):
            raise CollsimError(f"all_to_all: {nchunks} chunks do not split into {nranks}x{nranks} blocks: use a multiple of {nranks * nranks}")

    def precondition(self, nranks: int, nchunks: int, root: int = 0) -> list[list[int]]:
        """Initial value of every (rank, chunk) slot, as contribution bitmasks (Python ints)."""
        self.check_nchunks(nranks, nchunks)
        n = nranks
        state = [[0] * nchunks for _ in range(n)]
        for r in range(n):
            for c in range(nchunks):
                if self.name in ("all_reduce", "reduce", "reduce_scatter"):
                    state[r][c] = 1 << r
                elif self.name == "broadcast":
                    state[r][c] = (1 << r) if r == root else 0
                elif self.name == "all_gather":
                    state[r][c] = (1 << r) if int(self.shard(c, n, nchunks)) == r else 0
                elif self.name == "all_to_all":
                    src, _dst = _a2a_block(c, n, nchunks)
                    state[r][c] = (1 << r) if src == r else 0
        return state

    def postcondition(self, nranks: int, nchunks: int, root: int = 0) -> list[list[int | None]]:
        """Required final value of every (rank, chunk) slot; ``None`` means "anything"."""
        n, full = nranks, (1 << nranks) - 1
        want: list[list[int | None]] = [[None] * nchunks for _ in range(n)]
        for r in range(n):
            for c in range(nchunks):
                if self.name == "all_reduce":
                    want[r][c] = full
                elif self.name == "reduce":
                    want[r][c] = full if r == root else None
                elif self.name == "reduce_scatter":
                    want[r][c] = full if int(self.shard(c, n, nchunks)) == r else None
                elif self.name == "broadcast":
                    want[r][c] = 1 << root
                elif self.name == "all_gather":
                    want[r][c] = 1 << int(self.shard(c, n, nchunks))
                elif self.name == "all_to_all":
                    src, dst = _a2a_block(c, n, nchunks)
                    want[r][c] = (1 << src) if dst == r else None
        return want


def _a2a_block(chunk: int, nranks: int, nchunks: int) -> tuple[int, int]:
    """all_to_all chunk -> (source rank, destination rank). Chunks are ordered (src, dst, sub)."""
    per = nchunks // (nranks * nranks)
    block = chunk // per
    return block // nranks, block % nranks


ALL_REDUCE = Collective("all_reduce", False, True, "every rank ends with the sum of all ranks' buffers", passes=2)
ALL_GATHER = Collective("all_gather", False, False, "every rank ends with every rank's shard (S is the total)",
                        input_is_shard=True, sharded=True)
REDUCE_SCATTER = Collective("reduce_scatter", False, True, "rank r ends with shard r of the sum (S is the total)",
                            sharded=True)
BROADCAST = Collective("broadcast", True, False, "every rank ends with the root's buffer")
REDUCE = Collective("reduce", True, True, "the root ends with the sum of all ranks' buffers")
ALL_TO_ALL = Collective("all_to_all", False, False, "rank d ends with block d of every rank's buffer (S is the total per rank)",
                        nccl_p2p=True, pairwise=True)

COLLECTIVES: dict[str, Collective] = {c.name: c for c in (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALL_TO_ALL)}
_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
            "alltoall": "all_to_all", "bcast": "broadcast"}


def get_collective(name: str | Collective) -> Collective:
    """Look up a collective by its torch name (``all_reduce``...; ``allreduce`` and ``all-reduce`` work too)."""
    if isinstance(name, Collective):
        return name
    key = str(name).strip().lower().replace("-", "_")
    key = _ALIASES.get(key.replace("_", ""), key)
    if key not in COLLECTIVES:
        raise CollsimError(f"unknown collective {name!r}: choose one of {', '.join(COLLECTIVES)}")
    return COLLECTIVES[key]
