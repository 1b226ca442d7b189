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
is not a positive 64-bit count, as PyTorch keeps them; completion before start) are not used: that entry
is kept as untimed, and a note counts such entries and names the first. As with a dump file that cannot be
read, one damaged value does not hide what the rest of the evidence shows, but it is never dropped silently.
"""
from __future__ import annotations

import math

from ..flight.loader import load_dir
from .job import MAX_EVENT_US, Call, Job, dtype_bytes, op_of

MAX_NS = 2**63 - 1  # PyTorch keeps its clocks in int64 nanoseconds


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


def _show(v) -> str:
    """A damaged value for a note, short (a 400-digit integer is not printed whole)."""
    text = str(v)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def _clock(e: dict, key: str, bad: list):
    """The entry's nanosecond clock ``key``, or None (unrecorded, or not a clock: then listed in ``bad``)."""
    v = e[key]
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_NS:
        bad.append(f"{key} {_show(v)}")
        return None
    return v


def _timing(e: dict, bad: list) -> tuple:
    """(created, started, duration_us) of one entry; impossible values left out and named in ``bad``."""
    created, started, completed = (_clock(e, k, bad) for k in ("created_ns", "started_ns", "completed_ns"))
    ms, dur = e["duration_ms"], None
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        us = float(ms) * 1e3 if abs(ms) < 1e300 else math.inf
        if 0 <= us <= MAX_EVENT_US:
            dur = us
        else:
            bad.append(f"duration_ms {_show(ms)}")
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
    for rank, d in sorted(dumps.dumps.items()):
        pgs = d["pg_config"]
        for i, e in enumerate(d["entries"]):
            op = op_of(e["profiling_name"])
            if op is None:
                continue
            members = pgs.get(e["pg"], {}).get("ranks") or []
            n = _elems(e["input_sizes"])
            size = dtype_bytes(e["input_dtypes"][0]) if e["input_dtypes"] else None
            bad: list = []
            created, started, dur = _timing(e, bad)
            if bad:
                damaged.append((rank, e["record_id"], ", ".join(bad)))
            untimed += dur is None
            calls.append(Call(source=directory, rank=rank, op=op, nbytes=n * size if n is not None and size else None,
                              dtype=e["input_dtypes"][0] if e["input_dtypes"] else None,
                              group_size=len(members) or None, group_ranks=tuple(members) or None, seq=i,
                              launch_us=created / 1e3 if created else None,
                              start_us=started / 1e3 if started else None, duration_us=dur,
                              backend=d.get("backend") or None))
    if damaged:
        rank, record, what = damaged[0]
        notes.append(f"{directory}: {len(damaged)} flight-recorder entr{'y has' if len(damaged) == 1 else 'ies have'} "
                     f"clocks no recorder writes (first: rank {rank}, record {record}: {what}): those values are not used")
    if untimed:
        notes.append(f"{directory}: {untimed} of {len(calls)} flight-recorder entries have no timing (record with "
                     "TORCH_NCCL_ENABLE_TIMING=1 for durations)")
    world = max((len(c.get("ranks") or []) for d in dumps.dumps.values() for c in d["pg_config"].values()), default=0)
    return Job(calls=calls, sources=[directory], notes=notes, world_size=world or None)
