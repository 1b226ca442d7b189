"""Flight-recorder dumps as :class:`~sim.evidence.job.Call` records, with their timings where recorded.

The dumps are read by :mod:`sim.flight.loader` (plain-data pickles or JSON; no code runs). Each entry
gives the op (``nccl:all_reduce``), the process group (its ranks from ``pg_config``), input sizes and
dtypes, and three clocks in nanoseconds: ``time_created_ns`` (the call was issued: our ``launch_us``),
``time_discovered_started_ns`` and ``time_discovered_completed_ns`` (when the watchdog saw the work start
and finish). With ``TORCH_NCCL_ENABLE_TIMING=1`` PyTorch also records ``duration_ms``, the GPU time
between CUDA events around the kernel: the measured time used here. Without it, the discovered
start-to-completion interval is used (an upper bound: the watchdog polls), and without those, none.

Send/recv entries (``nccl:send 0->3``) keep their p2p names; ``is_p2p`` coalesced groups are skipped.
"""
from __future__ import annotations

from ..flight.loader import load_dir
from .job import Call, Job, dtype_bytes, op_of


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


def read_flight_dir(directory: str) -> Job:
    """Every rank's entries in ``directory`` (one dump per rank) as calls."""
    dumps = load_dir(directory)
    calls, notes = [], []
    for path, why in dumps.refused.items():
        notes.append(f"flight dump {path} refused: {why}")
    untimed = 0
    for rank, d in sorted(dumps.dumps.items()):
        pgs = d["pg_config"]
        for i, e in enumerate(d["entries"]):
            op = op_of(e["profiling_name"])
            if op is None:
                continue
            members = pgs.get(e["pg"], {}).get("ranks") or []
            n = _elems(e["input_sizes"])
            size = dtype_bytes(e["input_dtypes"][0]) if e["input_dtypes"] else None
            dur = e["duration_ms"] * 1e3 if isinstance(e["duration_ms"], (int, float)) and e["duration_ms"] >= 0 else None
            if dur is None and e["started_ns"] and e["completed_ns"] and e["completed_ns"] >= e["started_ns"]:
                dur = (e["completed_ns"] - e["started_ns"]) / 1e3
            untimed += dur is None
            calls.append(Call(source=directory, rank=rank, op=op, nbytes=n * size if n is not None and size else None,
                              dtype=e["input_dtypes"][0] if e["input_dtypes"] else None,
                              group_size=len(members) or None, group_ranks=tuple(members) or None, seq=i,
                              launch_us=e["created_ns"] / 1e3 if e["created_ns"] else None,
                              start_us=e["started_ns"] / 1e3 if e["started_ns"] else None, duration_us=dur,
                              backend=d.get("backend") or None))
    if untimed:
        notes.append(f"{directory}: {untimed} of {len(calls)} flight-recorder entries have no timing (record with "
                     "TORCH_NCCL_ENABLE_TIMING=1 for durations)")
    world = max((len(c.get("ranks") or []) for d in dumps.dumps.values() for c in d["pg_config"].values()), default=0)
    return Job(calls=calls, sources=[directory], notes=notes, world_size=world or None)
