"""Read whatever evidence of a job the user names: profiler traces, NCCL debug logs, flight-recorder dumps.

``collsim trace PATH...`` takes files and folders. A file is read by what it holds: gzip, a JSON object or
a JSON array of objects (``[{``, Chrome-trace's array form) is a profiler trace; text with ``NCCL INFO``
lines is an NCCL debug log, whatever its first byte (Open MPI's ``--tag-output`` starts every line with
``[1,0]<stdout>:``, which is not JSON). A JSON object with a flight recorder's keys (``pg_status``,
``entries``) and none of Kineto's (``traceEvents``, ``schemaVersion``, ``deviceProperties``) is a
flight-recorder dump, as is a pickle. A folder is a flight-recorder dump folder when it holds ``_dump_N`` /
``rank_N`` dumps (``rank_N.json`` included: what ``collsim flight simulate --dump`` writes), else every
``*.json``, ``*.json.gz``, ``*.log`` and ``*.txt`` file in it is read (one trace per rank); the folder's files that
are no trace or log at all (notes, a config, collsim's own JSON report: :class:`~sim.evidence.job.NotEvidence`)
are skipped and listed in a note, as ``flight analyze`` lists what it skips. A file named on the command line
that is none of these is refused in one line, naming it, and so is a damaged trace or log wherever it lies:
the comparison never silently drops what it was asked to read.

One command reads one job: profiler traces or dump folders that state different world sizes, or traces
of different GPU models, are refused (pooled, their calls would average two jobs' steps into one), and so are
NCCL logs of two runs (two nccl-tests tables, or another release, world size, ring or channel count), and two
traces that claim one rank over overlapping times. A call read twice (the same rank's trace given twice: same
op, size, start and duration) is counted once, with a note.
"""
from __future__ import annotations

import os

from ..errors import CollsimError
from ..flight.loader import dump_rank, rank_of, shown_items, subfolders_holding
from ..io.safe_io import GZIP_MAGIC
from .flight_timing import read_flight_dir
from .job import Job, NotEvidence
from .kineto import read_trace
from .nccl_log import log_job, read_log

MAX_FILES = 4096
_TRACE_EXT = (".json", ".json.gz", ".gz")
_LOG_EXT = (".log", ".txt", ".out", ".err")


# Read from each file to tell what it is: a flight dump's JSON keys follow its pg_config (one short entry per
# process group), so 64 KiB finds them past ~600 groups; a log's NCCL lines come after its banner.
SNIFF_BYTES = 64 << 10
_KINETO_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"', b'"displayTimeUnit"')
_FLIGHT_KEYS = (b'"pg_status"', b'"entries"', b'"collective_seq_id"', b'"profiling_name"')


def _sniff(path: str) -> str:
    """``trace``, ``log``, ``flight`` or ``binary`` for one file, from its first bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise CollsimError(f"cannot read {path!r}: {e.strerror}") from None
    start = head.lstrip()
    if head[:2] == GZIP_MAGIC:
        return "trace"
    if head[:1] == b"\x80":
        return "flight"
    if start[:1] == b"{":
        kineto = any(k in head for k in _KINETO_KEYS)
        return "flight" if not kineto and any(k in head for k in _FLIGHT_KEYS) else "trace"
    if start[:1] == b"[" and start[1:].lstrip()[:1] in (b"{", b"]", b""):
        return "trace"  # Chrome-trace's array form; "[1,0]<stdout>:" (Open MPI's tag) is a log's line
    if b"\x00" in head:
        return "binary"  # refused before the trace reader reads (and decodes) up to 512 MiB of it
    if b"NCCL" in head or path.lower().endswith(_LOG_EXT):
        return "log"
    return "trace"  # the trace reader gives the clearest refusal ("not a profiler trace")


def _is_flight_dir(path: str, names: list) -> bool:
    def dump(n: str) -> bool:
        if n.lower().endswith(".gz") and not n.lower().endswith(".json.gz"):
            return dump_rank(n) is not None   # _dump_3.gz: PyTorch's pickle, gzipped (the loader reads it)
        if rank_of(n) is None:
            return False
        if n.endswith(".json"):  # rank_3.json: a JSON dump (collsim's, PyTorch's) or one rank's profiler trace
            return _sniff(os.path.join(path, n)) == "flight"
        return not n.endswith(_TRACE_EXT + _LOG_EXT)
    dumps = [n for n in names if dump(n)]
    return len(dumps) >= 1 and len(dumps) * 2 >= len([n for n in names if not n.endswith(_LOG_EXT)])


def _subfolders_with_evidence(path: str) -> list[str]:
    """The subfolders of ``path`` holding a file named like a trace, log or dump (bounded:
    :func:`sim.flight.loader.subfolders_holding`)."""
    wanted = lambda n: n.endswith(_TRACE_EXT + _LOG_EXT) or rank_of(n) is not None or dump_rank(n) is not None
    return [os.path.join(path, sub) for sub in subfolders_holding(path, wanted)]


def _check_one_job(part: Job, source: str, seen: dict) -> None:
    """Refuse a trace or dump folder whose world size or GPU model differs from the first one that said them."""
    said = {"world size": part.world_size, "GPU": part.device, "NCCL": part.nccl_version}
    clash = [k for k, v in said.items() if v is not None and seen.get(k, (v,))[0] != v]
    if clash:
        first = ", ".join(f"{k} {seen[k][0]}" for k in clash)
        here = ", ".join(f"{k} {said[k]}" for k in clash)
        where = seen[clash[0]][1]
        raise CollsimError(f"{where} ({first}) and {source} ({here}) are from different jobs: pass one job's "
                           "traces per command (run collsim trace on each)")
    for k, v in said.items():
        if v is not None and k not in seen:
            seen[k] = (v, source)


def _check_one_run(log, runs: list) -> None:
    """Refuse an NCCL log of another run than the logs read before it: two nccl-tests result tables (rank 0
    prints one per run), or a different NCCL release, world size, ring count or channel count where both
    logs state it. One run's logs per rank agree on all of these; two runs' pooled would give each size a
    time that belongs to neither (a run at 24 rings and one at 2, averaged)."""
    for other in runs:
        differ = [f"{what} {a} vs {b}" for what, a, b in (
            ("NCCL", other.version, log.version), ("ranks", other.nranks, log.nranks),
            ("rings", other.rings, log.rings), ("coll channels", other.coll_channels, log.coll_channels))
            if a is not None and b is not None and a != b]
        if other.nccl_tests and log.nccl_tests:
            if not differ and other.nccl_tests == log.nccl_tests:
                raise CollsimError(f"{other.source} and {log.source} hold the same nccl-tests table (the same log "
                                   "twice?): pass it once")
            differ.append("each holds an nccl-tests result table")
        if differ:
            raise CollsimError(f"{other.source} and {log.source} are two runs ({'; '.join(differ)}): pass one "
                               "run's logs per command (run collsim trace on each)")
    runs.append(log)


def _check_own_window(part: Job, source: str, windows: dict) -> None:
    """Refuse a trace whose rank already has a trace recorded over overlapping times: one rank's profiler records
    one window at a time, so one of the two is another rank's (a wrong ``distributedInfo.rank`` or file name) or
    another job's. Pooled, that rank's calls would be summed twice into one step (a share above 100%)."""
    for rank, (lo, hi) in part.spans.items():
        for other_lo, other_hi, other in windows.get(rank, []):
            if lo < other_hi and other_lo < hi:
                raise CollsimError(f"{other} and {source} both record rank {rank} over overlapping times ({max(lo, other_lo):.0f}"
                                   f"..{min(hi, other_hi):.0f} us): one rank records one window at a time, so one is "
                                   "another rank's trace (check distributedInfo.rank or the file name) or another job's: "
                                   "pass one trace per rank")
        windows.setdefault(rank, []).append((lo, hi, source))


def _drop_repeats(part: Job, read: set) -> int:
    """Drop the calls of ``part`` already read from another file (the same rank's trace given twice: the
    same op, size, start and duration on the same rank); how many were dropped."""
    keep = []
    for c in part.calls:
        key = (c.rank, c.op, c.nbytes, c.start_us, c.duration_us)
        if c.start_us is None or key not in read:
            keep.append(c)
            read.add(key)
    dropped = len(part.calls) - len(keep)
    part.calls = keep
    return dropped


def read_job(paths) -> Job:
    """All the evidence in ``paths`` as one :class:`~sim.evidence.job.Job`."""
    job = Job()
    files: list = []
    flight_dirs: list = []
    seen: dict = {}  # what the first trace or dump folder said of its job: "world size"/"GPU" -> (value, source)
    folder_of: dict = {}   # a file found in a folder (not named by the user) -> the folder
    skipped: dict = {}     # folder -> names of its files that are no trace or log (not read, or not evidence)
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if not n.startswith(".") and os.path.isfile(os.path.join(p, n)))
            if _is_flight_dir(p, names):
                part = read_flight_dir(p)
                flight_dirs.append(p)
                _check_one_job(part, p, seen)
                job.extend(part)
                continue
            picked = [os.path.join(p, n) for n in names if n.endswith(_TRACE_EXT + _LOG_EXT)]
            if not picked:
                inner = _subfolders_with_evidence(p)
                raise CollsimError(f"{p}: no profiler trace (*.json, *.json.gz), NCCL log (*.log) or flight dumps in this "
                                   "folder" + (f"; its subfolder(s) {shown_items(inner)} hold some: give one of them (each "
                                               "is read as one job)" if inner else ""))
            files += picked
            folder_of.update((f, p) for f in picked)
            skipped[p] = [n for n in names if not n.endswith(_TRACE_EXT + _LOG_EXT)]
        else:
            files.append(p)
        if len(files) > MAX_FILES:
            raise CollsimError(f"more than {MAX_FILES} files: pass one job's traces (one file per rank)")
    used_ranks: set = set()
    windows: dict = {}   # rank -> [(first, last us, file)] of the traces read: one rank records one window at a time
    read_calls: set = set()
    kinds: set = set()
    logs: list = []   # the NCCL logs read so far: one run's only
    for i, f in enumerate(files):
        kind = _sniff(f) if os.path.isfile(f) else "trace"
        if kind == "flight":
            raise CollsimError(f"{f}: a flight-recorder dump: pass the folder holding every rank's dump")
        try:
            if kind == "binary":
                raise NotEvidence(f"{f}: binary data, not a profiler trace (Chrome-trace JSON as torch.profiler "
                                  "exports it), NCCL log or flight-recorder dump")
            if kind == "log":
                log = read_log(f)
            else:
                part = read_trace(f, fallback_rank=i)
        except NotEvidence:
            if f not in folder_of:   # named by the user: refused, as any input that is not what it claims
                raise
            # a stray file in a folder of traces (notes, a config, collsim's own JSON report) is not evidence
            skipped[folder_of[f]].append(os.path.basename(f))
            continue
        kinds.add(kind)
        if kind == "log":
            _check_one_run(log, logs)
            part = log_job(log)
            _check_one_job(part, f, seen)   # a log of another job would be pooled with the traces unseen
            job.extend(part)
            continue
        _check_one_job(part, f, seen)
        ranks = {c.rank for c in part.calls} | set(part.spans)
        total, dropped = len(part.calls), _drop_repeats(part, read_calls)
        if dropped and dropped == total:
            part.notes.append(f"{f}: its {total} calls were already read from another file (the same trace twice?): "
                              "counted once")
        else:
            _check_own_window(part, f, windows)
            if dropped:
                part.notes.append(f"{f}: {dropped} of its {total} calls were already read from another file: counted once")
            if ranks & used_ranks:
                part.notes.append(f"{f}: rank {sorted(ranks & used_ranks)} appears in another trace too, recorded at "
                                  "other times (two profiled windows of one rank): their calls are pooled; the step's "
                                  "shares are of the last window read")
        used_ranks |= ranks
        job.extend(part)
    for folder, names in skipped.items():
        if names and not any(folder_of.get(f) == folder for f in job.sources):
            raise CollsimError(f"{folder}: no profiler trace or NCCL log among its files (not read: {shown_items(names)})"
                               + "".join(f"; its subfolder(s) {shown_items(inner)} hold some: give one of them"
                                         for inner in [_subfolders_with_evidence(folder)] if inner))
        if names:
            job.notes.append(f"{folder}: {len(names)} file(s) not read, being no profiler trace or NCCL log: "
                             f"{shown_items(sorted(names))}")
    if not job.calls:
        if kinds == {"log"} and not flight_dirs:
            raise CollsimError(f"no per-call lines in the NCCL log {', '.join(files)}: run with NCCL_DEBUG=INFO "
                               "NCCL_DEBUG_SUBSYS=INIT,COLL,TUNING for them, or pass the log as --topology-from-log "
                               "beside a profiler trace")
        raise CollsimError(f"no collective calls found in {', '.join(paths)}: profile with ProfilerActivity.CUDA (NCCL "
                           "kernels) or record gloo/NCCL collectives inside the profiled window")
    return job
