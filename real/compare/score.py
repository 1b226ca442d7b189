"""Score predictions against a measurement: a row per size, summary metrics and a short reading.

Errors are relative to the measurement: ``rel_error = (predicted - measured) / measured`` (positive:
the model is too slow). The summary gives

* ``median_abs_rel_error`` and ``mean_abs_rel_error``;
* ``geomean_error``: ``exp(mean |ln(predicted / measured)|) - 1``, the typical factor off, symmetric in
  over- and under-prediction; ``geomean_bias``: ``exp(mean ln(predicted / measured)) - 1`` (signed);
* ``worst``: the size with the largest ``|rel_error|``.

The reading says which regime the sizes are in (latency-bound when the predicted latency term is larger
than the bandwidth term) and which term the miss comes from: it fits
``measured ~ k_lat * latency_term + k_bw * bandwidth_term`` (relative least squares, k >= 0) and
reports how far each factor is from 1 and how much of the total error each explains.

>>> from real.compare.measured import Measurement, MeasuredRow
>>> m = Measurement("x", "collsim-json", "all_reduce", 4, (MeasuredRow(4_000_000, 66.0),))
>>> c = compare(m, "ring:n=4,bandwidth_GBps=100,latency_us=1", algorithm="ring", protocol="ideal")
>>> c.rows[0].rel_error, c.summary["median_abs_rel_error"]
(0.0, 0.0)
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from sim.algorithms import analytic
from sim.collectives import get_collective

from .measured import DEFAULT_STATISTIC, Measurement, with_statistic
from .measured import size_text as _size
from .predict import Prediction, Predictor


@dataclass(frozen=True)
class ComparedRow:
    """One size: the measured time (as chosen by ``time``), the prediction, and the relative error."""

    nbytes: int
    measured_time_us: float
    prediction: Prediction
    measured_oop_time_us: float | None = None
    measured_inplace_time_us: float | None = None
    count: int | None = None
    dtype: str | None = None

    @property
    def rel_error(self) -> float:
        return (self.prediction.time_us - self.measured_time_us) / self.measured_time_us

    def to_dict(self, collective: str, nranks: int) -> dict:
        p, t = self.prediction, self.measured_time_us
        return {"nbytes": self.nbytes, "count": self.count, "dtype": self.dtype,
                "measured_time_us": t, "predicted_time_us": p.time_us,
                "measured_algbw_GBps": analytic.algbw_GBps(self.nbytes, t), "predicted_algbw_GBps": p.algbw_GBps,
                "measured_busbw_GBps": analytic.busbw_GBps(collective, nranks, self.nbytes, t),
                "predicted_busbw_GBps": p.busbw_GBps, "rel_error": self.rel_error,
                "algorithm": p.algorithm, "protocol": p.protocol, "steps": p.steps, "regime": p.regime,
                "in_nccl": _in_nccl(p.algorithm, collective), "latency_us": p.latency_us, "bandwidth_us": p.bandwidth_us, "host_us": p.host_us,
                "measured_oop_time_us": self.measured_oop_time_us,
                "measured_inplace_time_us": self.measured_inplace_time_us}


@dataclass(frozen=True)
class Comparison:
    measurement: Measurement
    predictor_description: str
    topology: str
    time_choice: str
    rows: tuple[ComparedRow, ...]
    summary: dict = field(default_factory=dict)
    reading: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        m = self.measurement
        return {"measured": m.source, "collective": m.collective, "nranks": m.nranks, "topology": self.topology,
                "model": self.predictor_description, "measured_time": self.time_choice,
                "measured_statistic": m.statistic,
                "rows": [r.to_dict(m.collective, m.nranks) for r in self.rows],
                "summary": self.summary, "reading": list(self.reading), "notes": list(self.notes)}


def compare(measurement: Measurement, topology, *, algorithm: str = "auto", protocol: str = "auto",
            model: str = "engine", time: str = "best", min_bytes: int = 0,
            predictor: Predictor | None = None, statistic: str = DEFAULT_STATISTIC) -> Comparison:
    """Predict every measured size of ``measurement`` on ``topology`` and score the predictions;
    ``statistic`` (median, mean, min) is which statistic of each size's timed iterations is the
    measured time (:func:`~real.compare.measured.with_statistic`)."""
    pred = predictor or Predictor(topology, algorithm=algorithm, protocol=protocol, model=model)
    measurement = with_statistic(measurement, statistic)
    rows, notes = [], [measurement.statistic_note] if measurement.statistic_note else []
    skipped = 0
    for r in measurement.rows:
        t = r.time(time)
        if t is None or t <= 0 or r.nbytes < max(min_bytes, 1):
            skipped += 1
            continue
        p = pred.predict(measurement.collective, r.nbytes, measurement.nranks)
        notes.extend(n for n in p.notes if n not in notes)
        rows.append(ComparedRow(r.nbytes, t, p, r.time_us, r.inplace_time_us, r.count, r.dtype))
    if skipped:
        notes.append(f"{skipped} size(s) left out (no {time} time, size 0, or below the minimum size)")
    if not rows:
        from sim.errors import CollsimError
        raise CollsimError(f"{measurement.source!r}: no size left to compare (check --min-size and --time)")
    summary = summarize(rows)
    return Comparison(measurement, pred.describe(), pred.topo.name, time, tuple(rows), summary,
                      tuple(reading(rows, measurement.collective, measurement.nranks)), tuple(notes))


def summarize(rows) -> dict:
    """Error metrics over ``rows`` (see the module docstring), also split by regime."""
    def metrics(sel) -> dict:
        if not sel:
            return {"sizes": 0}
        errs = [r.rel_error for r in sel]
        logs = [math.log(r.prediction.time_us / r.measured_time_us) for r in sel]
        worst = max(sel, key=lambda r: abs(r.rel_error))
        return {"sizes": len(sel), "median_abs_rel_error": statistics.median(abs(e) for e in errs),
                "mean_abs_rel_error": sum(abs(e) for e in errs) / len(errs),
                "geomean_error": math.exp(sum(abs(x) for x in logs) / len(logs)) - 1,
                "geomean_bias": math.exp(sum(logs) / len(logs)) - 1,
                "worst": {"nbytes": worst.nbytes, "rel_error": worst.rel_error}}
    out = metrics(list(rows))
    out["by_regime"] = {g: metrics([r for r in rows if r.prediction.regime == g])
                        for g in ("latency-bound", "bandwidth-bound")}
    return out


def term_factors(rows) -> tuple[float | None, float | None]:
    """``(k_lat, k_bw)`` with ``measured ~ k_lat * latency + k_bw * (bandwidth + host)``, relative least
    squares with k >= 0; a factor is None when its term is absent from the predictions."""
    lat = np.array([r.prediction.latency_us for r in rows])
    bw = np.array([r.prediction.bandwidth_us + r.prediction.host_us for r in rows])
    y = np.array([r.measured_time_us for r in rows])
    total = np.maximum(lat + bw, 1e-12)
    has = [bool((lat > 0.02 * total).any()), bool((bw > 0.02 * total).any())]   # a term that matters somewhere
    cols = [c for c, h in zip((lat, bw), has) if h]
    if not cols:
        return None, None
    a = np.stack(cols, axis=1) / y[:, None]   # relative: every size counts the same
    k = nonneg_lstsq(a, np.ones_like(y))
    it = iter(k.tolist())
    return tuple(next(it) if h else None for h in has)


def nonneg_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0, by trying each subset of columns (a handful here).

    >>> nonneg_lstsq(np.array([[1.0, 1.0], [1.0, 2.0]]), np.array([2.0, 1.0])).round(6).tolist()
    [1.5, 0.0]
    """
    best, best_res = np.zeros(a.shape[1]), float(b @ b)
    ncol = a.shape[1]
    for mask in range(1, 1 << ncol):
        idx = [i for i in range(ncol) if mask >> i & 1]
        sol, *_ = np.linalg.lstsq(a[:, idx], b, rcond=None)
        if (sol < 0).any():
            continue
        x = np.zeros(ncol)
        x[idx] = sol
        res = float(np.sum((a @ x - b) ** 2))
        if res < best_res - 1e-15:
            best, best_res = x, res
    return best


def reading(rows, collective: str, nranks: int) -> list[str]:
    """A few sentences on the regime and on which term dominates the miss."""
    regimes = [r.prediction.regime for r in rows]
    nlat = regimes.count("latency-bound")
    lines = []
    if nlat == len(rows):
        lines.append("Every size is latency-bound in the model: per-call and per-step latency dominate.")
    elif nlat == 0:
        lines.append("Every size is bandwidth-bound in the model: bytes over the bottleneck dominate.")
    else:
        first_bw = next(i for i, g in enumerate(regimes) if g == "bandwidth-bound")
        if all(g == "bandwidth-bound" for g in regimes[first_bw:]):
            lines.append(f"Latency-bound below {_size(rows[first_bw].nbytes)} ({nlat} sizes), bandwidth-bound from "
                         f"there ({len(rows) - nlat} sizes).")
        else:  # protocol or algorithm switches can move a size back into the latency-bound regime
            last_lat = max(r.nbytes for r in rows if r.prediction.regime == "latency-bound")
            lines.append(f"Latency-bound at {nlat} sizes (up to {_size(last_lat)}), bandwidth-bound at "
                         f"{len(rows) - nlat} (from {_size(rows[first_bw].nbytes)}): the regimes interleave where the "
                         "predicted algorithm or protocol changes.")
    k_lat, k_bw = term_factors(rows)
    big = max(rows, key=lambda r: r.nbytes)
    bus = get_collective(collective).bus_factor(nranks)
    meas_bus = analytic.algbw_GBps(big.nbytes, big.measured_time_us) * bus
    lines.append(f"At the largest size ({_size(big.nbytes)}) the measured busbw is {meas_bus:.3g} GB/s, "
                 f"predicted {big.prediction.busbw_GBps:.3g} GB/s.")
    share = _miss_share(rows, k_lat, k_bw)
    if share is None:
        return lines
    parts = []
    if k_lat is not None:
        parts.append(f"latency term x{k_lat:.2f}")
    if k_bw is not None:
        parts.append(f"bandwidth term x{k_bw:.2f}")
    med = statistics.median(abs(r.rel_error) for r in rows)
    fixed = statistics.median(abs(corrected_time_us(r, k_lat, k_bw) / r.measured_time_us - 1) for r in rows)
    signs = {r.rel_error > 0 for r in rows}
    sign_note = ("; the error changes sign across sizes (noise in the measurement, or a cost the model lacks)."
                 if len(signs) == 2 else ".")
    if med < 0.05:
        lines.append(f"The model fits (median error {med:.1%}); best-fit corrections: {', '.join(parts)}.")
    elif fixed >= med:   # the least-squares fit is not the median's: never offer a "correction" that does worse
        lines.append(f"No single term explains the miss: the best-fitting scaling of the terms ({', '.join(parts)}) "
                     f"would not lower the median error ({med:.1%}; {fixed:.1%} with it)" + sign_note)
    elif fixed > 0.7 * med:
        lines.append(f"No single term explains the miss: scaling them ({', '.join(parts)}) only takes the median error "
                     f"from {med:.1%} to {fixed:.1%}" + sign_note)
    else:
        term = "latency" if share >= 0.5 else "bandwidth"
        lines.append(f"The miss comes mostly from the {term} term ({max(share, 1 - share):.0%} of it): the measurement "
                     f"is best matched by {', '.join(parts)} (median error {med:.1%} -> {fixed:.1%}).")
    return lines


def corrected_time_us(row, k_lat: float | None, k_bw: float | None) -> float:
    """``row``'s predicted time with its latency term scaled by ``k_lat`` and its bandwidth (and host) term by
    ``k_bw`` (None: unscaled). The terms need not add up to the prediction (the engine's pipelining overlaps
    them), so the prediction is scaled by the terms' ratio: no correction leaves it exactly as it is."""
    p = row.prediction
    terms = p.latency_us + p.bandwidth_us + p.host_us
    if terms <= 0:
        return p.time_us
    scaled = (1.0 if k_lat is None else k_lat) * p.latency_us + (1.0 if k_bw is None else k_bw) * (p.bandwidth_us + p.host_us)
    return p.time_us * scaled / terms


def _miss_share(rows, k_lat, k_bw) -> float | None:
    """Share of the absolute correction that falls on the latency term (None if nothing to share)."""
    if k_lat is None and k_bw is None:
        return None
    lat = sum(abs((k_lat or 1.0) - 1.0) * r.prediction.latency_us / r.measured_time_us for r in rows) if k_lat is not None else 0.0
    bw = sum(abs((k_bw or 1.0) - 1.0) * (r.prediction.bandwidth_us + r.prediction.host_us) / r.measured_time_us
             for r in rows) if k_bw is not None else 0.0
    if lat + bw == 0:
        return None
    return lat / (lat + bw)


def _in_nccl(algorithm: str, collective: str) -> bool:
    """Whether NCCL itself runs ``collective`` with the predicted ``algorithm`` (the registry's fact)."""
    from sim.algorithms import in_nccl
    return in_nccl(algorithm, collective)
