#!/usr/bin/env python3
"""Prototype (docs/accuracy-at-scale.md, mechanism 1): a ring step over the fabric has a fixed cost per protocol.

A ring all_gather of S bytes over n ranks is n-1 steps, each moving S/n bytes per rank. If every step costs a
fixed ``s_p`` (protocol p: LL or Simple; LL128 is off where the NICs sit beyond PXB, as on Polaris) plus its
bytes at a per-rank rate ``B_p``, then

    T_p(S) = (n - 1) * (s_p + (S / n) / B_p),        T(S) = min(T_LL, T_Simple)   (NCCL takes the faster)

Four numbers per fabric, none depending on n: ``s_LL, B_LL`` fitted on the small sizes (<= 64 KiB, LL) and
``s_Simple, B_Simple`` on the large ones (>= 8 MiB, Simple) of the training cases. The question it answers is
the issue's: measured at a few nodes, what does the same machine do at hundreds? ``--train`` / ``--test``
pick the cases (default: Polaris all_gather at 2 and 8 nodes -> 128, 256 and 540 nodes), and the script
prints the signed time error per size range beside the current model's (from ``scripts/accuracy_at_scale.py
--json``, when given with ``--baseline``).

    PYTHONPATH=. python scripts/proto_ring_step.py --baseline rows.json

Leave-one-system-out it has nothing to say for Polaris (the only Slingshot system with a ring collective):
the four numbers would fall back to a prior (NCCL's ``getNetOverhead``, 1-2 us).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

SMALL, LARGE = 64 << 10, 64 << 20
DEFAULT_TRAIN = ("C6-2-AG", "C6-8-AG")
DEFAULT_TEST = ("C6-128-AG-218", "C6-256-AG-221", "C6-540-AG-218", "C6-540-AG-221")


def fit_line(cases: list[dict], keep) -> tuple[float, float]:
    """Least squares of time / (n-1) = s + (S/n) / B over the rows ``keep(size)`` selects, relative
    (each row weighted by 1/time, so small and large rows count alike). Returns (s_us, B_bytes_per_us)."""
    a, y = [], []
    for c in cases:
        n = c["nranks"]
        for r in c["rows"]:
            if keep(r["size"]):
                w = 1.0 / r["time_us"]
                a.append([w * (n - 1), w * (n - 1) * r["size"] / n])
                y.append(1.0)
    (s, inv_b), *_ = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)
    return float(s), float(1.0 / inv_b) if inv_b > 0 else float("inf")


def predict(n: int, size: int, ll: tuple[float, float], simple: tuple[float, float]) -> float:
    return min((n - 1) * (s + size / n / b) for s, b in (ll, simple))


def size_range(nbytes: int) -> str:
    return "small" if nbytes <= SMALL else "large" if nbytes >= LARGE else "mid"


def medians(pairs) -> dict:
    e: dict = {"small": [], "mid": [], "large": []}
    for size, err in pairs:
        e[size_range(size)].append(err)
    return {k: (statistics.median(v) if v else None) for k, v in e.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="+", default=list(DEFAULT_TRAIN))
    ap.add_argument("--test", nargs="+", default=list(DEFAULT_TEST))
    ap.add_argument("--baseline", help="rows of the current model (scripts/accuracy_at_scale.py --json)")
    a = ap.parse_args(argv)
    from sim.commands.validate import load_cases
    cases = {c["id"]: c for c in load_cases(None)}
    train = [cases[k] for k in a.train]
    ll = fit_line(train, lambda s: s <= SMALL)
    simple = fit_line(train, lambda s: s >= 8 << 20)
    print(f"fitted on {', '.join(a.train)}: LL step {ll[0]:.1f} us at {ll[1] / 1e3:.1f} GB/s per rank; "
          f"Simple step {simple[0]:.1f} us at {simple[1] / 1e3:.1f} GB/s per rank")
    base = {}
    if a.baseline:
        with open(a.baseline) as f:
            base = json.load(f)
    fmt = lambda x: "n/a" if x is None else f"{x:+.0%}"
    print("| case | ranks | prototype small / mid / large time | current model small / mid / large time |")
    print("|---|---:|---|---|")
    for k in a.test:
        c = cases[k]
        p = medians((r["size"], predict(c["nranks"], r["size"], ll, simple) / r["time_us"] - 1) for r in c["rows"])
        b = medians((r["size"], r["pred_time_us"] / r["time_us"] - 1) for r in base[k]["rows"]) if k in base else {}
        print(f"| {k} | {c['nranks']} | {' / '.join(fmt(p[x]) for x in ('small', 'mid', 'large'))} | "
              f"{' / '.join(fmt(b.get(x)) for x in ('small', 'mid', 'large'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
