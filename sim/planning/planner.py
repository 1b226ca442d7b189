"""``plan_step``: one training step of a workload on a topology, every collective simulated.

>>> from sim.planning import plan_step
>>> w = {"model": {"params": "1B", "layers": 20, "dtype": "bfloat16"},
...      "parallelism": {"strategy": "ddp", "bucket_mb": 25}, "compute": {"layer_forward_ms": 2}}
>>> p = plan_step(w, "switch:n=8,bandwidth_GBps=450,kind=nvlink")
>>> p.nbytes_by_op["all_reduce"]            # the gradients, once: 1e9 bf16 parameters
2000000000
>>> round(p.bus_bytes_per_rank / 2e9, 3)    # ring-equivalent bytes sent per rank: 2 (n-1)/n P
1.75
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..collectives import get_collective
from ..errors import CollsimError
from ..prediction.budget import check_plan
from ..presets import load_topology
from .costs import TIERS, CollectiveCosts
from .layout import FAMILIES, Layout
from .schedule import Builder, Task, run_streams
from .step import StepShape, build_step
from .training_workload import Workload, load_workload

OPTIMIZER_BYTES_PER_PARAM = 12  # fp32 master weights + Adam's two moments (the ZeRO paper's K = 12)


@dataclass(frozen=True)
class StepPlan:
    """One simulated training step of rank 0 (every rank does the same on its own groups).

    Times in microseconds: ``step_us`` (first kernel to last), ``compute_us`` (busy compute stream),
    ``bubble_us`` (pipeline fill and drain), ``comm_us`` (sum of all collective times, overlapped or not),
    ``exposed_comm_us = step_us - compute_us - bubble_us`` (time the GPU computes nothing because it
    waits for communication). Bytes: ``nbytes_by_op`` sums nccl-tests sizes of rank 0's collectives;
    ``bus_bytes_per_rank`` is their ring-equivalent volume (nccl-tests' bus factor times the size, e.g.
    2 (n-1)/n S for an all_reduce); ``tier_bytes`` is the wire bytes of the whole cluster per link tier."""

    workload: Workload
    topology: str
    layout: Layout
    tasks: tuple
    times: tuple
    init_broadcast: dict
    memory_GB: dict
    groups: dict
    tier_bytes: dict = field(default_factory=dict)
    uncounted_collectives: int = 0   # collectives whose wire bytes no model laid out (the flow model's)

    # ---- totals -------------------------------------------------------------------------------
    @property
    def step_us(self) -> float:
        return max((e for _, e in self.times), default=0.0)

    @property
    def compute_us(self) -> float:
        return sum(t.duration_us for t in self.tasks if t.kind == "compute")

    @property
    def bubble_us(self) -> float:
        return sum(t.duration_us for t in self.tasks if t.kind == "bubble")

    @property
    def comm_us(self) -> float:
        return sum(t.duration_us for t in self.tasks if t.kind == "comm")

    @property
    def exposed_comm_us(self) -> float:
        return max(0.0, self.step_us - self.compute_us - self.bubble_us)

    @property
    def collectives(self) -> list[Task]:
        return [t for t in self.tasks if t.kind == "comm"]

    @property
    def nbytes_by_op(self) -> dict:
        out: dict = {}
        for t in self.collectives:
            out[t.op] = out.get(t.op, 0) + t.nbytes
        return out

    def bus_bytes_by_family(self) -> dict:
        out: dict = {}
        for t in self.collectives:
            out[t.lane] = out.get(t.lane, 0.0) + get_collective(t.op).bus_factor(len(t.ranks)) * t.nbytes
        return out

    @property
    def bus_bytes_per_rank(self) -> float:
        return sum(self.bus_bytes_by_family().values())

    def gpu_hours(self, steps: int) -> dict:
        """GPU-hours of ``steps`` steps plus the one-time broadcast, and communication's share of them
        (exposed communication: the GPU-hours spent waiting on the network)."""
        world = self.layout.world
        total_us = steps * self.step_us + self.init_broadcast["time_us"]
        comm_us = steps * self.exposed_comm_us + self.init_broadcast["time_us"]
        return {"steps": steps, "gpu_hours": world * total_us / 3.6e9, "comm_gpu_hours": world * comm_us / 3.6e9,
                "comm_share": comm_us / total_us if total_us else 0.0}

    # ---- output ---------------------------------------------------------------------------------
    def rows(self) -> list[dict]:
        """Every collective of the step with its stream, group, size, algorithm and times (us)."""
        out = []
        for t, (s, e) in zip(self.tasks, self.times):
            if t.kind != "comm":
                continue
            out.append({"name": t.name, "phase": t.phase, "collective": t.op, "group": t.lane,
                        "ranks": _ranks_label(t.ranks), "nranks": len(t.ranks), "nbytes": t.nbytes,
                        "algorithm": t.cost.algorithm, "protocol": t.cost.protocol, "time_us": t.duration_us,
                        "start_us": s, "end_us": e, "blocking": t.blocking,
                        # the collective's own 80% range and validation (one call; time_us may be a series')
                        "call_time_us": t.cost.time_us, "call_time_us_range": list(t.cost.time_us_range or ()),
                        "validated": t.cost.validated, **({"note": t.cost.note} if t.cost.note else {})})
        return out

    def summary(self) -> dict:
        return {"step_us": self.step_us, "compute_us": self.compute_us, "bubble_us": self.bubble_us,
                "comm_us": self.comm_us, "exposed_comm_us": self.exposed_comm_us,
                "exposed_comm_share": self.exposed_comm_us / self.step_us if self.step_us else 0.0,
                "collectives": len(self.collectives), "bus_bytes_per_rank": self.bus_bytes_per_rank,
                "nbytes_by_op": self.nbytes_by_op, "tier_bytes": self.tier_bytes,
                "tier_bytes_uncounted_collectives": self.uncounted_collectives}

    def to_dict(self, steps: int | None = None) -> dict:
        lay = self.layout
        d = {"workload": self.workload.name, "topology": self.topology, "world_size": lay.world,
             "strategy": self.workload.parallel.strategy,
             "layout": {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "shard": lay.shard, "replicas": lay.replicas},
             "groups": self.groups, "summary": self.summary(), "init_broadcast": self.init_broadcast,
             "memory_GB_per_rank": self.memory_GB, "collectives": self.rows(),
             "compute": [{"name": t.name, "phase": t.phase, "kind": t.kind, "start_us": s, "end_us": e}
                         for t, (s, e) in zip(self.tasks, self.times) if t.kind != "comm"]}
        if steps:
            d["gpu_hours"] = self.gpu_hours(steps)
        return d


def _ranks_label(ranks) -> str:
    r = list(ranks)
    if len(r) > 2 and all(b - a == r[1] - r[0] for a, b in zip(r, r[1:])):
        step = r[1] - r[0]
        return f"{r[0]}..{r[-1]}" + (f" step {step}" if step != 1 else "")
    return ",".join(map(str, r))


def plan_step(workload, topology=None, *, algorithm: str = "auto", protocol: str = "auto",
              costs: CollectiveCosts | None = None) -> StepPlan:
    """Simulate one training step of ``workload`` (Workload, dict or YAML path) on ``topology`` (spec,
    path or Topology; default: the workload's own ``topology``). ``costs`` may be shared between plans
    on the same topology so identical collectives are simulated once."""
    w = load_workload(workload)
    if topology is None and costs is not None:
        topo = costs.topology
    else:
        if topology is None and not w.topology:
            raise CollsimError(f"workload {w.name!r} names no topology: pass one (--topology dgx-h100) or add topology: to it")
        topo = load_topology(topology if topology is not None else w.topology)
    if costs is None or costs.topology is not topo:
        costs = CollectiveCosts(topo, algorithm, protocol)
    p = w.parallel
    lay = Layout.build(topo.nranks, p.tp, p.pp, p.shard_group)
    m = w.model   # refuse a step too large to lay out before building it (sim.prediction.budget)
    check_plan(w.name, m.layers, p.microbatches, m.nbytes // (p.tp * p.pp), p.bucket_bytes, p.first_bucket_bytes,
               p.strategy, p.tp, p.pp, lay.replicas)
    shape = StepShape.of(w, lay, topo.meta)
    groups = {f: lay.group(f) for f in FAMILIES}
    # every group of a family runs the same collective at the same time: they share links
    family = {f: tuple(lay.groups(f)) for f in FAMILIES}
    b = Builder(lambda op, n, fam: costs.get(op, n, groups[fam], concurrent=family[fam]), groups.__getitem__)
    build_step(w, lay, shape, b)
    tasks = tuple(b.tasks)
    times = run_streams(tasks)
    tiers = {k: 0.0 for k in TIERS}
    uncounted = 0
    for t in tasks:
        if t.kind == "comm":
            uncounted += not t.cost.counted
            many = len(family[t.lane])  # every group of the family runs the same collective
            for k, v in t.cost.tier_bytes.items():
                tiers[k] = tiers.get(k, 0.0) + v * many
    return StepPlan(w, topo.name, lay, tasks, times, _init_broadcast(w, lay, shape, costs, family["dp"]),
                    _memory(w, lay), _group_table(lay, groups, tasks), {k: v for k, v in tiers.items() if v}, uncounted)


def _group_table(lay: Layout, groups: dict, tasks) -> dict:
    """The process-group families the step uses: size, how many groups, rank 0's members."""
    used = {t.lane for t in tasks if t.kind == "comm"} | ({"dp"} if lay.dp > 1 else set())
    return {f: {"size": lay.size(f), "count": len(lay.groups(f)), "rank0": _ranks_label(groups[f])}
            for f in FAMILIES if f in used}


def _init_broadcast(w: Workload, lay: Layout, shape: StepShape, costs: CollectiveCosts, dp_groups) -> dict:
    """DDP (and FSDP's sync_module_states) broadcast rank 0's parameters to the data-parallel group once,
    at construction, in buckets of ``broadcast_bucket_mb`` (torch: 250 MiB)."""
    total = sum(shape.layer_nbytes)
    cap = max(shape.elem, int(w.parallel.broadcast_bucket_mb * (1 << 20)) // shape.elem * shape.elem)
    full, rest = divmod(total, cap)
    time_us = 0.0
    group = dp_groups[0]
    if len(group) > 1:
        # the buckets go back to back on one stream: the first pays a whole call (the chain's fill), each later one
        # a period, as nccl-tests' loop measures it (a bucket's calls overlap down the chain)
        whole = costs.get("broadcast", cap, group, concurrent=dp_groups) if full else None
        last = costs.get("broadcast", rest, group, concurrent=dp_groups) if rest else None
        if whole is not None:
            time_us = whole.series_us(full) + (last.time_us if last is not None else 0.0)
        elif last is not None:
            time_us = last.series_us(1)
    return {"nbytes": total, "buckets": full + (1 if rest else 0), "time_us": time_us}


def _memory(w: Workload, lay: Layout) -> dict:
    """Model-state memory per rank in GB (1e9 B): parameters, gradients, optimizer state, as the ZeRO
    paper counts them (activations not included)."""
    params = math.ceil(w.model.params / (lay.tp * lay.pp))
    s = w.parallel.strategy
    shard = lay.shard
    elem = w.model.elem_bytes
    p_b = params * elem / (shard if s == "zero3" else 1)
    g_b = params * elem / (shard if s in ("zero2", "zero3") else 1)
    o_b = params * OPTIMIZER_BYTES_PER_PARAM / (shard if s != "ddp" else 1)
    return {"params": p_b / 1e9, "grads": g_b / 1e9, "optimizer": o_b / 1e9, "total": (p_b + g_b + o_b) / 1e9}
