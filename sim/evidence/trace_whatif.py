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

The first topology (``--topology``) is the one the step is timed on, usually the cluster it was recorded
on. Its communication comes with the model's 80% range (:func:`sim.prediction.intervals.interval` of each
call, summed: the widest range the calls' own ranges allow); where the recorded communication lies outside
it, ``warnings`` says so on one line with what the trace shows of why. On the published traces the
recorded kernels run 5-60x the model's time: an NCCL kernel starts when its own rank launches it and ends
when the whole group has taken part, so it includes waiting for the ranks that launched later (in the
DLRM trace, rank 1's first all_to_all starts 5.5 ms before rank 0's and both end at the same microsecond).
The what-if rows replace that waiting by the model's time.
"""
from __future__ import annotations

from ..planning.costs import CollectiveCosts
from ..prediction.intervals import interval
from ..topology import Topology
from .job import Job, other_chip
from .job_compare import group_ranks, overlap_us, union_intervals

# share of the recorded communication that ran beside compute kernels above which the warning names
# contention with compute as a likely part of the gap
OVERLAP_WORTH_NAMING = 0.5


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
    comm_range = [0.0, 0.0]  # the 80% range of the first topology's communication
    ranges: dict = {}
    for t, (label, topo) in enumerate(topologies):
        costs = CollectiveCosts(topo, algorithm, protocol)
        comm = new_exposed = unmodelled = 0.0
        for i, (c, o) in enumerate(zip(calls, overlapped)):
            coll = c.collective
            ranks = group_ranks(by_key[(c.op, c.nbytes, c.group_size)], topo)
            p = None
            if coll is not None and c.nccl_tests_nbytes and ranks is not None:
                p = costs.get(coll.name, int(c.nccl_tests_nbytes), ranks).time_us
                if t == 0:
                    key = (coll.name, int(c.nccl_tests_nbytes), ranks)
                    if key not in ranges:
                        ranges[key] = interval(p, 1.0, key[1], costs.sub(ranks), collective=coll.name).time_us_range
                    comm_range[0] += ranges[key][0]
                    comm_range[1] += ranges[key][1]
            if p is None:
                p = c.duration_us
                unmodelled += p
                if t == 0:
                    comm_range[0] += p
                    comm_range[1] += p
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
    if len(configs) > 1:
        configs[1]["comm_us_range"] = tuple(comm_range)
    return {"from_trace": job.sources, "rank": rank, "calls": len(calls), "compute_known": bool(merged),
            "configurations": configs, "collectives": per_call,
            "warnings": _gap_warning(job, recorded, configs[1], topologies[0][1], sum(overlapped)) if len(configs) > 1 else [],
            "method": "step = recorded span - measured exposed communication + sum(max(0, predicted - overlapped)); "
                      "compute as recorded on every row"}


def _other_gpu(job: Job, topo: Topology) -> str:
    """``, and the trace ran on V100s while TOPO has A100s ...`` where the two name different chips, else ``""``."""
    if other_chip(job.device, topo.hardware.gpu):
        return f", and the trace ran on {job.device} while {topo.name} has {topo.hardware.gpu} (part of the gap is the hardware)"
    return ""


def _gap_warning(job: Job, recorded: dict, model: dict, topo: Topology, overlapped_us: float) -> list[str]:
    """One line where the recorded communication lies outside the model's 80% range on the first topology."""
    rec, pred, (lo, hi) = recorded["comm_us"], model["comm_us"], model["comm_us_range"]
    if not rec or not pred or lo <= rec <= hi:
        return []
    head = (f"the recorded communication, {rec / 1e3:.3f} ms, is {rec / pred:.1f}x the model's {pred / 1e3:.3f} ms on "
            f"{model['label']}, outside its 80% range ({lo / 1e3:.3f}-{hi / 1e3:.3f} ms){_other_gpu(job, topo)}")
    if rec < lo:
        return [f"{head}: the job ran faster than the model gives {model['label']}: check that it is the cluster "
                "the trace was recorded on"]
    why = ("an NCCL kernel runs from its own rank's launch until the whole group has joined, so its recorded time "
           "includes waiting for ranks that launched later")
    traced = sorted(set(job.spans) | {c.rank for c in job.calls})
    if job.world_size and len(traced) < job.world_size:
        why += (f" (the trace holds rank(s) {', '.join(map(str, traced[:8]))}{'...' if len(traced) > 8 else ''} of "
                f"{job.world_size}: trace every rank to see that wait)")
    else:
        why += " (collsim trace shows it: each call's spread over ranks, and stragglers)"
    if overlapped_us >= OVERLAP_WORTH_NAMING * rec:
        why += f"; {100 * overlapped_us / rec:.0f}% of it ran beside compute kernels, which slow it too"
    return [f"{head}: {why}; the topology rows time each call as the model does, without that wait"]


def whatif_table(doc: dict) -> str:
    """The configurations as a text table."""
    lines = [f"collsim plan --from-trace: rank {doc['rank']}'s step, {doc['calls']} collective calls"
             + ("" if doc["compute_known"] else " (no GPU compute recorded: every call counted as exposed)"),
             f"{'configuration':<28} {'step ms':>10} {'comm ms':>10} {'exposed ms':>11} {'exposed':>8}"]
    for c in doc["configurations"]:
        name = c["label"] if c["topology"] is None or c["label"] == c["topology"] else f"{c['label']} ({c['topology']})"
        lines.append(f"{name[:28]:<28} {c['step_us'] / 1e3:>10.3f} {c['comm_us'] / 1e3:>10.3f} "
                     f"{c['exposed_comm_us'] / 1e3:>11.3f} {100 * c['exposed_comm_share']:>7.1f}%")
    lines += [f"warning: {w}" for w in doc["warnings"]]
    unmodelled = max(c["unmodelled_us"] for c in doc["configurations"])
    if unmodelled:
        lines.append(f"note: {unmodelled / 1e3:.3f} ms of calls the model does not time kept their measured time")
    lines.append(f"method: {doc['method']}")
    return "\n".join(lines)
