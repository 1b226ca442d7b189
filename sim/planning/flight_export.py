"""A planned step as per-rank collective sequences, and as a flight-recorder workload/scenario.

The flight recorder (:mod:`sim.flight`) replays what each rank calls and finds who hung whom; a plan
already knows what each rank calls, so the same training step feeds both. Every rank runs rank 0's
program on its own groups (the job is SPMD). Pipeline transfers between stages are point-to-point, not
collectives, and are left out.

The flight program keeps the order of calls. A collective that the next compute waits for (a tensor-
parallel all_reduce, an FSDP gather without prefetch) becomes ``wait: true``; a prefetched gather is
issued just before the compute it overlaps and does not block; the optimizer step waits for everything.

>>> from sim.planning import plan_step
>>> p = plan_step({"model": {"params": "100M", "layers": 4}, "parallelism": {"bucket_mb": 100},
...                "compute": {"layer_forward_ms": 1}}, "switch:n=4,bandwidth_GBps=100,kind=nvlink")
>>> seqs = rank_sequences(p)
>>> [(c["op"], c["nbytes"], c["ranks"]) for c in seqs[3]]
[('all_reduce', 104857600, (0, 1, 2, 3)), ('all_reduce', 95142400, (0, 1, 2, 3))]
>>> spec = flight_workload_spec(p)
>>> spec["world_size"], [list(x)[0] for x in spec["program"]][:3]
(4, ['compute_us', 'compute_us', 'compute_us'])
"""
from __future__ import annotations

#: plan dtypes -> the names sim.flight uses
FLIGHT_DTYPES = {"float": "float32", "half": "float16", "fp8": "float8_e4m3fn", "float8": "float8_e4m3fn"}
SKIPPED_FAMILIES = ("pp",)


def _group_containing(plan, family: str, rank: int) -> tuple:
    for g in plan.layout.groups(family):
        if rank in g:
            return g
    return (rank,)


def rank_sequences(plan) -> dict[int, list[dict]]:
    """Rank -> the collectives it calls in one step, in order: ``op``, ``nbytes`` (nccl-tests size),
    ``dtype``, ``group`` (family) and ``ranks`` (that rank's group in the family)."""
    dtype = plan.workload.model.dtype
    calls = [t for t in plan.tasks if t.kind == "comm" and t.lane not in SKIPPED_FAMILIES]
    return {r: [{"op": t.op, "nbytes": t.nbytes, "dtype": dtype, "group": t.lane,
                 "ranks": _group_containing(plan, t.lane, r)} for t in calls]
            for r in range(plan.layout.world)}


def _program(plan) -> list:
    """Rank 0's tasks as flight program items (see the module docstring for the blocking rules)."""
    tasks = plan.tasks
    dtype = FLIGHT_DTYPES.get(plan.workload.model.dtype, plan.workload.model.dtype)
    next_compute = {}
    upcoming = None
    for t in reversed(tasks):
        next_compute[t.id] = upcoming
        if t.kind != "comm":
            upcoming = t
    where: dict[int, int] = {}     # compute task id -> index of its item
    items: list = []
    for t in tasks:
        if t.kind != "comm":
            if t.name == "optimizer step":
                items.append("wait")
            where[t.id] = len(items)
            if t.duration_us > 0:
                items.append({"compute_us": t.duration_us})
            continue
        if t.lane in SKIPPED_FAMILIES:
            continue
        nxt = next_compute[t.id]
        call = {"collective": t.op, "nbytes": t.nbytes, "dtype": dtype, "pg": t.lane,
                "wait": bool(nxt is not None and (t.id, "end") in nxt.deps)}
        starts = [d for d, when in t.deps if when == "start" and d in where]
        if starts:
            # a prefetch, issued when that compute begins: put it in front of the compute, non-blocking
            pos = where[starts[0]]
            call["wait"] = False
            items.insert(pos, call)
            where = {k: (v + 1 if v >= pos else v) for k, v in where.items()}
            continue
        items.append(call)
    items.append("wait")
    return items


def flight_workload_spec(plan, steps: int = 1) -> dict:
    """The plan's step in :func:`sim.flight.rank_workload.from_dict`'s form (a scenario's ``workload:``)."""
    lay = plan.layout
    families = sorted({t.lane for t in plan.tasks if t.kind == "comm" and t.lane not in SKIPPED_FAMILIES})
    return {"world_size": lay.world, "steps": int(steps),
            "process_groups": {f: [list(g) for g in lay.groups(f)] for f in families},
            "program": _program(plan)}


def flight_scenario(plan, faults=(), steps: int = 1, name: str | None = None) -> dict:
    """A flight-recorder scenario (:func:`sim.flight.scenarios.run_scenario`'s input) running the plan's
    step with ``faults`` (e.g. ``[{"kind": "skip", "rank": 2, "call": 5}]``: rank 2 skips a bucket)."""
    return {"name": name or f"{plan.workload.name}-on-{plan.topology}", "workload": flight_workload_spec(plan, steps),
            "faults": list(faults)}


