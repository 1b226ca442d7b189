"""A real job's collectives beside the model: measured vs predicted time, NCCL's choice vs the model's.

:func:`compare_job` groups a :class:`~sim.evidence.job.Job`'s calls by distinct collective (op, per-rank
input bytes, group size) and, for each, gives

- ``calls`` (per rank: the most any rank made), ``ranks`` seen, and the measured duration over every
  rank's calls: ``measured_us`` (median), ``measured_min_us`` / ``measured_max_us``, ``per_rank_us``
  (each rank's median), ``spread_us`` (slowest rank's median minus the fastest's) and ``slowest_rank``;
- ``predicted_us`` with the model's ``model_algorithm`` / ``model_protocol`` for the same collective on the
  group's share of the topology (:class:`sim.planning.costs.CollectiveCosts`; nccl-tests' size, see job.py);
- ``nccl_algorithm`` / ``nccl_protocol`` (the most frequent over the calls; ``null`` where nothing says) and
  ``nccl_choice_source`` (``NCCL log``: NCCL's per-call tuning line, ground truth; ``kernel name``: the
  kernel launched, a hint only).

The job-level ``agreement`` counts calls whose NCCL choice is known: the share where the model picks the
same algorithm, protocol, and both. ``step`` gives each collective type's share of the recorded step
and, where GPU compute kernels are recorded, the time not overlapped by compute (``exposed``).
``stragglers`` compares, call by call across ranks, when each rank issued the call (its launch): a rank
that issues late makes the others wait inside the collective (docs/traces.md).
"""
from __future__ import annotations

import statistics
from collections import Counter

from ..errors import CollsimError
from ..planning.costs import CollectiveCosts
from ..topology import Topology
from .job import P2P, Call, Job, dtype_bytes, other_chip

MAX_PREDICTED = 200       # distinct collectives predicted per report (each is one simulation)
STRAGGLER_MIN_US = 20.0   # a median lateness below this is launch jitter, not a straggler
STRAGGLER_FACTOR = 2.0    # ... and it must be this many times the median lateness over ranks
# Flight-recorder dumps stamp each call with its own host's wall clock, and hosts' clocks differ by up to
# milliseconds: lateness below this is clock skew as much as a late rank. `collsim flight analyze` uses the
# same 10 ms by default (docs/flight.md), so the two commands name the same stragglers.
FLIGHT_STRAGGLER_MIN_US = 10_000.0
# backends of communication kernels that are not NCCL's (sim.evidence.kineto), as a note names them
NOT_NCCL = {"symm_mem": "PyTorch's symmetric-memory kernels (multimem/one-shot/two-shot all-reduce)",
            "custom": "a custom all-reduce kernel (vLLM's cross_device_reduce)"}


def _key(c: Call) -> tuple:
    return (c.op, c.nbytes, c.group_size)


def _median(xs):
    return statistics.median(xs) if xs else None


def _most_common(values):
    values = [v for v in values if v is not None]
    return Counter(values).most_common(1)[0][0] if values else None


def group_ranks(calls: list, topo: Topology | None, notes: list | None = None) -> tuple | None:
    """The ranks the prediction uses: the process group's own where it fits the topology, else 0..n-1
    (with a note when the group's own ranks are known but lie outside the topology)."""
    g = calls[0].group_size
    if not g or g < 2 or topo is None or g > topo.nranks:
        return None
    ranks = next((c.group_ranks for c in calls if c.group_ranks and len(c.group_ranks) == g), None)
    if ranks and max(ranks) < topo.nranks and len(set(ranks)) == g:
        return tuple(ranks)
    if ranks and notes is not None:
        note = (f"process group {list(ranks)[:8]}{'...' if len(ranks) > 8 else ''} lies outside {topo.name} "
                f"({topo.nranks} GPUs): predicted on ranks 0..{g - 1}, which is the same only if the group sits "
                "the same way in the machine (give the job's whole topology)")
        if note not in notes:
            notes.append(note)
    return tuple(range(g))


def collective_rows(job: Job, topology: Topology | None, algorithm: str = "auto", protocol: str = "auto",
                    notes: list | None = None) -> list[dict]:
    """One row per distinct collective (see the module docstring), largest total time first."""
    notes = notes if notes is not None else []
    costs = CollectiveCosts(topology, algorithm, protocol) if topology is not None else None
    groups: dict = {}
    for c in job.calls:
        groups.setdefault(_key(c), []).append(c)
    rows = []
    for (op, nbytes, group), calls in groups.items():
        durations = [c.duration_us for c in calls if c.duration_us is not None]
        per_rank: dict = {}
        for c in calls:
            if c.duration_us is not None:
                per_rank.setdefault(c.rank, []).append(c.duration_us)
        rank_med = {r: statistics.median(v) for r, v in sorted(per_rank.items())}
        counts = Counter(c.rank for c in calls)
        row = {"collective": op, "nbytes": nbytes, "nccl_tests_nbytes": calls[0].nccl_tests_nbytes,
               "group_size": group, "dtype": _most_common(c.dtype for c in calls), "calls": max(counts.values()),
               "ranks": sorted(counts), "measured_us": _median(durations),
               "measured_min_us": min(durations) if durations else None,
               "measured_max_us": max(durations) if durations else None,
               "per_rank_us": {str(r): v for r, v in rank_med.items()},
               "spread_us": (max(rank_med.values()) - min(rank_med.values())) if len(rank_med) > 1 else None,
               "slowest_rank": max(rank_med, key=lambda r: rank_med[r]) if len(rank_med) > 1 else None,
               "predicted_us": None, "model_algorithm": None, "model_protocol": None, "ratio": None,
               "nccl_algorithm": _most_common(c.nccl_algorithm for c in calls),
               "nccl_protocol": _most_common(c.nccl_protocol for c in calls),
               "nccl_choice_source": _most_common(c.choice_source for c in calls),
               "backend": _most_common(c.backend for c in calls), "total_us": sum(durations) if durations else None}
        rows.append((row, calls))
    rows.sort(key=lambda rc: (-(rc[0]["total_us"] or 0.0), rc[0]["collective"], rc[0]["nbytes"] or 0))
    unsized: Counter = Counter()   # why a collective is not predicted -> how many
    for i, (row, calls) in enumerate(rows):
        if i >= MAX_PREDICTED:   # each distinct collective is one simulation: the work is bounded, the rest said
            notes.append(f"{len(rows) - MAX_PREDICTED:,} of {len(rows):,} distinct collectives are not predicted: only "
                         f"the {MAX_PREDICTED} with the most recorded time are (each is a simulation; a job has a few "
                         "dozen, so so many distinct sizes suggests varying message sizes or a damaged trace)")
            break
        why = _predict(row, calls, costs, topology, notes)
        if why:
            unsized[why] += 1
    if unsized:
        notes.append(f"{sum(unsized.values())} distinct collective(s) are not predicted, for what the evidence lacks "
                     "(how many each): " + "; ".join(f"{why}: {n}" for why, n in sorted(unsized.items())))
    return [row for row, _ in rows]


def _predict(row: dict, calls: list, costs, topology, notes: list) -> str:
    """Predict ``row`` in place; what the evidence lacks for a prediction ("" where nothing is lacking, or
    where the reason is noted otherwise)."""
    coll = calls[0].collective
    size, group = row["nccl_tests_nbytes"], row["group_size"]
    if costs is None:
        return ""
    if coll is None:
        return "no known collective (point-to-point calls are not predicted)"
    if size is None:
        dtype = next((c.dtype for c in calls if c.dtype), None)
        return (f"no size (element type {str(dtype)[:40]!r}, which collsim does not know)" if dtype and
                dtype_bytes(dtype) is None else "no size (no input shape or element count)")
    if not group:
        return "no process-group size (a trace without 'Group size'/'Process Group Ranks')"
    ranks = group_ranks(calls, topology, notes)
    if ranks is None:
        if group > topology.nranks:
            note = (f"{row['collective']} over {group} ranks is not predicted: the topology {topology.name} has "
                    f"{topology.nranks} GPUs (give a larger --topology)")
            if note not in notes:
                notes.append(note)
        return "a group of one rank (nothing to communicate)" if group < 2 else ""
    try:
        cost = costs.get(coll.name, int(size), ranks)
    except CollsimError as e:
        notes.append(f"{row['collective']} of {size} B over {group} ranks: not predicted ({e})")
        return ""
    if cost.time_us > 0:
        row["predicted_us"] = cost.time_us
        row["model_algorithm"], row["model_protocol"] = cost.algorithm, cost.protocol
        if row["measured_us"]:
            row["ratio"] = row["measured_us"] / cost.time_us
    return ""


def agreement(job: Job, rows: list) -> dict:
    """How often the model's (algorithm, protocol) is NCCL's, over the calls whose NCCL choice is known."""
    model = {(r["collective"], r["nbytes"], r["group_size"]): (r["model_algorithm"], r["model_protocol"]) for r in rows}
    n = algo = proto = both = with_proto = recorded = 0
    sources: Counter = Counter()
    for c in job.calls:
        if c.nccl_algorithm is None:
            continue
        recorded += 1
        m = model.get(_key(c))
        if m is None or m[0] is None:
            continue
        n += 1
        sources[c.choice_source] += 1
        a = c.nccl_algorithm == m[0]
        algo += a
        if c.nccl_protocol is not None:   # a SendRecv kernel names no protocol: not counted either way
            with_proto += 1
            proto += c.nccl_protocol == m[1]
            both += a and c.nccl_protocol == m[1]
    rate = (lambda k, d=None: k / (n if d is None else d) if (n if d is None else d) else None)
    return {"calls": n, "recorded_calls": recorded, "algorithm_rate": rate(algo), "protocol_rate": rate(proto, with_proto),
            "rate": rate(both, with_proto), "protocol_calls": with_proto,
            "sources": dict(sources),
            "caveat": "kernel names give the kernel launched, not always the protocol NCCL ran; only NCCL's "
                      "per-call tuning log lines are ground truth" if sources.get("kernel name") else None}


def union_intervals(intervals: list) -> list:
    out: list = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_us(s: float, e: float, merged: list, starts: list) -> float:
    import bisect
    i = max(0, bisect.bisect_right(starts, s) - 1)
    total = 0.0
    while i < len(merged) and merged[i][0] < e:
        total += max(0.0, min(e, merged[i][1]) - max(s, merged[i][0]))
        i += 1
    return total


def step_shares(job: Job) -> dict:
    """Per collective type: mean time per rank inside the recorded step, its share, and the exposed part."""
    per_type: dict = {}
    spans = []
    exposed_known = False
    for rank, (lo, hi) in job.spans.items():
        if hi <= lo:
            continue
        spans.append(hi - lo)
        merged = union_intervals(job.compute.get(rank, []))
        starts = [m[0] for m in merged]
        for c in job.calls:
            if c.rank != rank or c.duration_us is None or c.start_us is None or not lo <= c.start_us <= hi:
                continue
            t = per_type.setdefault(c.op, {"time": 0.0, "exposed": 0.0, "ranks": set()})
            t["time"] += c.duration_us
            t["ranks"].add(rank)
            if merged:
                exposed_known = True
                t["exposed"] += c.duration_us - overlap_us(c.start_us, c.start_us + c.duration_us, merged, starts)
    if not spans:
        return {"span_us": None, "by_collective": [], "exposed_known": False}
    nr = len(spans)
    span = statistics.median(spans)
    by = []
    for op, t in sorted(per_type.items(), key=lambda kv: -kv[1]["time"]):
        time = t["time"] / nr
        exposed = t["exposed"] / nr if exposed_known else None
        by.append({"collective": op, "time_us": time, "share": time / span,
                   "exposed_us": exposed, "exposed_share": exposed / span if exposed is not None else None})
    return {"span_us": span, "ranks": nr, "steps": sum(job.steps.values()) // max(1, len(job.steps)) or None,
            "comm_share": sum(b["share"] for b in by), "exposed_known": exposed_known,
            "exposed_share": sum(b["exposed_share"] for b in by) if exposed_known else None, "by_collective": by}


def stragglers(job: Job) -> dict:
    """Ranks that issue calls late: each call is matched across ranks and each rank's launch is compared
    with the earliest (a clock shared by the ranks is assumed: one host, or hosts synchronised by NTP/PTP to
    well under the lateness reported). A call whose evidence names it (flight recorder: process group and
    ``collective_seq_id``, :attr:`~sim.evidence.job.Call.match`) is matched by that name; others as the
    k-th call of each distinct collective of one process group on each rank (a trace or log that kept every
    call). Send/recv are not matched: rank 0's k-th send and rank 1's are different transfers. With
    flight-recorder timings (each host's clock) lateness must reach :data:`FLIGHT_STRAGGLER_MIN_US`."""
    occurrences: dict = {}
    matched: dict = {}
    for c in sorted(job.calls, key=lambda c: (c.rank, c.seq)):
        if c.launch_us is None or c.op in P2P:
            continue
        if c.match is not None:
            matched.setdefault(("named",) + c.match, {})[c.rank] = c
            continue
        # the group's own ranks where recorded: two groups' calls of one size are different calls
        per = occurrences.setdefault((_key(c), c.group_ranks, c.rank), [])
        per.append(c)
    for (key, group, rank), calls in occurrences.items():
        for k, c in enumerate(calls):
            matched.setdefault((key, group, k), {})[rank] = c
    late: dict = {}
    gap: dict = {}
    flight = False   # some lateness was measured on flight-recorder clocks
    for calls in matched.values():
        if len(calls) < 2:
            continue
        flight = flight or any(c.recorder == "flight" for c in calls.values())
        first = min(c.launch_us for c in calls.values())
        for r, c in calls.items():
            late.setdefault(r, []).append(c.launch_us - first)
    for c in job.calls:
        if c.launch_us is not None and c.start_us is not None:
            gap.setdefault(c.rank, []).append(c.start_us - c.launch_us)
    ranks = sorted(set(late) | set(gap))
    table = [{"rank": r, "matched_calls": len(late.get(r, [])), "late_us_median": _median(late.get(r, [])),
              "late_us_max": max(late[r]) if late.get(r) else None,
              "launch_to_start_us_median": _median(gap.get(r, []))} for r in ranks]
    meds = [t["late_us_median"] for t in table if t["late_us_median"] is not None]
    typical = statistics.median(meds) if meds else 0.0
    least = FLIGHT_STRAGGLER_MIN_US if flight else STRAGGLER_MIN_US
    named = [t["rank"] for t in table if t["late_us_median"] is not None and t["late_us_median"] >= least
             and t["late_us_median"] >= STRAGGLER_FACTOR * max(typical, 1e-9)]
    why = (" (flight-recorder times are each host's clock, which differ by up to milliseconds: collsim flight "
           "analyze's 10 ms rule)" if flight else "")
    return {"ranks": table, "named": named,
            "rule": f"a straggler issues its calls a median >= {least:g} us after the first rank of the same call{why} "
                    f"and >= {STRAGGLER_FACTOR:g}x the median lateness over ranks"}


def compare_job(job: Job, topology: Topology | None, algorithm: str = "auto", protocol: str = "auto") -> dict:
    """The whole comparison as the JSON document of ``collsim trace --format json``."""
    notes = list(job.notes)
    if topology is not None and other_chip(job.device, topology.hardware.gpu):
        notes.append(f"the evidence ran on {job.device} while {topology.name} has {topology.hardware.gpu}: measured/pred "
                     "compares two machines (give the job's own topology, e.g. --topology-from-log)")
    rows = collective_rows(job, topology, algorithm, protocol, notes)
    other = [r for r in rows if r["backend"] in NOT_NCCL and r["predicted_us"] is not None]
    if other:
        kinds = sorted({NOT_NCCL[r["backend"]] for r in other})
        notes.append(f"{len(other)} distinct collective(s) ran {' and '.join(kinds)}, not NCCL: their predicted time "
                     "is NCCL's for the same call, so measured/pred compares the two implementations")
    return {"topology": topology.name if topology is not None else None,
            "sources": job.sources, "ranks": job.ranks(), "world_size": job.world_size,
            "byte_convention": "nbytes: the per-rank input buffer as torch counts it (all_gather: one rank's shard); "
                               "nccl_tests_nbytes: nccl-tests' size column, which the model is asked about",
            "collectives": rows, "agreement": agreement(job, rows), "step": step_shares(job),
            "stragglers": stragglers(job), "logs": [log.summary() for log in job.logs], "notes": notes}
