"""``collsim demo``: the end-to-end story on whatever machine runs it.

1. Simulate all_reduce on the built-in default topology with every algorithm, so the ring/tree
   crossover is visible. 2. Run a real collective: NCCL on GPUs if present, else gloo with a few local
   processes (needs torch: ``pip install torch==2.13.0`` for the CPU build).
"""
from __future__ import annotations

import importlib.util
import sys

from .common import DEFAULT_TOPOLOGY


def register(sub) -> None:
    p = sub.add_parser("demo", help="simulate on a default topology, then measure for real (gloo or NCCL)")
    p.add_argument("--topology", default=None, help="topology to simulate (default: a DGX H100 if built in, else ring:n=8)")
    p.add_argument("--nprocs", type=int, default=2, help="local processes for the real gloo run")
    p.add_argument("--no-real", action="store_true", help="skip the real run")
    p.add_argument("--report", metavar="DIR", default=None, help="write the prediction-vs-measurement report here")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..presets import presets
    from .common import check_output_dir
    check_output_dir(args.report, "--report")  # before minutes of work: an existing file is not a folder
    from . import simulate as sim_cmd
    topo = args.topology or ("dgx-h100" if "dgx-h100" in presets() else DEFAULT_TOPOLOGY)
    print(f"== 1. Simulated: all_reduce on {topo}, every algorithm (the fastest is marked) ==")
    # Parse through the real CLI so the demo's arguments can never drift from `collsim simulate`'s.
    from ..cli import build_parser
    ns = build_parser().parse_args(["simulate", "--topology", topo, "--algorithm", "all", "-b", "8", "-e", "256M", "-f", "32"])
    sim_cmd.run(ns)
    sys.stdout.flush()
    if args.no_real:
        return 0
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("real.measure.demo_run") is None:
        print("\n(real run skipped: install torch, e.g. `pip install torch==2.13.0`, to measure on this machine)")
        return 0
    from real.measure.demo_run import run_real_demo
    return run_real_demo(nprocs=args.nprocs, report=args.report)

