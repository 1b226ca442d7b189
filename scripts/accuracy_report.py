"""Markdown tables of the out-of-sample accuracy, generated from `collsim validate` JSON (never typed).

    collsim validate --cross-validate --by system --format json > loso.json
    collsim validate --cross-validate --by case --format json > looc.json
    python scripts/accuracy_report.py loso.json [looc.json]

Prints: the pooled figures of each run, the per-case table of the leave-one-system-out run (busbw for
sizes >= 64 MiB, time for small <= 64 KiB and mid sizes, coverage of the 80% ranges), and the errors by
fabric and node count (medians of the cases' medians). docs/nccl-model.md quotes its output.
"""
from __future__ import annotations

import json
import statistics
import sys


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def summary(name: str, d: dict) -> str:
    cv = d["cross_validated"]
    return (f"| {name} | {cv['bw_points']} / {cv['lat_points']} / {cv['mid_points']} | **{pct(cv['bw_median'])}** | "
            f"**{pct(cv['lat_median'])}** | **{pct(cv['mid_median'])}** | {pct(cv.get('coverage'))} | "
            f"{cv['worst_bw_case']} ({pct(cv['worst_bw_median'])}) |")


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python scripts/accuracy_report.py LOSO.json [LOOC.json]", file=sys.stderr)
        return 2
    runs = [json.load(open(p)) for p in argv]
    print("| left out | rows busbw / small / mid | busbw | small time | mid time | 80% coverage | worst case (busbw) |")
    print("|---|---|---|---|---|---|---|")
    for name, d in zip(("one system", "one case"), runs):
        print(summary(name, d))
    cases = runs[0]["cross_validated_cases"]
    print()
    print("| case | system | fabric | nodes | GPUs | NCCL | busbw | small time | mid time | coverage |")
    print("|---|---|---|---:|---:|---|---:|---:|---:|---:|")
    for c in sorted(cases, key=lambda c: (c["system"], c["nranks"], c["id"])):
        print(f"| {c['id']} | {c['system']} | {c.get('fabric', '')} | {c.get('nodes', '')} | {c['nranks']} | "
              f"{c.get('nccl_version', '')} | {pct(c['bw_median'])} | {pct(c['lat_median'])} | {pct(c['mid_median'])} | "
              f"{pct(c.get('coverage'))} |")
    print()
    print("| fabric | nodes | cases | busbw | small time | mid time | coverage |")
    print("|---|---|---:|---:|---:|---:|---:|")
    groups: dict = {}
    for c in cases:
        n = c.get("nodes") or 1
        bucket = "1" if n == 1 else "2" if n == 2 else "3-16" if n <= 16 else "17-64" if n <= 64 else "65+"
        groups.setdefault((c.get("fabric", ""), bucket), []).append(c)
    med = lambda xs: statistics.median(xs) if xs else None
    for (fabric, bucket), cs in sorted(groups.items(), key=lambda kv: (kv[0][0], ("1", "2", "3-16", "17-64", "65+").index(kv[0][1]))):
        vals = {k: med([c[k] for c in cs if c.get(k) is not None]) for k in ("bw_median", "lat_median", "mid_median", "coverage")}
        print(f"| {fabric} | {bucket} | {len(cs)} | {pct(vals['bw_median'])} | {pct(vals['lat_median'])} | "
              f"{pct(vals['mid_median'])} | {pct(vals['coverage'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
