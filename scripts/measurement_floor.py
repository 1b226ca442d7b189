"""How far apart published runs are when the model cannot tell them apart: the floor under any
leave-one-system-out error.

Two cases are *the same question* to collsim's hardware inputs when they describe the same machine (the
topology spec after the preset is built: GPU, GPUs per node, nodes, NICs per node and their speed,
fabric) and run the same collective (with the same algorithm, where the run forced one). Whatever a model does with the machine, it gives both the same
prediction, so if they were measured on different systems, predicting one from a fit on the other costs
about what the two measurements differ by; only the NCCL version and variables (printed with each pair)
can separate them. This script finds every such pair in the public set and reports, per size band
(the bands and error measures of ``collsim validate``: busbw at >= 64 MiB, time at <= 64 KiB and in
between), the median of |other / this - 1| over the sizes both measured (taken both ways).

    python scripts/measurement_floor.py [CASES.json]      # default: sim/data/public_cases.json

docs/accuracy-at-scale.md (the floor) quotes its output. Pairs on the same system (the same cluster with
another NCCL build or other variables) are printed too: they show what the software stack alone moves.
"""
from __future__ import annotations

import itertools
import json
import os
import statistics
import sys

from sim.commands.validate import BW_MIN_BYTES, LAT_MAX_BYTES, PUBLIC_CASES
from sim.presets import load_topology

BANDS = ("small", "mid", "large")
META_KEYS = ("gpu", "gpus_per_node", "nodes", "nics_per_node", "nic_gbps", "intra", "pcie_gen", "p2p")


def band(size: int) -> str:
    return "small" if size <= LAT_MAX_BYTES else "large" if size >= BW_MIN_BYTES else "mid"


def machine_key(case: dict) -> tuple:
    """What the model sees of the case's machine and call (two cases with one key get one prediction)."""
    meta = load_topology(case["topology"]).meta
    fabric = case.get("fabric") or meta.get("fabric") or ""
    return (case.get("collective", "all_reduce"), case.get("algorithm"), int(case.get("gpus_per_process") or 1), fabric,
            *(meta.get(k) for k in META_KEYS))


def discrepancy(a: dict, b: dict) -> dict[str, list[float]]:
    """Per band, |b / a - 1| and |a / b - 1| at every size both cases measured (time below 64 MiB, busbw from it)."""
    ra = {r["size"]: r for r in a["rows"]}
    out: dict[str, list[float]] = {k: [] for k in BANDS}
    for r in b["rows"]:
        s = r["size"]
        if s not in ra:
            continue
        key = "busbw" if band(s) == "large" else "time_us"
        x, y = ra[s].get(key) or 0.0, r.get(key) or 0.0
        if x > 0 and y > 0:
            out[band(s)] += [abs(y / x - 1), abs(x / y - 1)]
    return out


def pairs(cases: list[dict]):
    """Every pair of indistinguishable cases: (a, b, same_system, discrepancy by band)."""
    groups: dict[tuple, list[dict]] = {}
    for c in cases:
        groups.setdefault(machine_key(c), []).append(c)
    for group in groups.values():
        for a, b in itertools.combinations(sorted(group, key=lambda c: c["id"]), 2):
            yield a, b, (a.get("system") or a["id"]) == (b.get("system") or b["id"]), discrepancy(a, b)


def main(argv: list[str]) -> int:
    path = argv[0] if argv else PUBLIC_CASES
    if len(argv) > 1 or not os.path.isfile(path):
        print("usage: python scripts/measurement_floor.py [CASES.json]", file=sys.stderr)
        return 2
    with open(path) as f:
        data = json.load(f)
    cases = data["cases"] if isinstance(data, dict) else data
    pct = lambda xs: f"{100 * statistics.median(xs):.1f}% ({len(xs) // 2})" if xs else "-"
    pooled: dict[bool, dict[str, list[float]]] = {True: {k: [] for k in BANDS}, False: {k: [] for k in BANDS}}
    print("| case | case | systems | NCCL | small time | mid time | busbw |")
    print("|---|---|---|---|---:|---:|---:|")
    for a, b, same, d in pairs(cases):
        if not any(d.values()):
            continue
        for k in BANDS:
            pooled[same][k] += d[k]
        systems = a.get("system") if same else f"{a.get('system')} / {b.get('system')}"
        nccl = " / ".join(str(c.get("nccl_version") or "?") for c in (a, b))
        print(f"| {a['id']} | {b['id']} | {systems}{' (same)' if same else ''} | {nccl} | {pct(d['small'])} | "
              f"{pct(d['mid'])} | {pct(d['large'])} |")
    print()
    print("| pairs (pooled: median over sizes and both directions) | small time | mid time | busbw |")
    print("|---|---:|---:|---:|")
    for same, name in ((False, "different systems, same machine"), (True, "one system, another software stack")):
        print(f"| {name} | {pct(pooled[same]['small'])} | {pct(pooled[same]['mid'])} | {pct(pooled[same]['large'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
