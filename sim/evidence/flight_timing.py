"""Flight-recorder dumps as :class:`~sim.evidence.job.Call` records, with their timings where recorded.

The dumps are read by :mod:`sim.flight.loader` (plain-data pickles or JSON; no code runs). Each entry
gives the op (``nccl:all_reduce``), the process group (its ranks from ``pg_config``), input sizes and
dtypes, and three clocks in nanoseconds: ``time_created_ns`` (the call was issued: our ``launch_us``),
``time_discovered_started_ns`` and ``time_discovered_completed_ns`` (when the watchdog saw the work start
and finish). With ``TORCH_NCCL_ENABLE_TIMING=1`` PyTorch also records ``duration_ms``, the GPU time
between CUDA events around the kernel: the measured time used here. Without it, the discovered
start-to-completion interval is used (an upper bound: the watchdog polls), and without those, none.

Send/recv entries (``nccl:send 0->3``) keep their p2p names; ``is_p2p`` coalesced groups are skipped.

Clocks no recorder writes (a negative, non-finite or over-a-day ``duration_ms``; a nanosecond clock that
is not a positive 64-bit count, as PyTorch keeps them: :mod:`sim.flight.loader` leaves both out and names
them; completion before start) are not used: that entry is kept as untimed, and a note counts such entries
and names the first. As with a dump file that cannot be
read, one damaged value does not hide what the rest of the evidence shows, but it is never dropped silently.
"""
from __future__ import annotations

from ..flight.loader import load_dir
from ..io.printable import short_repr
from .job import Call, Job, dtype_bytes, op_of

# the fields whose damage changes a timing (the loader also names a damaged timeout_ms, which none uses)
CLOCKS = ("time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns", "duration_ms")


def _elems(sizes) -> int | None:
    """Elements of the first input tensor (``input_sizes`` is a list of shapes)."""
    if not isinstance(sizes, list) or not sizes or not isinstance(sizes[0], list):
        return None
    n = 1
    for d in sizes[0]:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def _dtype(e: dict, bad: list) -> str | None:
    """The first input's element type (``"Float"``); a value no recorder writes there (a number, a list) is not
    used and is listed in ``bad``: it would otherwise key the report's rows and counts as text."""
    dtypes = e["input_dtypes"]
    if isinstance(dtypes, (list, tuple)) and all(isinstance(t, str) for t in dtypes):
        return dtypes[0] if dtypes else None
    bad.append(short_repr(dtypes))
    return None


def _timing(e: dict, bad: list) -> tuple:
    """(created, started, duration_us) of one entry; the loader has left out clocks no recorder writes and
    named them in ``e["damaged"]``: they are listed in ``bad``."""
    bad.extend(f"{k} {v}" for k, v in e["damaged"].items() if k in CLOCKS)
    created, started, completed = e["created_ns"], e["started_ns"], e["completed_ns"]
    dur = float(e["duration_ms"]) * 1e3 if e["duration_ms"] is not None else None
    if dur is None and started and completed:
        if completed >= started:
            dur = (completed - started) / 1e3
        else:
            bad.append("completed before it started")
    return created, started, dur


def read_flight_dir(directory: str) -> Job:
    """Every rank's entries in ``directory`` (one dump per rank) as calls."""
    dumps = load_dir(directory)
    calls, notes = [], []
    for path, why in dumps.refused.items():
        notes.append(f"flight dump {path} refused: {why}")
    untimed = 0
    damaged: list = []  # (rank, record, what) of entries with clocks no recorder writes
    bad_dtypes: list = []  # (rank, record, what) of entries whose input_dtypes are not type names
    for rank, d in sorted(dumps.dumps.items()):
        pgs = d["pg_config"]
        for i, e in enumerate(d["entries"]):
            op = op_of(e["profiling_name"])
            if op is None:
                continue
            members = pgs.get(e["pg"], {}).get("ranks") or []
            n = _elems(e["input_sizes"])
            not_names: list = []
            dtype = _dtype(e, not_names)
            if not_names:
                bad_dtypes.append((rank, e["record_id"], not_names[0]))
            size = dtype_bytes(dtype) if dtype else None
            bad: list = []
            created, started, dur = _timing(e, bad)
            if bad:
                damaged.append((rank, e["record_id"], ", ".join(bad)))
            untimed += dur is None
            calls.append(Call(source=directory, rank=rank, op=op, nbytes=n * size if n is not None and size else None,
                              dtype=dtype,
                              group_size=len(members) or None, group_ranks=tuple(members) or None, seq=i,
                              launch_us=created / 1e3 if created else None,
                              start_us=started / 1e3 if started else None, duration_us=dur,
                              backend=d.get("backend") or None,
                              # PyTorch numbers a group's collectives on every member alike; the k-th entry
                              # of a rank's ring buffer is not its k-th call once older ones were evicted
                              match=("flight", e["pg"], e["seq"]) if e["seq"] > 0 and not e["is_p2p"] else None,
                              recorder="flight"))
    if damaged:
        rank, record, what = damaged[0]
        notes.append(f"{directory}: {len(damaged)} flight-recorder entr{'y has' if len(damaged) == 1 else 'ies have'} "
                     f"clocks no recorder writes (first: rank {rank}, record {record}: {what}): those values are not used")
    if bad_dtypes:
        rank, record, what = bad_dtypes[0]
        notes.append(f"{directory}: {len(bad_dtypes)} flight-recorder entr{'y has' if len(bad_dtypes) == 1 else 'ies have'} "
                     f"input_dtypes that are not type names (first: rank {rank}, record {record}: {what}): their "
                     "element type and size are not used")
    if untimed:
        notes.append(f"{directory}: {untimed} of {len(calls)} flight-recorder entries have no timing (record with "
                     "TORCH_NCCL_ENABLE_TIMING=1 for durations)")
    world = max((len(c.get("ranks") or []) for d in dumps.dumps.values() for c in d["pg_config"].values()), default=0)
    versions = sorted({d.get("nccl_version") for d in dumps.dumps.values()} - {None})
    if len(versions) > 1:
        notes.append(f"{directory}: the dumps record NCCL {', '.join(versions)}: predicted with the first")
    return Job(calls=calls, sources=[directory], notes=notes, world_size=world or None,
               nccl_version=versions[0] if versions else None)
