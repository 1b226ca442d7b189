"""What each torch.distributed backend can run here, and the notes printed beside its numbers.

gloo, honestly (torch 2.13, checked by ``tests/real/test_backends.py``):

- gloo runs on the CPU and moves bytes over TCP (loopback for local ranks). Its numbers measure this
  host's memory and TCP stack, not a GPU interconnect; compare them with other gloo runs, never with NCCL.
- Timing is host-side only: a gloo call returns when its bytes have arrived, so the host clock around
  the loop is the whole story (there is no device to synchronise and ``--timer events`` does not apply).
- ``reduce_scatter`` is not native in gloo: torch all-reduces the whole input and keeps this rank's
  shard, moving about twice the bytes of a ring reduce-scatter, so its busbw reads about half of what
  the same links give all_gather.
- ``avg`` is a sum followed by a division in torch's gloo backend and fails on integer types; uint32,
  uint64 and the float8 types are not supported by gloo at all.

Both backends: torch has no out-of-place all_reduce, broadcast or reduce (the calls work on one tensor),
so for those three the out-of-place columns time the same in-place call on a separate buffer.

>>> "reduce_scatter" in " ".join(notes_for("gloo", "reduce_scatter", "torch"))
True
"""
from __future__ import annotations

import os

from sim.collectives import get_collective
from sim.errors import CollsimError

from .options import DTYPES, BenchOptions

BACKENDS = ("nccl", "gloo")
GLOO_UNSUPPORTED = ("uint32", "uint64", "f8e4m3", "f8e5m2")
# Local gloo ranks share the CPU cores; past this many per core the run measures the scheduler.
GLOO_RANKS_PER_CORE = 8


def notes_for(backend: str, collective: str, impl: str) -> list[str]:
    """The ``# note:`` lines of a run (also the JSON ``notes`` list)."""
    notes = []
    coll = get_collective(collective)
    if backend == "gloo":
        notes.append("gloo runs on the CPU over TCP (loopback for local ranks): these numbers measure the host's "
                     "memory and TCP stack, not a GPU interconnect")
        notes.append("timing is host-side: gloo calls block until their data has arrived, so there is no device sync")
        if coll.sharded and coll.reduces and impl == "torch":   # reduce_scatter
            notes.append("gloo has no native reduce_scatter: torch all-reduces the whole input and keeps this rank's "
                         "shard (about 2x the bytes of a ring reduce-scatter), so busbw reads about half")
    else:
        notes.append("timing: host clock around the timed loop, then torch.cuda.synchronize() "
                     "(--timer events: CUDA events on the current stream)")
    if not (coll.sharded or coll.pairwise) and impl == "torch":   # one buffer: all_reduce, broadcast, reduce
        notes.append(f"torch's {collective} works in place on one tensor: the out-of-place columns time the same "
                     "call on a separate buffer")
    if coll.pairwise and impl == "torch":
        notes.append("all_to_all has no in-place form in torch (input and output must not overlap): the in-place "
                     "columns copy the buffer to a scratch buffer first, and that copy is timed")
    if impl.startswith("program:"):
        notes.append(f"{impl}: a sim Program run step by step with torch batch_isend_irecv and local reductions "
                     "(one synchronous round per step), not the backend's own collective")
    return notes


def default_backend() -> str:
    """nccl where CUDA and NCCL are available, else gloo."""
    import torch
    import torch.distributed as dist
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def type_plan(opts: BenchOptions, reduces: bool) -> tuple[list[tuple[str, str | None]], list[str]]:
    """The (dtype, op) pairs to run, in nccl-tests' order, and a note per pair skipped.

    A pair asked for by name that the backend cannot run is an error; pairs from ``-d all``/``-o all``
    that it cannot run are skipped with a note.
    """
    plan, skipped = [], []
    ops: tuple[str | None, ...] = opts.ops if reduces else (None,)
    for dname in opts.dtypes:
        if opts.backend == "gloo" and dname in GLOO_UNSUPPORTED:
            if len(opts.dtypes) == 1:
                raise CollsimError(f"gloo cannot run {dname} (it supports int8, uint8, int32, int64, half, float, "
                                   "double, bfloat16): pick one of those with -d, or use --backend nccl on a GPU")
            skipped.append(f"skipped {dname}: gloo does not support it")
            continue
        for op in ops:
            if opts.backend == "gloo" and op == "avg" and DTYPES[dname].kind != "float":
                if len(opts.dtypes) == 1 and len(ops) == 1:
                    raise CollsimError(f"gloo cannot average {dname} values (torch divides the sum in the "
                                       "element type): use -o sum, or a float type with -d")
                skipped.append(f"skipped avg on {dname}: gloo cannot average integers")
                continue
            plan.append((dname, op))
    return plan, skipped


def check_backend(opts: BenchOptions, ranks_here: int | None = None) -> None:
    """Reject a backend/process count/timer this machine cannot serve, before anything starts.
    ``ranks_here``: ranks of a launcher's job on this host (None: read LOCAL_WORLD_SIZE, else all of them)."""
    if ranks_here is None and "RANK" in os.environ:
        ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if opts.backend not in BACKENDS:
        raise CollsimError(f"unknown backend {opts.backend!r}: use --backend nccl (GPUs) or --backend gloo (CPU)")
    if opts.backend == "nccl":
        import torch
        import torch.distributed as dist
        if not torch.cuda.is_available():
            raise CollsimError("--backend nccl needs a CUDA GPU and torch sees none: use --backend gloo to run on the CPU")
        if not dist.is_nccl_available():
            raise CollsimError("this torch build has no NCCL: install a CUDA build of torch, or use --backend gloo")
        ngpus = torch.cuda.device_count()
        local = ranks_here or opts.nprocs
        if local > ngpus:
            raise CollsimError(f"{local} NCCL ranks on this machine need one GPU each but {ngpus} are visible: "
                               f"use --nprocs {ngpus} or fewer")
    else:  # gloo: no torch import here (the ranks import it; a torch without gloo fails there, in one line)
        cores = os.cpu_count() or 1
        if opts.timer == "events":
            raise CollsimError("--timer events needs CUDA events, which gloo on the CPU does not have: use --timer host")
        if opts.nprocs > GLOO_RANKS_PER_CORE * cores and ranks_here is None:
            raise CollsimError(f"--nprocs {opts.nprocs} is more than {GLOO_RANKS_PER_CORE} gloo ranks per core on this "
                               f"{cores}-core machine: use --nprocs {GLOO_RANKS_PER_CORE * cores} or fewer")
        _check_host_memory(opts, ranks_here)
    if opts.impl != "torch" and opts.timer == "events":
        raise CollsimError("--timer events times one stream, but a Program runs on several: use --timer host with --impl program:")


def buffer_bytes(opts: BenchOptions) -> int:
    """Bytes one rank allocates at the largest size (send and receive buffers, as nccl-tests)."""
    from .options import layout
    most = 0
    for dname in opts.dtypes:
        dt = DTYPES[dname]
        lay = layout(opts.collective, max(opts.sizes), dt.nbytes, opts.nprocs)
        most = max(most, 2 * max(lay.send, lay.recv) * dt.nbytes)
    return most


def _check_host_memory(opts: BenchOptions, ranks_here: int | None = None) -> None:
    """Local gloo ranks all allocate in this host's memory: refuse a sweep that cannot fit."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if ":" in line}
        available = info["MemAvailable"]
    except (OSError, KeyError, ValueError):
        return  # not Linux: let the run try
    ranks_here = ranks_here or opts.nprocs
    # Why 1.25 and 64 MiB: the check's index and expected-value slices, and each process's own footprint.
    need = ranks_here * (int(buffer_bytes(opts) * 1.25) + (64 << 20))
    if need > 0.9 * available:
        raise CollsimError(f"{ranks_here} ranks at -e {max(opts.sizes)} B need about {need / 1e9:.1f} GB of memory but "
                           f"{available / 1e9:.1f} GB are available: lower -e or --nprocs")
