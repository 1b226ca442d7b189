"""Bandwidth-vs-size plots (the nccl-tests curve), for predictions and measurements alike.

:func:`sweep` simulates one collective over a list of sizes; :func:`plot_bandwidth` draws any number
of series, each a list of :class:`sim.Result` or of dict rows with ``nbytes`` and the metric (the JSON
rows of ``collsim simulate/bench --format json``), against message size on a log2 axis.

>>> rows = sweep("all_reduce", "ring:n=8", [1 << 10, 1 << 20, 1 << 30], algorithm="ring", protocol="ideal")
>>> [round(r.busbw_GBps, 1) for r in rows]
[0.1, 56.7, 99.9]
>>> fig = plot_bandwidth({"ring, 8 GPUs": rows})
"""
from __future__ import annotations

from matplotlib.figure import Figure

from ..errors import CollsimError
from .style import size_axis

METRICS = {
    "busbw_GBps": "bus bandwidth (GB/s, decimal)",
    "algbw_GBps": "algorithm bandwidth (GB/s, decimal)",
    "time_us": "time (µs)",
}


def sweep(collective, topology, sizes, algorithm: str = "auto", protocol: str = "auto", **kwargs) -> list:
    """``sim.simulate`` at every size; returns the Results (keyword arguments pass through)."""
    from ..api import simulate
    from ..presets import load_topology
    topo = load_topology(topology)   # parse once, not once per size
    return [simulate(collective, int(s), topo, algorithm, protocol, **kwargs) for s in sizes]


def _points(series, metric: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in series:
        if isinstance(row, dict):
            if "nbytes" not in row or metric not in row:
                raise CollsimError(f"a row has no 'nbytes' or {metric!r}: give sim.Result objects or JSON rows with both")
            x, y = row["nbytes"], row[metric]
        else:
            x, y = row.nbytes, getattr(row, metric)
        if x > 0 and y is not None:
            xs.append(float(x))
            ys.append(float(y))
    return xs, ys


def plot_bandwidth(series: dict, metric: str = "busbw_GBps", *, title: str = "", ax=None, logy: bool | None = None,
                   styles: dict | None = None, peak_GBps: float | None = None, peak_label: str = "peak",
                   width: float = 7.0, height: float = 4.0):
    """Draw ``{label: rows}`` as metric vs message size.

    ``metric``: ``busbw_GBps`` (default), ``algbw_GBps`` or ``time_us`` (log-log). ``styles``:
    ``{label: dict(matplotlib kwargs)}``, e.g. ``{"measured": {"marker": "o", "ls": ""}}``. ``peak_GBps``
    draws a dashed line at a hardware limit, named ``peak_label``. ``ax``: draw into an existing Axes
    (returns its Figure).
    """
    if metric not in METRICS:
        raise CollsimError(f"unknown metric {metric!r}: choose one of {', '.join(METRICS)}")
    if ax is None:
        fig = Figure(figsize=(width, height), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    styles = styles or {}
    for label, rows in series.items():
        xs, ys = _points(rows, metric)
        if not xs:
            continue
        kw = {"marker": ".", "lw": 1.6}
        shown = label
        if _textbook(rows):   # NCCL's algorithms and the textbook ones told apart: dashed, and said in the legend
            kw["ls"] = "--"
            shown = f"{label} (not in NCCL)"
        kw.update(styles.get(label, {}))
        ax.plot(xs, ys, label=shown, **kw)
    size_axis(ax)
    if peak_GBps and metric != "time_us":
        ax.axhline(peak_GBps, color="0.5", ls="--", lw=1)
        ax.text(0.01, peak_GBps, f"{peak_label} {peak_GBps:g} GB/s", transform=ax.get_yaxis_transform(), va="bottom",
                fontsize=8, color="0.4")
    if logy if logy is not None else metric == "time_us":
        ax.set_yscale("log")
    ax.set_ylabel(METRICS[metric])
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    if len(series) > 1 or any(series):
        ax.legend(fontsize=8)
    return fig


def _textbook(rows) -> bool:
    """Whether a series is of an algorithm NCCL cannot run (its rows' ``in_nccl``, or the registry)."""
    from ..algorithms import in_nccl
    for row in rows:
        if isinstance(row, dict):
            if "in_nccl" in row:
                return not row["in_nccl"]
            if "algorithm" in row and "collective" in row:
                return not in_nccl(row["algorithm"], row["collective"])
            return False
        return not in_nccl(row.algorithm, row.collective)
    return False


def crossover_nbytes(rows_a, rows_b) -> float | None:
    """First size at which series ``b`` becomes faster than ``a`` (by time), interpolated in log2(size);
    None if it never does. Both lists must share their sizes."""
    import math
    xa, ta = _points(rows_a, "time_us")
    xb, tb = _points(rows_b, "time_us")
    if xa != xb:
        raise CollsimError("crossover_nbytes: the two series must be simulated at the same sizes")
    prev = None
    for x, a, b in zip(xa, ta, tb):
        d = math.log(b / a)   # < 0 where b is faster
        if prev is not None and prev[1] >= 0 > d:
            (x0, d0) = prev
            f = d0 / (d0 - d)
            return 2 ** (math.log2(x0) + f * (math.log2(x) - math.log2(x0)))
        if prev is None and d < 0:
            return x
        prev = (x, d)
    return None


__all__ = ["METRICS", "crossover_nbytes", "plot_bandwidth", "sweep"]
