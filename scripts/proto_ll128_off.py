#!/usr/bin/env python3
"""Prototype (docs/accuracy-at-scale.md, mechanism 1a): NCCL's LL128 enable rule on the GPU-NIC path.

NCCL enables LL128 across nodes only when the GPU-to-NIC path is at most PXB (PXN on Hopper and later):
``src/graph/tuning.cc`` v2.21.5-1 line 308. On Polaris (NICs behind the CPU host bridge, PHB) NCCL therefore
chooses among LL and Simple only. This scores cases with the model restricted to those two protocols (the
faster of the model's LL and Simple predictions, as NCCL's tuner takes the faster) beside the model as it
is, signed median time error per size range. Nothing is fitted: the rule is NCCL's.

    PYTHONPATH=. python scripts/proto_ll128_off.py C6-2 C6-8 C6-256-AR-221
"""
from __future__ import annotations

import statistics
import sys

SMALL, LARGE = 64 << 10, 64 << 20


def main(argv=None) -> int:
    ids = (argv if argv is not None else sys.argv[1:]) or ["C6-2", "C6-8", "C6-2-AG", "C6-8-AG"]
    from sim import api
    from sim.collectives import get_collective
    from sim.commands.validate import load_cases
    from sim.nccl.machine import with_gpus_per_process
    from sim.presets import load_topology
    rng = lambda s: "small" if s <= SMALL else "large" if s >= LARGE else "mid"
    print("| case | ranks | LL/Simple only: small / mid / large time | model as is: small / mid / large time |")
    print("|---|---:|---|---|")
    for c in load_cases(None):
        if c["id"] not in ids:
            continue
        topo = with_gpus_per_process(load_topology(c["topology"]), c.get("gpus_per_process"))
        coll = get_collective(c["collective"])
        off: dict = {"small": [], "mid": [], "large": []}
        now: dict = {"small": [], "mid": [], "large": []}
        for r in c["rows"]:
            t_off = min(api.simulate(coll, r["size"], topo, "auto", p).time_us for p in ("LL", "Simple"))
            t_now = api.simulate(coll, r["size"], topo, "auto", "auto").time_us
            off[rng(r["size"])].append(t_off / r["time_us"] - 1)
            now[rng(r["size"])].append(t_now / r["time_us"] - 1)
        f = lambda v: f"{statistics.median(v):+.0%}" if v else "n/a"
        print(f"| {c['id']} | {c['nranks']} | {' / '.join(f(off[k]) for k in ('small', 'mid', 'large'))} | "
              f"{' / '.join(f(now[k]) for k in ('small', 'mid', 'large'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
