"""Plots of the out-of-sample accuracy in docs/nccl-model.md, from one `collsim validate` JSON.

    collsim validate --cross-validate --by system --rows --format json > loso.json
    python scripts/accuracy_plots.py loso.json docs/accuracy-scale.png

Left: predicted against measured time for every measured size of every public case, each prediction made
with the constants refitted without the case's whole system, with its 80% range (the residuals of the
*other* systems, as `validate` scores coverage). Right: the absolute error per case against its node
count, by size band (busbw for sizes >= 64 MiB, time below). Nothing here is fitted; the script only
draws what `validate` printed.
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python scripts/accuracy_plots.py VALIDATE.json OUT.png", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.prediction.intervals import band as size_band  # validate's size bands

    with open(argv[0]) as f:
        data = json.load(f)
    cv = data["cross_validated_cases"]
    if not any(c.get("rows") for c in cv):
        print("that validate run kept no rows: run it with --cross-validate --rows --format json", file=sys.stderr)
        return 2
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.5))
    colours = {"small": "tab:blue", "mid": "tab:orange", "large": "tab:green"}
    for c in cv:
        rows = c.get("rows") or []
        for r in rows:
            if r["time_us"] <= 0 or r["pred_time_us"] <= 0:
                continue
            lo, hi = r.get("time_us_range") or (r["pred_time_us"], r["pred_time_us"])
            ax.errorbar(r["time_us"], r["pred_time_us"], yerr=[[r["pred_time_us"] - lo], [hi - r["pred_time_us"]]],
                        fmt="o", ms=2.5, color=colours[size_band(r["size"])], alpha=0.35, elinewidth=0.5)
        for key, band in (("bw_median", "large"), ("mid_median", "mid"), ("lat_median", "small")):
            if c.get(key) is not None:
                bx.scatter(c["nodes"] * (1.0 + 0.06 * ("small", "mid", "large").index(band)), 100 * c[key],
                           s=14, color=colours[band], alpha=0.7)
    lim = (1, 1e6)
    ax.plot(lim, lim, "k-", lw=0.8)
    ax.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="measured time (us)",
           ylabel="predicted time (us), leave one system out",
           title="predicted vs measured, with 80% ranges (other systems' residuals)")
    for band, col in colours.items():
        ax.plot([], [], "o", color=col, label=band)
    ax.legend(loc="upper left")
    bx.axhline(25, color="grey", lw=0.6, ls="--")
    bx.set(xscale="log", yscale="log", xlabel="nodes (NVLink domains)", ylabel="median abs error per case (%)",
           title="error against node count (busbw: large; time: small, mid)")
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)
    print(f"wrote {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
