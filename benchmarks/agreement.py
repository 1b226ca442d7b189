"""Large-scale (flow) model against the engine where both run: 64 to 4,096 GPUs on dgx-h100 clusters.

    python benchmarks/agreement.py                      # the table of docs/performance.md (about 10 min)
    python benchmarks/agreement.py --gpus 64,128 --quick

Each row runs ``sim.simulate`` twice, ``model="engine"`` and ``model="flow"``, for the algorithm and
protocol NCCL's tuner picks at that size (and ring), and prints both times, the difference and the wall
time of each. The engine is run with its defaults (``sim.nccl.execution.OPS_BUDGET`` ops, then steady-state
extrapolation); ``--engine-budget`` raises that budget to see how far the engine's own extrapolation moves.
"""
from __future__ import annotations

import argparse
import sys
import time

CASES = (  # (label, spec suffix, collective, algorithm, protocol, size)
    ("nvls_tree/Simple 1 GiB", "", "all_reduce", "nvls_tree", "Simple", 1 << 30),
    ("nvls_tree/Simple 64 MiB", "", "all_reduce", "nvls_tree", "Simple", 64 << 20),
    ("tree/LL128 8 MiB", "", "all_reduce", "tree", "LL128", 8 << 20),
    ("tree/LL 64 KiB", "", "all_reduce", "tree", "LL", 64 << 10),
    ("tree/Simple 1 GiB", "", "all_reduce", "tree", "Simple", 1 << 30),
    ("ring/LL128 1 GiB", "", "all_reduce", "ring", "LL128", 1 << 30),
    ("ring/LL128 all_gather 1 GiB", "", "all_gather", "ring", "LL128", 1 << 30),
    ("collnet_direct/Simple 1 GiB (sharp=1)", ",sharp=1", "all_reduce", "collnet_direct", "Simple", 1 << 30),
    ("collnet_chain/Simple 1 GiB (sharp=1)", ",sharp=1", "all_reduce", "collnet_chain", "Simple", 1 << 30),
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", default="64,128,256,512,1024,4096")
    ap.add_argument("--cases", default=None, help="comma-separated case numbers (default all)")
    ap.add_argument("--engine-budget", type=int, default=None, help="sim.nccl.execution.OPS_BUDGET for the engine runs")
    ap.add_argument("--max-engine-gpus", type=int, default=4096, help="skip the engine above this many GPUs")
    args = ap.parse_args(argv)
    import sim
    import sim.nccl.execution as nccl_run
    if args.engine_budget:
        nccl_run.OPS_BUDGET = args.engine_budget
    picked = [CASES[int(i)] for i in args.cases.split(",")] if args.cases else CASES
    print("| case | GPUs | engine (us) | flow (us) | flow / engine - 1 | engine wall (s) | flow wall (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, extra, coll, algo, proto, size in picked:
        for g in (int(x) for x in args.gpus.split(",")):
            spec = f"dgx-h100:nodes={g // 8}{extra}"
            t = time.perf_counter()
            f = sim.simulate(coll, size, spec, algo, proto, model="flow")
            tf = time.perf_counter() - t
            if g > args.max_engine_gpus:
                print(f"| {label} | {g} | – | {f.time_us:.1f} | – | – | {tf:.2f} |", flush=True)
                continue
            t = time.perf_counter()
            e = sim.simulate(coll, size, spec, algo, proto, model="engine", max_memory="100G")
            te = time.perf_counter() - t
            print(f"| {label} | {g} | {e.time_us:.1f} | {f.time_us:.1f} | {f.time_us / e.time_us - 1:+.2%} | {te:.1f} | {tf:.2f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
