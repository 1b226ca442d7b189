"""What-if from a real step: the traced step's communication, timed on another topology
(``collsim plan --from-trace TRACE --topology SPEC [--vs SPEC]``).

The step is rebuilt from one rank (the one whose recorded step holds the most communication): its
recorded span, and every collective call in it with its measured duration and the part of that duration
that ran under compute (GPU compute kernels on that rank; none on a CPU-only trace, where every call
counts as exposed). On a topology T each call takes the model's time ``p`` for the same collective (op,
nccl-tests size, group); compute is kept as recorded, so a call's exposed time becomes
``max(0, p - overlapped)`` and

    step(T) = recorded span - sum(measured exposed) + sum(max(0, p - overlapped))

This keeps the job's own compute and its overlap, and changes only how long communication takes: the
question "what would this step cost on that cluster?" for the communication part. Calls the model does
not time (send/recv, groups larger than T) keep their measured time, and are counted in ``unmodelled_us``.
"""
from __future__ import annotations

from ..planning.costs import CollectiveCosts
from ..topology import Topology
from .job import Job
from .job_compare import group_ranks, overlap_us, union_intervals


def _reference_rank(job: Job) -> int:
    best, best_t = None, -1.0
    for rank, (lo, hi) in job.spans.items():
        t = sum(c.duration_us for c in job.calls if c.rank == rank and c.duration_us and c.start_us is not None
                and lo <= c.start_us <= hi)
        if t > best_t:
            best, best_t = rank, t
    if best is None:
        from ..errors import CollsimError
        raise CollsimError("the trace records no step on any rank (no timed events): a what-if needs a profiler "
                           "trace with the step's communication inside it")
    return best


def trace_step(job: Job, topologies: list[tuple[str, Topology]], algorithm: str = "auto", protocol: str = "auto") -> dict:
    """The traced step as recorded and on each of ``topologies`` (label, Topology): see the module docstring."""
    rank = _reference_rank(job)
    lo, hi = job.spans[rank]
    merged = union_intervals(job.compute.get(rank, []))
    starts = [m[0] for m in merged]
    calls = [c for c in job.calls if c.rank == rank and c.duration_us is not None and c.start_us is not None
             and lo <= c.start_us <= hi]
    by_key: dict = {}
    for c in job.calls:
        by_key.setdefault((c.op, c.nbytes, c.group_size), []).append(c)
    overlapped = [overlap_us(c.start_us, c.start_us + c.duration_us, merged, starts) if merged else 0.0 for c in calls]
    exposed = [c.duration_us - o for c, o in zip(calls, overlapped)]
    span = hi - lo
    recorded = {"label": "recorded", "topology": None, "step_us": span, "comm_us": sum(c.duration_us for c in calls),
                "exposed_comm_us": sum(exposed), "unmodelled_us": 0.0}
    configs = [recorded]
    per_call: list = []
    for label, topo in topologies:
        costs = CollectiveCosts(topo, algorithm, protocol)
        comm = new_exposed = unmodelled = 0.0
        for i, (c, o) in enumerate(zip(calls, overlapped)):
            coll = c.collective
            ranks = group_ranks(by_key[(c.op, c.nbytes, c.group_size)], topo)
            p = None
            if coll is not None and c.nccl_tests_nbytes and ranks is not None:
                p = costs.get(coll.name, int(c.nccl_tests_nbytes), ranks).time_us
            if p is None:
                p = c.duration_us
                unmodelled += p
            comm += p
            new_exposed += max(0.0, p - o)
            if len(per_call) <= i:
                per_call.append({"collective": c.op, "nbytes": c.nbytes, "group_size": c.group_size,
                                 "start_us": c.start_us - lo, "measured_us": c.duration_us, "overlapped_us": o,
                                 "predicted_us": {}})
            per_call[i]["predicted_us"][label] = p
        configs.append({"label": label, "topology": topo.name, "step_us": span - sum(exposed) + new_exposed,
                        "comm_us": comm, "exposed_comm_us": new_exposed, "unmodelled_us": unmodelled})
    for cfg in configs:
        cfg["exposed_comm_share"] = cfg["exposed_comm_us"] / cfg["step_us"] if cfg["step_us"] else 0.0
    return {"from_trace": job.sources, "rank": rank, "calls": len(calls), "compute_known": bool(merged),
            "configurations": configs, "collectives": per_call,
            "method": "step = recorded span - measured exposed communication + sum(max(0, predicted - overlapped))"}


def whatif_table(doc: dict) -> str:
    """The configurations as a text table."""
    lines = [f"collsim plan --from-trace: rank {doc['rank']}'s step, {doc['calls']} collective calls"
             + ("" if doc["compute_known"] else " (no GPU compute recorded: every call counted as exposed)"),
             f"{'configuration':<28} {'step ms':>10} {'comm ms':>10} {'exposed ms':>11} {'exposed':>8}"]
    for c in doc["configurations"]:
        name = c["label"] if c["topology"] is None or c["label"] == c["topology"] else f"{c['label']} ({c['topology']})"
        lines.append(f"{name[:28]:<28} {c['step_us'] / 1e3:>10.3f} {c['comm_us'] / 1e3:>10.3f} "
                     f"{c['exposed_comm_us'] / 1e3:>11.3f} {100 * c['exposed_comm_share']:>7.1f}%")
    unmodelled = max(c["unmodelled_us"] for c in doc["configurations"])
    if unmodelled:
        lines.append(f"note: {unmodelled / 1e3:.3f} ms of calls the model does not time kept their measured time")
    lines.append(f"method: {doc['method']}")
    return "\n".join(lines)
