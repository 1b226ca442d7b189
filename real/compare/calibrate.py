"""Fit a topology to measurements: link bandwidth and latency, per-call overhead, host memory rate.

The model of one call of ``collective`` on S bytes is the simulator's own structure, made linear:

    T = t0 + alpha * L(S) + (W(S) + H(S)) / B

* ``W(S)``: the simulator's time for the algorithm on a unit topology (links of 1 GB/s, no latency):
  the wire term, scaled by the link bandwidth ``B`` (GB/s).
* ``L(S)``: the same run with links of unlimited bandwidth and 1 us latency: how many latencies lie on
  the critical path (the ring's steps); ``alpha`` is the per-step latency (us).
* ``H(S)``: host-side bytes of the measured library (:mod:`real.compare.hostmodel`), expressed at the
  link's rate: on one host over loopback a wire byte costs a rank 4 bytes of memory traffic, so host
  work runs at ``4 B`` and ``H = host_bytes / 4`` (at 1 GB/s), times the cache knee's factor
  (:func:`~real.compare.hostmodel.cache_factor`) with ``host_model="torch-gloo-cache"`` (what ``auto``
  picks for gloo on one host when the files record the measuring CPU's cache, ``env.cpu_cache``):
  nothing fitted, the knee's place and depth are measured.
* ``t0``: per-call overhead (us): dispatch, thread hand-offs, kernel launch.

``t0, alpha, 1/B >= 0`` are fitted by least squares on *relative* residuals (every size counts the
same, so small sizes pin the overhead and large sizes the bandwidth), with Huber weights from iterated
re-weighting (IRLS): a size slowed down 3x by another process sharing the machine is down-weighted,
not followed. Both the out-of-place and the in-place time of every size are observations.

Where ``alpha`` comes from, first that applies:

1. ``latency_us`` (``--latency-us``): given;
2. ``measured_latency=True`` (``--measured-latency``): the message latency ``collsim bench`` measured
   before its sweep (``env.p2p_latency_us``, the median over the files that carry one; see
   :func:`real.measure.harness.p2p_latency`): measured;
3. fitted, when the observations have different numbers of steps (two collectives, or two world
   sizes): the steps inside the measured collectives themselves;
4. otherwise 0: with one collective at one world size ``alpha`` cannot be told apart from ``t0``, and
   the whole intercept is charged to the per-call overhead.

With ``alpha`` fixed (1, 2, 4) the fit is ``t0, 1/B >= 0`` on ``T - alpha * L``. The measured latency
is opt-in because a lone message is not a step inside a collective: on gloo over loopback it also
pays torch's per-message dispatch, which a collective pays once per call, so it is 2-5x the per-step
cost seen inside gloo's collectives, and held-out all_reduce predictions from all_gather got worse
with it (docs/compare.md has the numbers). It is always recorded in ``meta.calibration``.

The result is a ``switch``-like topology with one link each way between every rank and a central
node, each link of bandwidth B and latency alpha/2 (a rank-to-rank message costs alpha + m/B), whose
``meta.calibration`` records the fit, the source files and the residuals; :class:`~real.compare.
predict.Predictor` reads it back.

>>> from real.compare.measured import Measurement, MeasuredRow
>>> rows = tuple(MeasuredRow(s, 50.0 + s / 2 / 1e3) for s in (1 << 12, 1 << 16, 1 << 20, 1 << 24))
>>> fit = calibrate([Measurement("ag", "collsim-json", "all_gather", 2, rows)], host_model="none")
>>> round(fit.bandwidth_GBps, 3), round(fit.launch_us, 3), fit.latency_us
(1.0, 50.0, 0.0)
"""
from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import dataclass, field

import numpy as np

import sim
from sim.algorithms import why_not
from sim.errors import CollsimError
from sim.io.validation import latency_us as check_latency_us
from sim.topology import Link, Node, Topology
from sim.topology.files import topology_from_dict

from .hostmodel import HOST_MODELS, LOOPBACK_BYTES_PER_WIRE_BYTE, cache_factor, cpu_cache_of, default_host_model, host_bytes
from .measured import DEFAULT_STATISTIC, Measurement, with_statistic
from .score import Comparison, compare, nonneg_lstsq

HUBER_K = 1.345          # Huber's constant: 95% efficiency on clean Gaussian noise
MIN_SCALE = 0.03         # residual scale floor (3%): never trust a fit to be tighter than this
MAX_ITER = 50
BOOTSTRAP_ROUNDS = 200   # resamples of the iterations; the 2.5-97.5% range of 200 is stable to a few %
BOOTSTRAP_SEED = 16      # fixed: the same files give the same uncertainty
LOOSE_FIT = 0.5          # a 95% range wider than +-50% of the value: the constant is not pinned down


@dataclass(frozen=True, eq=False)
class Calibration:
    """A fitted model: parameters, the topology that carries them, residuals and held-out scores."""

    bandwidth_GBps: float
    latency_us: float
    launch_us: float
    host_model: str
    host_GBps: float | None
    algorithm: str
    nranks: int
    topology: Topology
    document: dict                              # the YAML/JSON file's content
    residuals: tuple[dict, ...]
    holdout: tuple[Comparison, ...] = ()
    notes: tuple[str, ...] = ()
    fit_sources: tuple[Measurement, ...] = field(default=())
    uncertainty: dict = field(default_factory=dict)   # name -> {"low", "high"} (95%), "method"

    @property
    def fit_median_abs_rel_error(self) -> float:
        return statistics.median(abs(r["rel_error"]) for r in self.residuals)

    def to_yaml(self) -> str:
        import yaml
        return yaml.safe_dump(self.document, sort_keys=False, default_flow_style=None, width=110)


def build_topology(name: str, nranks: int, bandwidth_GBps: float, latency_us: float, kind: str,
                   meta: dict, one_host: bool = False) -> dict:
    """The file-format dict of a star: rank i <-> ``fabric``, duplex links of the fitted bandwidth
    (``one_host``: every rank on server 0, as for a run on one machine)."""
    nodes = [{"name": f"gpu{i}", "kind": "gpu", "label": f"rank {i}", **({"host": 0} if one_host else {})}
             for i in range(nranks)]
    nodes.append({"name": "fabric", "kind": "switch"})
    links = [{"src": f"gpu{i}", "dst": "fabric", "duplex": True} for i in range(nranks)]
    return {"name": name, "meta": meta,
            "defaults": {"bandwidth_GBps": float(bandwidth_GBps), "latency_us": float(latency_us) / 2, "kind": kind},
            "nodes": nodes, "links": links}


def _unit_topology(nranks: int, bandwidth_GBps: float, latency_us: float) -> Topology:
    nodes = [Node(f"gpu{i}", "gpu") for i in range(nranks)] + [Node("fabric", "switch")]
    links = []
    for i in range(nranks):
        links += [Link(f"gpu{i}", "fabric", bandwidth_GBps, latency_us / 2, "local"),
                  Link("fabric", f"gpu{i}", bandwidth_GBps, latency_us / 2, "local")]
    return Topology.build("unit", nodes, links, {"symmetry": "rotation"})


def basis(collective: str, nbytes: int, nranks: int, algorithm: str, host_model: str,
          cache: dict | None = None) -> tuple[float, float, float]:
    """``(W, L, H)`` of the module docstring for one size (us at 1 GB/s, latency count, us at 1 GB/s);
    ``cache``: the measuring CPU's ``env.cpu_cache`` record, for the host work's cache knee."""
    wire = sim.simulate(collective, nbytes, _unit_topology(nranks, 1.0, 0.0), algorithm, "ideal").time_us
    lat = sim.simulate(collective, nbytes, _unit_topology(nranks, 1e12, 1.0), algorithm, "ideal").time_us
    hb = host_bytes(host_model, collective, nbytes, nranks)
    return wire, lat, (hb or 0.0) * cache_factor(collective, nbytes, nranks, cache) / LOOPBACK_BYTES_PER_WIRE_BYTE / 1e3


def robust_fit(a: np.ndarray, y: np.ndarray, scale_to: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative ``x`` minimising the Huber loss of relative residuals ``(y - a x) / scale_to``
    (``scale_to`` defaults to ``y``: the measured times); returns ``(x, weights)``. IRLS: weight 1 inside
    ``HUBER_K * scale``, ``HUBER_K * scale / |r|`` outside, the scale being 1.4826 x the median absolute
    deviation of the residuals (at least ``MIN_SCALE``).

    >>> a = np.array([[1.0, s] for s in (1.0, 10.0, 100.0, 1000.0, 10000.0)])
    >>> y = 5 + 2 * a[:, 1]
    >>> y[2] *= 3                                   # one size hit by interference
    >>> x, w = robust_fit(a, y)
    >>> x.round(2).tolist(), bool(w[2] < 0.1)      # unweighted: [4.77, 2.17]
    ([4.99, 2.01], True)
    """
    denom = y if scale_to is None else scale_to
    rel, target = a / denom[:, None], y / denom
    w = np.ones_like(y)
    x = nonneg_lstsq(rel, target)
    for _ in range(MAX_ITER):
        r = target - rel @ x
        scale = max(1.4826 * float(np.median(np.abs(r - np.median(r)))), MIN_SCALE)
        w = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(r), 1e-12))
        sw = np.sqrt(w)
        x_new = nonneg_lstsq(rel * sw[:, None], target * sw)
        if np.allclose(x_new, x, rtol=1e-9, atol=1e-15):
            break
        x = x_new
    return x, w


def calibrate(measurements: list[Measurement], *, holdout: list[Measurement] = (), host_model: str = "auto",
              algorithm: str = "ring", latency_us: float | None = None, measured_latency: bool = False,
              name: str | None = None, statistic: str = DEFAULT_STATISTIC,
              bootstrap: int = BOOTSTRAP_ROUNDS) -> Calibration:
    """Fit the model of the module docstring to ``measurements``; score it on ``holdout``.

    ``statistic`` (mean, median, min) is the statistic of each size's timed iterations that is fitted
    (:func:`~real.compare.measured.with_statistic`); ``bootstrap`` resamples of those iterations give
    the uncertainty of every fitted constant (``meta.calibration.uncertainty``; 0 turns it off)."""
    if not measurements:
        raise CollsimError("nothing to calibrate on: give at least one measured file")
    measurements = [with_statistic(m, statistic) for m in measurements]
    holdout = [with_statistic(h, statistic) for h in holdout]
    n = measurements[0].nranks
    if any(m.nranks != n for m in measurements):
        raise CollsimError("the measured files have different rank counts "
                           f"({', '.join(str(m.nranks) for m in measurements)}): calibrate one world size at a time")
    first = measurements[0]
    notes = []
    host_model = _host_model(host_model, measurements, notes)
    if host_model not in HOST_MODELS:
        raise CollsimError(f"unknown host model {host_model!r}: choose auto, {', '.join(HOST_MODELS)}")
    if algorithm == "auto":
        raise CollsimError("calibrate needs the algorithm the measured library ran (e.g. --algorithm ring), not auto")
    for m in measurements:
        reason = why_not(algorithm, m.collective, n)
        if reason:
            raise CollsimError(f"cannot calibrate through {algorithm} on {m.source!r}: {reason}")
    if latency_us is not None:
        latency_us = check_latency_us(latency_us, "--latency-us")  # finite, >= 0 (nan and inf refused)
    p2p = measured_latency_us(measurements)
    if measured_latency and latency_us is None and p2p is None:
        raise CollsimError("--measured-latency: the files carry no measured message latency (env.p2p_latency_us): "
                           "measure with this collsim bench, or pass --latency-us")
    source = "given" if latency_us is not None else "measured" if measured_latency else None

    host_cache = cpu_cache_of(measurements) if host_model == "torch-gloo-cache" else None
    if host_model == "torch-gloo-cache" and host_cache is None:
        notes.append("the files record no CPU cache (env.cpu_cache, written by collsim bench since issue 16): host work "
                     "is priced without the cache knee")
    obs = _observations(measurements, n, algorithm, host_model, host_cache)
    if len(obs) < 3:
        raise CollsimError(f"only {len(obs)} measured time(s): calibration needs at least 3 (a sweep of sizes, e.g. -b 4K -e 16M -f 4)")
    measured = y = np.array([o[2] for o in obs])
    wire_host = np.array([o[3] + o[5] for o in obs])
    lat = np.array([o[4] for o in obs])
    steps_differ = float(lat.max() - lat.min()) > 1e-6 * max(float(lat.max()), 1.0)
    if source == "measured" and (y - p2p * lat <= 0).any():
        notes.append(f"the measured message latency ({p2p:.3g} us per step) is more than some measured times allow, "
                     "so it is not used")
        source = None
    if source == "measured":
        latency_us = p2p
        notes.append(f"per-step latency alpha = {p2p:.3g} us, the message latency collsim bench measured between ranks "
                     "0 and 1 (env.p2p_latency_us); the per-call overhead is fitted with it")
    identifiable = latency_us is None and steps_differ
    if identifiable:
        source = "fitted"
        a = np.stack([np.ones_like(y), lat, wire_host], axis=1)
    else:
        alpha = latency_us or 0.0
        y = y - alpha * lat
        if (y <= 0).any():
            raise CollsimError(f"--latency-us {latency_us} is more than some measured times allow: choose a smaller latency")
        a = np.stack([np.ones_like(y), wire_host], axis=1)
        if latency_us is None:
            source = "none"
            notes.append("per-step latency cannot be told apart from the per-call overhead with one collective at one "
                         "world size: it is charged to the per-call overhead (fit two collectives, or pass --latency-us"
                         + (f"; --measured-latency uses the files' measured message latency, {p2p:.3g} us)"
                            if p2p is not None else ")"))
    x, weights = robust_fit(a, y, scale_to=measured)
    spread = bootstrap_fit(a, [o[6] for o in obs], measured, y - measured, [o[0].statistic for o in obs], bootstrap)
    t0 = float(x[0])
    alpha = float(x[1]) if identifiable else float(latency_us or 0.0)
    inv_b = float(x[-1])
    if inv_b <= 0:
        raise CollsimError("the measured times do not grow with size, so no bandwidth can be fitted: measure larger sizes (-e 16M or more)")
    bw = 1.0 / inv_b
    host_GBps = bw * LOOPBACK_BYTES_PER_WIRE_BYTE if host_model != "none" else None

    uncertainty = _uncertainty(spread, identifiable, bootstrap, measurements, {"launch_us": t0, "link_latency_us": alpha, "link_bandwidth_GBps": bw}, notes)
    m_stat = sorted({m.statistic for m in measurements})
    notes.extend(m.statistic_note for m in measurements if m.statistic_note)

    label = first.label or f"{first.backend or 'measured'}:{n}"
    cal_meta = {
        "method": "collsim calibrate: T = t0 + alpha*L + (W + H)/B, relative Huber IRLS",
        "statistic": "/".join(m_stat), "uncertainty": uncertainty or None,
        "algorithm": algorithm, "launch_us": t0, "link_latency_us": alpha, "link_bandwidth_GBps": bw,
        "latency_fitted": bool(identifiable), "latency_source": source, "p2p_latency_us": p2p, "host_model": host_model,
        "host_GBps": host_GBps, "host_cache": host_cache, "host_bytes_per_wire_byte": LOOPBACK_BYTES_PER_WIRE_BYTE if host_model != "none" else None,
        "sources": [{"file": os.path.abspath(m.source) if m.source[:1] != "<" else m.source, "collective": m.collective,
                     "nranks": m.nranks, "backend": m.backend, "where": m.label, "sizes": len(m.rows)} for m in measurements],
        "notes": notes,
    }
    kind = "local" if host_model != "none" or label.startswith("local:") else "net"
    doc = build_topology(name or "calibrated-" + re.sub(r"[^A-Za-z0-9_.]+", "-", label).strip("-"), n, bw, alpha, kind,
                         {"symmetry": "rotation", "bandwidth_GBps": bw, "latency_us": alpha, "calibration": cal_meta},
                         one_host=label.startswith("local:"))
    topo = topology_from_dict(doc, source=doc["name"])

    residuals, pred = _residuals(topo, obs, weights, n)
    cal_meta["residuals"] = [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()} for r in residuals]
    cal_meta["fit_median_abs_rel_error"] = statistics.median(abs(r["rel_error"]) for r in residuals)
    held = tuple(compare(h, topo, predictor=pred) for h in holdout)
    if held:
        cal_meta["holdout"] = [{"file": h.measurement.source, "collective": h.measurement.collective,
                                **{k: h.summary[k] for k in ("median_abs_rel_error", "mean_abs_rel_error",
                                                             "geomean_error", "worst")}} for h in held]
    doc["meta"] = _plain(doc["meta"])
    return Calibration(bw, alpha, t0, host_model, host_GBps, algorithm, n, topology_from_dict(doc, doc["name"]), doc,
                       tuple(residuals), held, tuple(notes), tuple(measurements), uncertainty)


def _host_model(host_model: str, measurements: list[Measurement], notes: list) -> str:
    """The host model ``auto`` stands for with these files (a note says why where it is not the default)."""
    first = measurements[0]
    if host_model == "auto":
        host_model = default_host_model(first.backend, first.label)
        if host_model != "none" and first.label.startswith("cluster:"):
            host_model = "none"
            notes.append("gloo across hosts: the wire is a real network, so host copies are not tied to it (host model none)")
        elif host_model == "torch-gloo" and cpu_cache_of(measurements) is not None:
            host_model = "torch-gloo-cache"     # the bench recorded its CPU cache: price the knee (docs/compare.md)
    return host_model


def _observations(measurements: list[Measurement], n: int, algorithm: str, host_model: str, host_cache) -> list:
    """One observation per timed column of every size of every file: (measurement, nbytes, time_us,
    wire, latency steps, host, samples), the basis terms computed once per (collective, size)."""
    cache, obs = {}, []
    for m in measurements:
        for r in m.rows:
            key = (m.collective, r.nbytes)
            if r.nbytes <= 0 or not r.observations():
                continue
            if key not in cache:
                cache[key] = basis(m.collective, r.nbytes, n, algorithm, host_model, host_cache)
            for t, samples in r.observed_samples():
                obs.append((m, r.nbytes, t, *cache[key], samples))
    return obs


def _uncertainty(spread, identifiable: bool, bootstrap: int, measurements: list[Measurement], values: dict,
                 notes: list) -> dict:
    """95% ranges of the fitted constants from the bootstrap ``spread`` (empty without one); a note for
    each constant the measurements do not pin down."""
    uncertainty: dict = {}
    if spread is not None:
        names = ["launch_us"] + (["link_latency_us"] if identifiable else []) + ["link_bandwidth_GBps"]
        for name_, col in zip(names, spread.T):
            if name_ == "link_bandwidth_GBps":
                col = 1.0 / col[col > 0] if (col > 0).any() else np.array([math.inf])
            lo, hi = (float(v) for v in np.percentile(col, [2.5, 97.5]))
            uncertainty[name_] = {"low": lo, "high": hi}
        uncertainty["method"] = (f"bootstrap: {bootstrap} resamples of each size's timed iterations, "
                                 f"{'/'.join(sorted({m.statistic for m in measurements}))} of each, refitted; "
                                 "low/high are the 2.5% and 97.5% points")
        loose = [k for k, v in uncertainty.items() if k != "method" and _loose(values[k], v)]
        if loose:
            notes.append(f"{', '.join(loose)} not pinned down by these measurements (95% range wider than "
                         f"+-{LOOSE_FIT:.0%}): more iterations (-n), --repeat, or sizes that exercise that term")
    elif bootstrap:
        notes.append("no uncertainty: the files record no per-iteration times (measure with collsim bench to get them)")
    return uncertainty


def _residuals(topo, obs: list, weights, n: int):
    """Residuals predicted by the real predictor on the written topology (not the linearised basis);
    returns them and the predictor (reused for the holdout)."""
    from .predict import Predictor
    pred = Predictor(topo)
    residuals, seen = [], {}
    for (m, s, t, *_), wt in zip(obs, weights):
        key = (m.collective, s)
        if key not in seen:
            seen[key] = pred.predict(m.collective, s, n).time_us
        residuals.append({"collective": m.collective, "nbytes": s, "measured_us": t, "fitted_us": seen[key],
                          "rel_error": (seen[key] - t) / t, "weight": float(wt)})
    return residuals, pred


def bootstrap_fit(a: np.ndarray, samples: list[tuple[float, ...]], measured: np.ndarray, shift: np.ndarray,
                  statistic: str | list[str], rounds: int, seed: int = BOOTSTRAP_SEED) -> np.ndarray | None:
    """The fit refitted on ``rounds`` resamples: each observation's iterations drawn with replacement
    and summarised by ``statistic`` (one name, or one per observation; observations without iterations keep their value); ``shift`` is
    what the fitted target adds to the measured time (``-alpha * L`` when alpha is fixed). Returns one
    row of fitted parameters per resample, or None when nothing has iterations.

    >>> a = np.array([[1.0, s] for s in (1.0, 100.0, 10000.0)])
    >>> xs = [(9.0, 10.0, 11.0), (200.0, 210.0, 220.0), (20000.0, 20010.0, 20020.0)]
    >>> fits = bootstrap_fit(a, xs, np.array([10.0, 210.0, 20010.0]), np.zeros(3), "median", 50)
    >>> fits.shape, bool(1.9 < np.median(fits[:, 1]) < 2.1)
    ((50, 2), True)
    """
    if rounds <= 0 or not any(len(xs) > 1 for xs in samples):
        return None
    rng = np.random.default_rng(seed)
    funcs = {"mean": np.mean, "median": np.median, "min": np.min}
    names = [statistic] * len(samples) if isinstance(statistic, str) else list(statistic)
    arrays = [np.asarray(xs, dtype=float) for xs in samples]
    fits = []
    for _ in range(rounds):
        t = np.array([funcs[name](rng.choice(xs, size=len(xs))) if len(xs) > 1 else m
                      for xs, m, name in zip(arrays, measured, names)])
        y = t + shift
        if (y <= 0).any():
            continue
        fits.append(robust_fit(a, y, scale_to=t)[0])
    return np.array(fits) if fits else None


def _loose(value: float, interval: dict) -> bool:
    """A 95% range reaching further than LOOSE_FIT of the value from it (a zero value, a bound the fit
    sits on, is judged by nothing relative and is not called loose)."""
    if not math.isfinite(interval["high"]):
        return True
    return value > 0 and max(value - interval["low"], interval["high"] - value) > LOOSE_FIT * value


def measured_latency_us(measurements: list[Measurement]) -> float | None:
    """The message latency ``collsim bench`` recorded (``env.p2p_latency_us``, us): the median over the
    files that carry a positive, finite one; None when none does (nccl-tests output, older files)."""
    found = []
    for m in measurements:
        v = m.env.get("p2p_latency_us") if isinstance(m.env, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            found.append(float(v))
    return statistics.median(found) if found else None


def _plain(value):
    """Only YAML-safe scalars, lists and dicts (numpy floats become floats, NaN becomes None)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    f = float(value)
    return f if math.isfinite(f) else None
