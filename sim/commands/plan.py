"""``collsim plan``: one training step of a workload on a cluster: collectives, overlap, exposed time.

    collsim plan examples/workloads/ddp-1b.yaml --topology dgx-h100
    collsim plan examples/workloads/fsdp-8b.yaml --topology dgx-h100:nodes=4 --vs dgx-a100:nodes=4 --steps 10000
    collsim plan examples/workloads/ddp-1b.yaml --topology dgx-h100:nodes=2 --sweep nics_per_node=4,8 --plot t.png
    collsim plan --from-trace traces/ --topology dgx-a100 --vs dgx-h100   # a real step's communication
"""
from __future__ import annotations

from ..errors import CollsimError
from ..nccl.config import use
from ..planning import plan_step
from ..planning.cluster_whatif import variants
from ..planning.costs import CollectiveCosts
from ..planning.plan_report import compare_table, step_table
from ..planning.subtopo import routing_refusal
from ..planning.training_workload import load_workload
from ..presets import load_topology
from .common import check_output_path, json_text
from .simulate import add_nccl_args, nccl_config_from_args


def register(sub) -> None:
    p = sub.add_parser("plan", help="simulate one training step (DDP, ZeRO/FSDP, TP, PP) on a topology",
                       description="Simulate one training step of a workload: every collective with its group, size, "
                                   "algorithm and time, its overlap with compute, the exposed communication, bytes per "
                                   "link tier; compare clusters (--vs) or sweep a parameter (--sweep).")
    p.add_argument("workload", nargs="?", help="workload .yaml file (see examples/workloads/)")
    p.add_argument("--from-trace", action="append", default=[], metavar="PATH",
                   help="take the workload from a real step instead: profiler trace files or folders (repeatable); "
                        "its communication is timed on --topology and each --vs (see docs/traces.md)")
    p.add_argument("--topology", "-t", default=None, help="preset spec or .yaml/.json file (default: the workload's topology)")
    p.add_argument("--vs", action="append", default=[], metavar="SPEC", help="another topology to compare (repeatable)")
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2",
                   help="vary a topology parameter (nics_per_node, nvls, sharp, nodes...) or a workload parameter "
                        "(bucket_mb, shard_group, tp, mfu...); repeatable (all combinations)")
    p.add_argument("--steps", type=int, default=None, help="also report GPU-hours and communication's share for N steps")
    p.add_argument("--algorithm", "-a", default="auto", help="collective algorithm (default auto: NCCL-style choice)")
    p.add_argument("--protocol", "-p", default="auto", help="auto, LL, LL128, Simple or ideal")
    p.add_argument("--format", default="table", choices=("table", "json"))
    p.add_argument("--detail", action="store_true", help="list every collective with its start and end")
    p.add_argument("--plot", metavar="FILE.png", help="write a timeline figure (compute and communication lanes)")
    add_nccl_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.from_trace:
        return _run_from_trace(args)
    if not args.workload:
        raise CollsimError("give a workload .yaml file (see examples/workloads/) or --from-trace TRACE")
    if args.steps is not None and args.steps < 1:
        raise CollsimError(f"--steps {args.steps} must be at least 1")
    check_output_path(args.plot, "--plot", (".png", ".pdf", ".svg"))
    w = load_workload(args.workload)
    topology = args.topology or w.topology
    if not topology:
        raise CollsimError(f"workload {w.name!r} names no topology: pass --topology SPEC (e.g. dgx-h100)")
    configs = variants(w, topology, vs=args.vs, sweeps=args.sweep)
    topologies = {}
    for label, _, spec in configs:   # every configuration checked before any is planned: a sweep loses no row
        key = spec if isinstance(spec, str) else id(spec)
        topologies[key] = topologies.get(key) or load_topology(spec)
        why = routing_refusal(topologies[key])
        if why:
            raise CollsimError(why if len(configs) == 1 else f"{label}: {why}; or drop it from --sweep/--vs")
    cfg = nccl_config_from_args(args)
    costs: dict = {}
    labelled = []
    with use(cfg):   # every collective of the step timed with the NCCL release and variables asked for
        for label, wl, spec in configs:
            key = spec if isinstance(spec, str) else id(spec)
            if key not in costs:
                costs[key] = CollectiveCosts(topologies[key], args.algorithm, args.protocol)
            labelled.append((label, plan_step(wl, costs=costs[key])))
    single = len(labelled) == 1
    nccl = cfg.version + "".join(f" {k}={v}" for k, v in cfg.env)
    if args.format == "json":
        if single:
            out = labelled[0][1].to_dict(args.steps)
        else:
            out = {"configurations": [{"label": label, "topology": p.topology, "summary": p.summary(),
                                       **({"gpu_hours": p.gpu_hours(args.steps)} if args.steps else {})}
                                      for label, p in labelled],
                   "plans": [p.to_dict(args.steps) for _, p in labelled]}
        out = {"nccl_version": cfg.version, "nccl_env": dict(cfg.env), "nccl_env_ignored": list(cfg.ignored), **out}
        print(json_text(out, indent=1))
    else:
        print(step_table(labelled[0][1], args.steps, args.detail, nccl=nccl) if single
              else compare_table(labelled, args.steps, nccl=nccl))
    if args.plot:
        from ..planning.plot import plot_plans
        plot_plans(labelled, args.plot, title=f"collsim plan: {w.name}")
    return 0


def _run_from_trace(args) -> int:
    """``--from-trace``: the traced step's communication on --topology and each --vs."""
    from ..evidence.load import read_job
    from ..evidence.trace_whatif import trace_step, whatif_table
    if args.workload:
        raise CollsimError("give either a workload file or --from-trace TRACE, not both")
    for flag, value in (("--sweep", args.sweep), ("--steps", args.steps), ("--plot", args.plot), ("--detail", args.detail)):
        if value:
            raise CollsimError(f"{flag} is not available with --from-trace (a traced step has no model parameters to vary)")
    if not args.topology:
        raise CollsimError("--from-trace needs --topology SPEC: the cluster to time the traced step on")
    job = read_job(args.from_trace)
    with use(nccl_config_from_args(args)):
        doc = trace_step(job, [(spec, load_topology(spec)) for spec in [args.topology, *args.vs]], args.algorithm, args.protocol)
    print(json_text(doc, indent=1) if args.format == "json" else whatif_table(doc))
    return 0
