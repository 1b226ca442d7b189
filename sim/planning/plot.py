"""Timeline figure of planned steps: a compute lane and one lane per process-group stream, per plan.

Bars are kernels of rank 0 (every rank of a group looks the same); colours name the collective, hatched
grey is the pipeline bubble, and a red strip under the compute lane marks where compute waits on the
network (the exposed communication).

>>> from sim.planning import plan_step
>>> p = plan_step({"model": {"params": "1B", "layers": 4}, "compute": {"layer_forward_ms": 2}},
...               "switch:n=4,bandwidth_GBps=450,kind=nvlink")
>>> fig = plot_plans([("ddp", p)])
>>> len(fig.axes)
1
"""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

COLORS = {"forward": "#4c72b0", "backward": "#55a868", "optimizer": "#8172b2", "bubble": "#bbbbbb",
          "all_reduce": "#dd8452", "all_gather": "#c44e52", "reduce_scatter": "#937860",
          "broadcast": "#da8bc3", "reduce": "#8c8c8c", "all_to_all": "#ccb974"}


def idle_intervals(plan) -> list[tuple[float, float]]:
    """Gaps (us) in the compute stream between the step's start and its end: exposed communication."""
    busy = sorted((s, e) for t, (s, e) in zip(plan.tasks, plan.times) if t.kind != "comm" and e > s)
    gaps, cursor = [], 0.0
    for s, e in busy:
        if s > cursor + 1e-9:
            gaps.append((cursor, s))
        cursor = max(cursor, e)
    if plan.step_us > cursor + 1e-9:
        gaps.append((cursor, plan.step_us))
    return gaps


def plot_plans(labelled, path: str | None = None, title: str | None = None) -> Figure:
    """One panel per ``(label, StepPlan)``, sharing the time axis (ms). Saves to ``path`` if given."""
    n = len(labelled)
    lanes_total = sum(1 + len(p.groups) for _, p in labelled)
    fig = Figure(figsize=(12, 1.0 + 0.55 * lanes_total + 0.6 * n))
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, plan) in zip(axes, labelled):
        lanes = ["compute"] + [f for f in plan.groups if any(t.lane == f for t in plan.tasks)]
        ypos = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
        bars: dict = {}
        for t, (s, e) in zip(plan.tasks, plan.times):
            if e <= s:
                continue
            key = (t.lane, t.op if t.kind == "comm" else ("bubble" if t.kind == "bubble" else t.phase))
            bars.setdefault(key, []).append((s / 1e3, (e - s) / 1e3))
        for (lane, what), spans in bars.items():
            color = COLORS.get(what, "#999999")
            # white seams between layers on the compute lane unless the bars are too many to see them;
            # none on collectives, which are often thin
            seams = lane == "compute" and len(spans) <= 120
            ax.broken_barh(spans, (ypos[lane] - 0.35, 0.7), facecolors=color,
                           edgecolor="white" if seams else color, linewidth=0.3,
                           hatch="//" if what == "bubble" else None)
        gaps = [(s / 1e3, (e - s) / 1e3) for s, e in idle_intervals(plan)]
        if gaps:
            ax.broken_barh(gaps, (ypos["compute"] - 0.5, 0.12), facecolors="#d62728")
        ax.set_yticks([ypos[l] for l in lanes])
        ax.set_yticklabels([l if l == "compute" else f"{l} [{plan.groups[l]['rank0']}]" for l in lanes], fontsize=8)
        ax.set_ylim(-0.7, len(lanes) - 0.3)
        s = plan.summary()
        ax.set_title(f"{label}: step {s['step_us'] / 1e3:.2f} ms, exposed comm {s['exposed_comm_us'] / 1e3:.2f} ms "
                     f"({s['exposed_comm_share']:.1%})", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("time in the step (ms), rank 0")
    used = {what for _, p in labelled for t in p.tasks
            for what in [t.op if t.kind == "comm" else ("bubble" if t.kind == "bubble" else t.phase)]}
    handles = [Patch(facecolor=c, label=k) for k, c in COLORS.items() if k in used]
    handles.append(Patch(facecolor="#d62728", label="compute waits (exposed comm)"))
    fig.legend(handles=handles, loc="upper right", fontsize=8, ncol=min(len(handles), 5))
    if title:
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    if path:
        from ..io.safe_io import output_path
        with output_path(path, "--plot") as tmp:  # atomic; never over an input, never through a link
            fig.savefig(tmp, dpi=120)
    return fig
