#!/usr/bin/env python3
"""Signed error of the model on the public cases, by case, node count and size range (docs/accuracy-at-scale.md).

    PYTHONPATH=. python scripts/accuracy_at_scale.py                      # every public case (slow: 2,160-rank all_to_all)
    PYTHONPATH=. python scripts/accuracy_at_scale.py --min-ranks 128 --json rows.json
    PYTHONPATH=. python scripts/accuracy_at_scale.py --from rows.json     # tables again from saved rows, no runs

Errors are signed, predicted/measured - 1: a time error below 0 (or a busbw error above 0) means the model
is too fast. Size ranges as ``collsim validate``: small <= 64 KiB, large >= 64 MiB, mid in between. The
model is scored with its in-sample constants (sim.nccl.calibration.DEFAULT) and the pins each case carries;
the cases at >= 128 GPUs were never fitted on, so their errors there are out of sample.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

SMALL, LARGE = 64 << 10, 64 << 20


def size_range(nbytes: int) -> str:
    return "small" if nbytes <= SMALL else "large" if nbytes >= LARGE else "mid"


def score(ids: set[str] | None, min_ranks: int) -> dict:
    from sim.commands.validate import load_cases, score_case
    out = {}
    for c in load_cases(None):
        if (ids and c["id"] not in ids) or c["nranks"] < min_ranks:
            continue
        t0 = time.perf_counter()
        s = score_case(c)
        out[c["id"]] = {k: c.get(k) for k in ("system", "nranks", "fabric", "collective", "nccl_version", "topology")}
        out[c["id"]].update(rows=s["rows"], seconds=round(time.perf_counter() - t0, 1))
        print(f"scored {c['id']} in {out[c['id']]['seconds']} s", file=sys.stderr, flush=True)
    return out


def errors(rows: list[dict]) -> dict:
    """Median signed time error per size range, and of busbw over the large sizes."""
    e: dict = {"small": [], "mid": [], "large": [], "busbw": []}
    for r in rows:
        e[size_range(r["size"])].append(r["pred_time_us"] / r["time_us"] - 1)
        if r["size"] >= LARGE and r.get("busbw", 0) > 0:
            e["busbw"].append(r["pred_busbw"] / r["busbw"] - 1)
    return {k: (statistics.median(v) if v else None) for k, v in e.items()}


def nodes_of(case: dict) -> int:
    from sim.presets import load_topology
    return load_topology(case["topology"]).meta.get("nodes") or 1


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:+.0%}"


def tables(scored: dict) -> str:
    lines = ["| case | system | fabric | collective | nodes | GPUs | NCCL | small time | mid time | large time | large busbw | NCCL algorithm/protocol modelled |",
             "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
    groups: dict = {}
    for cid, c in sorted(scored.items(), key=lambda kv: (kv[1]["fabric"] or "", kv[1]["nranks"], kv[0])):
        e, n = errors(c["rows"]), c.get("nodes") or nodes_of(c)
        chosen: list[str] = []
        for r in c["rows"]:
            a = f"{r['algorithm']}/{r['protocol']}"
            if not chosen or chosen[-1] != a:
                chosen.append(a)
        lines.append(f"| {cid} | {c['system']} | {c['fabric'] or 'NVLink only'} | {c['collective']} | {n} | {c['nranks']} | "
                     f"{c['nccl_version'] or '-'} | {fmt(e['small'])} | {fmt(e['mid'])} | {fmt(e['large'])} | {fmt(e['busbw'])} | "
                     f"{' > '.join(chosen)} |")
        bucket = "1" if n == 1 else "2" if n == 2 else "3-16" if n <= 16 else "17-64" if n <= 64 else "65+"
        g = groups.setdefault((c["fabric"] or "NVLink only", bucket), {"cases": 0, "small": [], "mid": [], "large": [], "busbw": []})
        g["cases"] += 1
        for r in c["rows"]:
            g[size_range(r["size"])].append(r["pred_time_us"] / r["time_us"] - 1)
            if r["size"] >= LARGE and r.get("busbw", 0) > 0:
                g["busbw"].append(r["pred_busbw"] / r["busbw"] - 1)
    lines += ["", "| fabric | nodes | cases | small time (rows) | mid time (rows) | large time (rows) | large busbw |",
              "|---|---|---:|---:|---:|---:|---:|"]
    order = ["1", "2", "3-16", "17-64", "65+"]
    for (fab, bucket), g in sorted(groups.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
        cell = {k: f"{fmt(statistics.median(g[k]) if g[k] else None)} ({len(g[k])})" for k in ("small", "mid", "large")}
        lines.append(f"| {fab} | {bucket} | {g['cases']} | {cell['small']} | {cell['mid']} | {cell['large']} | "
                     f"{fmt(statistics.median(g['busbw']) if g['busbw'] else None)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", help="only this case id (repeatable)")
    ap.add_argument("--min-ranks", type=int, default=0, help="only cases with at least this many ranks")
    ap.add_argument("--json", help="also write the scored rows here")
    ap.add_argument("--from", dest="from_json", help="tables from rows saved with --json (no runs)")
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            scored = json.load(f)
    else:
        scored = score(set(a.case) if a.case else None, a.min_ranks)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(scored, f)
    print(tables(scored))
    return 0


if __name__ == "__main__":
    sys.exit(main())
