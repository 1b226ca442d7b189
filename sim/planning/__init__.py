"""Training-step planning: what DDP, ZeRO/FSDP, tensor and pipeline parallelism cost on a cluster.

A :class:`~sim.planning.training_workload.Workload` (model, parallelism, compute speed) becomes one step of tasks on
compute and communication streams (:mod:`sim.planning.schedule`); every collective is simulated with
``sim.simulate`` on its process group's sub-topology (:mod:`sim.planning.subtopo`), and the streams give the
step time and the communication the compute does not hide.

>>> from sim.planning import plan_step
>>> p = plan_step({"model": {"params": "1B", "layers": 20}, "parallelism": {"strategy": "fsdp"},
...                "compute": {"layer_forward_ms": 2}}, "switch:n=8,bandwidth_GBps=450,kind=nvlink")
>>> round(p.bus_bytes_per_rank / 2e9, 3)      # 3 (n-1)/n of the parameter bytes
2.625
"""
from .costs import CollectiveCost, CollectiveCosts
from .layout import Layout
from .planner import StepPlan, plan_step
from .schedule import Task, run_streams
from .subtopo import sub_topology
from .training_workload import Compute, Model, Parallel, Workload, from_dict, load_workload

__all__ = ["CollectiveCost", "CollectiveCosts", "Layout", "StepPlan", "plan_step", "Task", "run_streams",
           "sub_topology", "Compute", "Model", "Parallel", "Workload", "from_dict", "load_workload"]
