"""Read whatever evidence of a job the user names: profiler traces, NCCL debug logs, flight-recorder dumps.

``collsim trace PATH...`` takes files and folders. A file is read by what it holds: a gzip or JSON object
is a profiler trace; text with ``NCCL INFO`` lines is an NCCL debug log. A folder is a flight-recorder
dump folder when it holds ``_dump_N`` / ``rank_N`` files, else every ``*.json``, ``*.json.gz``, ``*.log``
and ``*.txt`` file in it is read (one trace per rank). Anything else is refused in one line, naming the
file: the comparison never silently drops what it was asked to read.
"""
from __future__ import annotations

import os

from ..errors import CollsimError
from ..flight.loader import rank_of
from .flight_timing import read_flight_dir
from .job import Job
from .kineto import read_trace
from .nccl_log import log_job, read_log

MAX_FILES = 4096
_TRACE_EXT = (".json", ".json.gz", ".gz")
_LOG_EXT = (".log", ".txt", ".out", ".err")


def _sniff(path: str) -> str:
    """``trace``, ``log`` or ``flight`` for one file, from its first bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise CollsimError(f"cannot read {path!r}: {e.strerror}") from None
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return "trace"
    if head[:1] == b"\x80":
        return "flight"
    if b"NCCL" in head or path.lower().endswith(_LOG_EXT):
        return "log"
    return "trace"  # the trace reader gives the clearest refusal ("not a profiler trace")


def _is_flight_dir(path: str, names: list) -> bool:
    dumps = [n for n in names if rank_of(n) is not None and not n.endswith(_TRACE_EXT + _LOG_EXT)]
    return len(dumps) >= 1 and len(dumps) * 2 >= len([n for n in names if not n.endswith(_LOG_EXT)])


def read_job(paths) -> Job:
    """All the evidence in ``paths`` as one :class:`~sim.evidence.job.Job`."""
    job = Job()
    files: list = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if not n.startswith(".") and os.path.isfile(os.path.join(p, n)))
            if _is_flight_dir(p, names):
                job.extend(read_flight_dir(p))
                continue
            picked = [os.path.join(p, n) for n in names if n.endswith(_TRACE_EXT + _LOG_EXT)]
            if not picked:
                raise CollsimError(f"{p}: no profiler trace (*.json, *.json.gz), NCCL log (*.log) or flight dumps in this folder")
            files += picked
        else:
            files.append(p)
        if len(files) > MAX_FILES:
            raise CollsimError(f"more than {MAX_FILES} files: pass one job's traces (one file per rank)")
    used_ranks: set = set()
    for i, f in enumerate(files):
        kind = _sniff(f) if os.path.isfile(f) else "trace"
        if kind == "flight":
            raise CollsimError(f"{f}: a flight-recorder dump: pass the folder holding every rank's dump")
        if kind == "log":
            job.extend(log_job(read_log(f)))
            continue
        part = read_trace(f, fallback_rank=i)
        ranks = {c.rank for c in part.calls} | set(part.spans)
        if ranks & used_ranks:
            part.notes.append(f"{f}: rank {sorted(ranks & used_ranks)} appears in another trace too (two jobs, or "
                              "two steps of one rank?); their calls are pooled")
        used_ranks |= ranks
        job.extend(part)
    if not job.calls:
        raise CollsimError(f"no collective calls found in {', '.join(paths)}: profile with ProfilerActivity.CUDA (NCCL "
                           "kernels) or record gloo/NCCL collectives inside the profiled window")
    return job
