"""Run a ``sim`` Program on real tensors: torch point-to-point ops and local reductions.

The same Program that ``collsim verify`` proves and ``collsim simulate`` times runs here for real, so a
student's algorithm can be measured next to the backend's own collective::

    collsim bench --backend gloo --nprocs 4 --impl program:ring -b 1M -e 16M -f 4
    collsim bench --nprocs 4 --impl program:my_allreduce.py       # a file defining build(collective, nranks)

Semantics (as :mod:`sim.verify`): each rank's buffer is cut into ``nchunks`` near-equal chunks; steps
are synchronous rounds. In round ``s`` a rank posts every send and receive of its ops of step ``s`` in
one ``dist.batch_isend_irecv``, waits for them, then applies what arrived: a copy replaces the chunk,
a reduce combines it (sum, or the ``-o`` op). Sends read the chunk as it stood after round ``s-1``
because nothing is written until the round's transfers have finished. Ranks need no barrier between
rounds: a receive cannot finish before its sender has reached that round.

Buffers: all_reduce, broadcast and reduce run in place on the receive buffer; all_gather and
reduce_scatter on the full (n-shard) buffer, with the input copied in first when out of place;
all_to_all on a scratch buffer of n x n blocks (the Program's block matrix, ``Collective.chunk_nbytes``).
Those copies are part of the timed call.

Agents ``>= nranks`` are reducing switches (SHARP, NVLS): no host can play them, so such Programs are
refused.

Example (inside an initialised process group of 4 ranks)::

    prog = load_program("program:ring", "all_reduce", 4)
    ex = Executor(prog, rank=dist.get_rank())
    ex.run(split(x, prog.nchunks))                # x now holds the sum over ranks
"""
from __future__ import annotations

import inspect

import numpy as np

from sim.errors import CollsimError

_OPS_OK = ("sum", "prod", "min", "max")


def load_program(impl: str, collective: str, nranks: int, root: int = 0):
    """The Program named by ``--impl program:NAME`` (a sim algorithm) or ``program:FILE.py``, checked."""
    from sim.algorithms import build_program
    from sim.program import Program
    spec = impl.split(":", 1)[1]
    if spec.endswith(".py"):
        from sim.io.user_algorithm import load_user_builder
        build, supported = load_user_builder(spec)
        if collective not in supported:
            raise CollsimError(f"{spec} serves {', '.join(supported)}, not {collective}: pick one of those with --collective")
        kwargs = {"root": root} if "root" in inspect.signature(build).parameters else {}
        try:
            program = build(collective, nranks, **kwargs)
        except CollsimError:
            raise
        except Exception as e:  # the student's code: one line, no traceback
            raise CollsimError(f"{spec}: build({collective!r}, {nranks}) raised {type(e).__name__}: {e}") from None
    else:
        program = build_program(spec, collective, nranks, root=root)
    if not isinstance(program, Program):
        raise CollsimError(f"{spec} returned {type(program).__name__}, not a sim.Program: build it with Program.from_ops")
    check_program(program, collective, nranks, root)
    return program


def check_program(program, collective: str, nranks: int, root: int = 0) -> None:
    """Refuse a Program this executor cannot run faithfully, with the reason and the fix."""
    if program.collective.name != collective:
        raise CollsimError(f"program {program.algorithm!r} computes {program.collective.name}, not {collective}: "
                           f"use --collective {program.collective.name}")
    if program.nranks != nranks:
        raise CollsimError(f"program {program.algorithm!r} is built for {program.nranks} ranks, the job has {nranks}")
    if program.switches or (program.src >= nranks).any() or (program.dst >= nranks).any():
        raise CollsimError(f"program {program.algorithm!r} reduces inside switches ({', '.join(program.switches) or 'agents >= nranks'}): "
                           "hosts cannot play a SHARP/NVLS switch, so it cannot run for real; use a host-only "
                           "algorithm such as program:ring")
    if program.collective.rooted and program.root != root:
        raise CollsimError(f"program {program.algorithm!r} has root {program.root}, the run asks for -r {root}: "
                           f"use -r {program.root}")


def split(buf, nchunks: int) -> list:
    """``buf`` as ``nchunks`` contiguous views; chunk k starts at ``k * len // nchunks``, so shard and
    block boundaries (multiples of len / nranks) fall exactly on chunk boundaries."""
    n = buf.numel()
    edges = [k * n // nchunks for k in range(nchunks + 1)]
    return [buf[edges[k]:edges[k + 1]] for k in range(nchunks)]


def num_steps(program) -> int:
    return int(program.steps)


class Executor:
    """One rank's share of a Program: per round, what to send and what to receive and how to apply it."""

    def __init__(self, program, rank: int, op: str = "sum", group=None):
        if op not in _OPS_OK:
            raise CollsimError(f"--impl program: runs sum, prod, min and max reductions, not {op}: use -o sum")
        self.program, self.rank, self.op, self.group = program, rank, op, group
        p = program
        mine = np.flatnonzero((p.src == rank) | (p.dst == rank))
        # Both ends must post a pair's messages in the same order: sort by (step, src, dst, chunk).
        mine = mine[np.lexsort((p.chunk[mine], p.dst[mine], p.src[mine], p.step[mine]))]
        self.rounds: list[tuple[list, list]] = []  # [(sends [(peer, chunk)], recvs [(peer, chunk, reduce)])]
        last = None
        for i in mine:
            s = int(p.step[i])
            if s != last:
                self.rounds.append(([], []))
                last = s
            sends, recvs = self.rounds[-1]
            if p.src[i] == rank:
                sends.append((int(p.dst[i]), int(p.chunk[i])))
            else:
                recvs.append((int(p.src[i]), int(p.chunk[i]), bool(p.reduce[i])))

    def run(self, chunks: list) -> None:
        """Run every round on ``chunks`` (this rank's buffer as ``nchunks`` contiguous tensors)."""
        import torch
        import torch.distributed as dist
        combine = {"sum": torch.Tensor.add_, "prod": torch.Tensor.mul_,
                   "min": lambda a, b: torch.minimum(a, b, out=a), "max": lambda a, b: torch.maximum(a, b, out=a)}[self.op]
        gloo = dist.get_backend(self.group) == "gloo"
        for sends, recvs in self.rounds:
            ops, landed = [], []
            # empty chunks (sizes below nchunks elements) are empty on both ends: nothing to send
            for peer, c in sends:
                if chunks[c].numel():
                    ops.append(dist.P2POp(dist.isend, chunks[c], peer, self.group, tag=c if gloo else 0))
            for peer, c, red in recvs:
                if not chunks[c].numel():
                    continue
                tmp = torch.empty_like(chunks[c])
                ops.append(dist.P2POp(dist.irecv, tmp, peer, self.group, tag=c if gloo else 0))
                landed.append((c, red, tmp))
            for work in dist.batch_isend_irecv(ops) if ops else ():
                work.wait()
            for c, red, tmp in landed:  # after every send of the round: sends saw the old values
                if red:
                    combine(chunks[c], tmp)
                else:
                    chunks[c].copy_(tmp)


def program_calls(program, opts, rank: int):
    """A harness call factory (see :func:`real.measure.harness.run_sweep`) that runs ``program`` for each size."""
    import torch
    executors: dict = {}
    n, coll = program.nranks, program.collective

    def factory(lay, send, recv, op, inplace):
        ex = executors.get(op or "sum") or executors.setdefault(op or "sum", Executor(program, rank, op or "sum"))
        base = lay.count
        if coll.pairwise:
            scratch = torch.zeros(n * n * base, dtype=recv.dtype, device=recv.device)
            chunks = split(scratch, program.nchunks)
            src = recv[:lay.send] if inplace else send[:lay.send]
            mine, blocks = scratch[rank * n * base:(rank + 1) * n * base], scratch.view(n, n, base)

            def run_a2a():
                mine.copy_(src)                        # my row of the block matrix: blocks I send
                ex.run(chunks)
                recv[:lay.recv].view(n, base).copy_(blocks[:, rank, :])  # my column: blocks sent to me
            return run_a2a
        work = recv[:max(lay.send, lay.recv)] if coll.sharded else recv[:lay.count]
        chunks = split(work, program.nchunks)
        shard = slice(rank * base, (rank + 1) * base)
        if coll.sharded and not coll.reduces and not inplace:   # all_gather: my shard into place
            return lambda: (recv[shard].copy_(send[:base]), ex.run(chunks))
        if coll.sharded and coll.reduces and not inplace:   # reduce_scatter
            def run_rs():
                work.copy_(send[:lay.send])
                ex.run(chunks)
                if rank:  # shard r of the reduced buffer is the result; out of place it belongs at the start
                    recv[:base].copy_(recv[shard])
            return run_rs
        return lambda: ex.run(chunks)
    return factory
