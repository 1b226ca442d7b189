"""The residual table behind every predicted range, and the honesty of those ranges (coverage).

``collsim validate --cross-validate --by system`` scores each public case with the constants refitted
without its system; :func:`residual_rows` turns those out-of-sample predictions into the rows of
:data:`sim.prediction.intervals.RESIDUALS` (``--write-intervals`` writes them), and :func:`coverage` measures the
share of measured rows inside their 80% range when each case's range comes from the residuals of the
*other* systems only (the range a user would have got before that system was measured).
"""
from __future__ import annotations

import json
import math
import os

from ..io.safe_io import check_output
from ..prediction.intervals import RESIDUALS, band, interval, residual_row


def residual_rows(scores: list[dict]) -> list[dict]:
    """One row per measured size of every (out-of-sample) score: its system, regime, band and
    ``log(measured time / predicted time)``."""
    out = []
    for s in scores:
        for r in s["rows"]:
            if r["time_us"] > 0 and r["pred_time_us"] > 0:
                out.append({"system": s["system"], "case": s["id"], "fabric": s["fabric"], "nodes": s["nodes"],
                            "domain": s.get("domain", "node"), "collective": s.get("collective", ""),
                            "band": band(r["size"]), "algorithm": r.get("algorithm", ""),
                            "log_ratio": round(math.log(r["time_us"] / r["pred_time_us"]), 4)})
    return out


def coverage(scores: list[dict], rows: list[dict], exclude_own: bool = True) -> tuple[float | None, dict]:
    """(share of measured rows inside their 80% range, {case id: its share}); each case's ranges come
    from the residuals of the other systems only (``exclude_own``; else from all rows: in sample)."""
    table = tuple(residual_row(r) for r in rows)
    inside = total = 0
    per_case = {}
    for s in scores:
        hits = n = 0
        for r in s["rows"]:
            if r["time_us"] <= 0 or r["pred_time_us"] <= 0:
                continue
            iv = interval(r["pred_time_us"], r["pred_busbw"], r["size"],
                          where=(s["fabric"], s["nodes"], s.get("domain", "node")),
                          exclude_system=s["system"] if exclude_own else None, rows=table,
                          collective=s.get("collective"), algorithm=r.get("algorithm"))
            lo, hi = iv.time_us_range
            if exclude_own:
                r["time_us_range"] = [lo, hi]   # kept on the scored row: validate's JSON and the plots show it
            hits += lo <= r["time_us"] <= hi
            n += 1
        per_case[s["id"]] = hits / n if n else None
        inside, total = inside + hits, total + n
    return (inside / total if total else None), per_case


def write_residuals(rows: list[dict], path: str = RESIDUALS, by: str = "system") -> str:
    """Write the residual table (JSON) to ``path``; returns the path."""
    check_output(path, "--write-intervals")
    payload = {"generated_by": f"collsim validate --cross-validate --by {by} --write-intervals",
               "about": "out-of-sample residuals log(measured/predicted time) of the public cases; see sim/prediction/intervals.py",
               "rows": rows}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=0)
        f.write("\n")
    os.replace(tmp, path)
    return path


__all__ = ["coverage", "residual_rows", "write_residuals"]
