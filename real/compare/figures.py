"""Figures of a comparison, as PNG bytes: bus bandwidth, time (with the model's terms) and error vs size.

Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas (no pyplot, no global state),
about 7 x 4 inches at 110 dpi: legible at a notebook's width. Sizes go on a log2 axis ticked like
nccl-tests (8, 1K, 1M, 1G); bandwidths are decimal GB/s.

>>> from real.compare.measured import Measurement, MeasuredRow
>>> from real.compare.score import compare
>>> m = Measurement("x", "collsim-json", "all_gather", 2, tuple(MeasuredRow(s, 10 + s / 1e3) for s in (1024, 1 << 20)))
>>> png = busbw_figure(compare(m, "switch:n=2,bandwidth_GBps=1"))
>>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
"""
from __future__ import annotations

from sim.algorithms import analytic
from sim.viz.canvas import png_bytes, report_figure

SIZE = (7.0, 4.0)
MEASURED = dict(color="#1f77b4", marker="o", linestyle="-", linewidth=1.6, markersize=5)
PREDICTED = dict(color="#d62728", marker="s", linestyle="--", linewidth=1.6, markersize=4)


def _size_axis(ax) -> None:
    try:
        from sim.viz.style import size_axis
    except ImportError:  # the shared style is optional: a plain log2 axis says the same
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        return
    size_axis(ax)


def _log_y(ax) -> None:
    """Log y axis labelled with plain numbers (0.5, 1, 2, 5...): 1-2-5 ticks over a few decades, decades beyond."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 else 9
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 3 else (1.0,)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _title(c) -> str:
    m = c.measurement
    where = f" on {m.label}" if m.label else ""
    return f"{m.collective}, {m.nranks} ranks{where}"


def busbw_figure(c) -> bytes:
    """Measured and predicted bus bandwidth vs size (log-log)."""
    m = c.measurement
    fig, ax = report_figure(*SIZE)
    xs = [r.nbytes for r in c.rows]
    meas = [analytic.busbw_GBps(m.collective, m.nranks, r.nbytes, r.measured_time_us) for r in c.rows]
    pred = [r.prediction.busbw_GBps for r in c.rows]
    ax.plot(xs, meas, label="measured", **MEASURED)
    ax.plot(xs, pred, label=f"predicted ({_algos(c)})", **PREDICTED)
    _log_y(ax)
    ax.set_ylabel("bus bandwidth (GB/s, 1 GB = 1e9 B)")
    ax.set_title(f"Bus bandwidth: {_title(c)}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)   # busbw grows with size: the lower right is empty
    _size_axis(ax)
    return png_bytes(fig)


def time_figure(c) -> bytes:
    """Measured and predicted time vs size (log-log), with the prediction's latency and bandwidth terms."""
    fig, ax = report_figure(*SIZE)
    xs = [r.nbytes for r in c.rows]
    ax.plot(xs, [r.measured_time_us for r in c.rows], label="measured", **MEASURED)
    ax.plot(xs, [r.prediction.time_us for r in c.rows], label="predicted (total)", **PREDICTED)
    lat = [r.prediction.latency_us for r in c.rows]
    bw = [r.prediction.bandwidth_us + r.prediction.host_us for r in c.rows]
    if any(v > 0 for v in lat):
        ax.plot(xs, [max(v, 1e-3) for v in lat], color="#7f7f7f", linestyle=":", linewidth=1.4,
                label="predicted latency term (incl. per-call)")
    if any(v > 0 for v in bw):
        label = "predicted bandwidth term" + (" (links + host)" if any(r.prediction.host_us for r in c.rows) else "")
        ax.plot(xs, [max(v, 1e-3) for v in bw], color="#2ca02c", linestyle="-.", linewidth=1.4, label=label)
    _log_y(ax)
    ax.set_ylabel("time per call (us)")
    ax.set_title(f"Time: {_title(c)}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    _size_axis(ax)
    return png_bytes(fig)


def error_figure(c, band: float = 0.30) -> bytes:
    """Relative error (predicted - measured) / measured vs size, coloured by the predicted regime."""
    fig, ax = report_figure(*SIZE)
    colors = {"latency-bound": "#9467bd", "bandwidth-bound": "#ff7f0e"}
    for regime, color in colors.items():
        sel = [r for r in c.rows if r.prediction.regime == regime]
        if sel:
            ax.plot([r.nbytes for r in sel], [100 * r.rel_error for r in sel], "o", color=color, markersize=6,
                    label=f"{regime} sizes")
    ax.plot([r.nbytes for r in c.rows], [100 * r.rel_error for r in c.rows], "-", color="#444444", linewidth=0.8)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.axhspan(-100 * band, 100 * band, color="#2ca02c", alpha=0.08, label=f"within +/-{band:.0%}")
    ax.set_ylabel("prediction error (%)\n(predicted - measured) / measured")
    med = 100 * c.summary["median_abs_rel_error"]
    ax.set_title(f"Error: {_title(c)} (median |error| {med:.1f}%)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="best", fontsize=9)
    _size_axis(ax)
    return png_bytes(fig)


def _algos(c) -> str:
    pairs = []
    for r in c.rows:
        p = f"{r.prediction.algorithm}/{r.prediction.protocol}"
        if p not in pairs:
            pairs.append(p)
    return ", ".join(pairs[:3]) + (", ..." if len(pairs) > 3 else "")


FIGURES = (("busbw", "Bus bandwidth vs size", busbw_figure), ("time", "Time vs size", time_figure),
           ("error", "Prediction error vs size", error_figure))
