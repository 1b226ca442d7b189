"""Text tables for plans: one step in detail, or several configurations side by side.

Times print in milliseconds, sizes in bytes (nccl-tests' convention) and GB (1e9 B).

>>> from sim.planning import plan_step
>>> p = plan_step({"model": {"params": "1B", "layers": 20}, "compute": {"layer_forward_ms": 2}},
...               "switch:n=8,bandwidth_GBps=450,kind=nvlink")
>>> print(step_table(p).splitlines()[0])
# collsim plan: workload (ddp) on switch:n=8 (8 ranks: tp 1, pp 1, dp 8)
"""
from __future__ import annotations


def _ms(us: float) -> str:
    return f"{us / 1e3:.3f}"


def collective_groups(plan) -> list[dict]:
    """Collectives merged by (phase, collective, group, size), in order of first issue."""
    merged: dict = {}
    for r in plan.rows():
        key = (r["phase"], r["collective"], r["group"], r["nbytes"])
        if key not in merged:
            merged[key] = dict(r, count=0, total_us=0.0)
        merged[key]["count"] += 1
        merged[key]["total_us"] += r["time_us"]
    return list(merged.values())


def _validation_lines(groups: list[dict]) -> list[str]:
    """The footnote of a plan whose collectives the public set does not validate (``collsim simulate``'s
    ``validated``): how many, why the first is not, and the 80% range of the one that takes most of the step."""
    off = [g for g in groups if not g.get("validated", True)]
    if not off:
        return []
    worst = max(off, key=lambda g: g["total_us"])
    lo, hi = (worst.get("call_time_us_range") or [worst["call_time_us"]] * 2)[:2]
    return [f"# ! not validated: {len(off)} of {len(groups)} distinct collectives; the longest of them, {worst['collective']} "
            f"of {worst['nbytes']} B over {worst['group']}, takes {worst['call_time_us']:.2f} us a call, 80% range "
            f"{lo:.2f}..{hi:.2f} us ({worst.get('note', '')}); the step's times are as uncertain (--format json gives each "
            "collective's range)"]


def step_table(plan, steps: int | None = None, detail: bool = False, nccl: str = "") -> str:
    """The plan of one step: its collectives, its times, its bytes, its one-time costs; ``nccl``: the NCCL release
    (and variables) it was timed with, for the header."""
    lay, w = plan.layout, plan.workload
    lines = [f"# collsim plan: {w.name} ({w.parallel.strategy}) on {plan.topology} "
             f"({lay.world} ranks: tp {lay.tp}, pp {lay.pp}, dp {lay.dp}"
             + (f", shard {lay.shard} x {lay.replicas} replicas" if w.parallel.strategy != "ddp" and lay.replicas > 1 else "") + ")"
             + (f", NCCL {nccl}" if nccl else "")]
    for fam, g in plan.groups.items():
        lines.append(f"# group {fam:9s} {g['size']:5d} ranks x {g['count']:4d} groups (rank 0's: {g['rank0']})")
    lines.append("#")
    if detail:
        lines.append(f"# {'start':>10s} {'end':>10s} {'phase':9s} {'collective':14s} {'group':9s} {'size (B)':>12s} "
                     f"{'algorithm':>14s} {'protocol':>8s} {'time (us)':>10s}  name")
        for r in plan.rows():
            lines.append(f"  {_ms(r['start_us']):>10s} {_ms(r['end_us']):>10s} {r['phase']:9s} {r['collective']:14s} "
                         f"{r['group']:9s} {r['nbytes']:>12d} {r['algorithm']:>14s} {r['protocol']:>8s} "
                         f"{r['time_us']:>10.2f}  {r['name']}")
        lines.append("#   start/end in ms from the start of the step")
    else:
        lines.append(f"# {'phase':15s} {'collective':14s} {'group':9s} {'ranks':>14s} {'size (B)':>12s} {'count':>5s} "
                     f"{'algorithm':>14s} {'protocol':>8s} {'each (us)':>10s} {'total (ms)':>10s}")
        for r in collective_groups(plan):
            lines.append(f"  {r['phase']:15s} {r['collective']:14s} {r['group']:9s} {r['ranks']:>14s} {r['nbytes']:>12d} "
                         f"{r['count']:>5d} {r['algorithm']:>14s} {r['protocol']:>8s} {r['time_us']:>10.2f} "
                         f"{_ms(r['total_us']):>10s}")
    s = plan.summary()
    share = s["exposed_comm_share"]
    lines += ["#",
              f"# step                 {_ms(s['step_us']):>12s} ms",
              f"# compute              {_ms(s['compute_us']):>12s} ms",
              *([f"# pipeline bubble      {_ms(s['bubble_us']):>12s} ms"] if s["bubble_us"] else []),
              f"# communication        {_ms(s['comm_us']):>12s} ms  (all collectives, hidden or not)",
              f"# exposed comm         {_ms(s['exposed_comm_us']):>12s} ms  ({share:.2%} of the step: the GPU waits for the network)"]
    by_op = ", ".join(f"{op} {b / 1e9:.3f} GB" for op, b in s["nbytes_by_op"].items())
    lines.append(f"# per rank             {by_op or 'no collectives'} (nccl-tests sizes); "
                 f"ring-equivalent sent {s['bus_bytes_per_rank'] / 1e9:.3f} GB")
    tiers = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in s["tier_bytes"].items())
    left = s["tier_bytes_uncounted_collectives"]
    if left and not tiers:
        tiers = (f"not counted: the flow model timed the {left} collective(s), and it lays out no links "
                 f"(the engine does, where it fits its time budget)")
    elif left:
        tiers += f"; {left} collective(s) timed by the flow model not counted"
    lines.append(f"# wire bytes per step  {tiers or 'none'} (whole cluster, per link tier)")
    lines += _validation_lines(collective_groups(plan))
    ib = plan.init_broadcast
    sync = "DDP's sync of rank 0's parameters" if plan.workload.parallel.strategy == "ddp" else \
        "FSDP's sync of rank 0's parameters, sync_module_states"
    lines.append(f"# initial broadcast    {ib['nbytes'] / 1e9:.3f} GB in {ib['buckets']} bucket(s) over dp, "
                 f"{_ms(ib['time_us'])} ms once ({sync})")
    m = plan.memory_GB
    lines.append(f"# memory per rank      params {m['params']:.2f} GB, grads {m['grads']:.2f} GB, "
                 f"optimizer {m['optimizer']:.2f} GB, total {m['total']:.2f} GB (model states, no activations)")
    if steps:
        g = plan.gpu_hours(steps)
        lines.append(f"# {steps} steps{'':{max(1, 14 - len(str(steps)))}s}{g['gpu_hours']:.4g} GPU-hours, of which communication "
                     f"{g['comm_gpu_hours']:.3g} ({g['comm_share']:.2%}: exposed comm + initial broadcast)")
    return "\n".join(lines)


def compare_table(labelled, steps: int | None = None, nccl: str = "") -> str:
    """Configurations side by side: ``labelled`` is ``[(label, StepPlan), ...]``; ``nccl``: the NCCL release (and
    variables) they were timed with. A configuration whose collectives the public set does not validate is
    marked ``!``, with the plan's own footnote below (the first reason; ``--format json`` has every range)."""
    width = max([len(l) for l, _ in labelled] + [13])
    head = (f"# {'configuration':{width}s} {'step (ms)':>10s} {'compute':>10s} {'comm':>10s} {'exposed':>10s} "
            f"{'exposed %':>9s} {'GB/rank':>8s}")
    if steps:
        head += f" {'GPU-h':>10s} {'comm share':>10s}"
    lines = ["# collsim plan: comparison" + (f" ({steps} steps + initial broadcast)" if steps else "")
             + (f", NCCL {nccl}" if nccl else ""), head]
    notes = []
    for label, p in labelled:
        s = p.summary()
        row = (f"  {label:{width}s} {_ms(s['step_us']):>10s} {_ms(s['compute_us']):>10s} {_ms(s['comm_us']):>10s} "
               f"{_ms(s['exposed_comm_us']):>10s} {s['exposed_comm_share']:>9.2%} {s['bus_bytes_per_rank'] / 1e9:>8.3f}")
        if steps:
            g = p.gpu_hours(steps)
            row += f" {g['gpu_hours']:>10.4g} {g['comm_share']:>10.2%}"
        said = _validation_lines(collective_groups(p))
        if said:
            row += "  !"
            notes.append(said[0].replace("# ! not validated:", f"# ! {label}: not validated:", 1))
        lines.append(row)
    lines.append("# comm: all collectives; exposed: the part compute does not hide; GB/rank: ring-equivalent bytes sent")
    return "\n".join(lines + notes)
