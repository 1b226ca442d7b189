"""Bench output: nccl-tests' table, JSON and CSV (no torch here).

The table keeps nccl-tests' columns and footers so tools that read nccl-tests output read ours::

    #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
            1024           256     float     sum      -1    35.12    0.03    0.03       0    33.80    0.03    0.03       0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 0.0301

The JSON document (a contract that ``collsim compare`` and notebooks read)::

    {"topology": "local:gloo:2", "collective": "all_reduce", "nranks": 2, "backend": "gloo",
     "impl": "torch", "timer": "host", "options": {...}, "env": {...}, "notes": [...],
     "results": [{"nbytes", "count", "dtype", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps",
                  "wrong", "inplace_time_us", "inplace_algbw_GBps", "inplace_busbw_GBps", "inplace_wrong",
                  "algorithm": "measured:gloo", "protocol": null, "steps": null}, ...]}

``collsim bench`` adds where every rank ran: ``"world_size"``, ``"launcher"`` (local, torchrun, mpi,
slurm) and ``"ranks": [{"rank", "host", "local_rank", "device", "device_name", "pid"}]``.
``time_us``/``algbw_GBps``/``busbw_GBps``/``wrong`` are the out-of-place values; GB/s are decimal (1e9).
``time_us`` is the mean of the timed iterations (nccl-tests' time) and algbw/busbw come from it; every
row also has ``median_time_us``, ``min_time_us``, ``max_time_us`` and ``time_samples_us`` (every
iteration, after ``-a`` combined the ranks), and the same with ``inplace_``. The table's last column,
``spread``, is the interquartile range of the iterations over their median (%), the worse of the two
modes; when some size is noisy (spread over 25%, or a mean 1.5x the median) a warning says so and what
to do (:func:`noise_warning`).
With two or more ranks ``env`` also holds the message latency between ranks 0 and 1 measured before
the sweep (:func:`real.measure.harness.p2p_latency`): ``p2p_latency_us`` (median, us), ``p2p_latency_min_us``,
``p2p_rounds``, ``p2p_method``; the table says it in a ``# p2p latency:`` header line.
"""
from __future__ import annotations

import csv
import io
import json

STAT_KEYS = ("median_time_us", "min_time_us", "max_time_us", "inplace_median_time_us", "inplace_min_time_us",
             "inplace_max_time_us")
RESULT_KEYS = ("nbytes", "count", "dtype", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "wrong",
               "inplace_time_us", "inplace_algbw_GBps", "inplace_busbw_GBps", "inplace_wrong",
               "algorithm", "protocol", "steps") + STAT_KEYS
SAMPLE_KEYS = ("time_samples_us", "inplace_time_samples_us")   # JSON only: one number per timed iteration
NOISY_SPREAD = 0.25       # interquartile range over 25% of the median: the iterations disagree
NOISY_MEAN_RATIO = 1.5    # a mean 1.5x the median: a few iterations were stalled by something else
_LEAD = f"{'':12}  {'':12}  {'':8}  {'':6}  {'':6}"


def _time(us: float) -> str:
    # nccl-tests' precision: fewer decimals as the time grows, the column stays 7 wide
    if us >= 10000.0:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100.0 else f"{us:7.2f}"


def _wrong(value: int | None) -> str:
    return f"{value:6d}" if value is not None else f"{'N/A':>6}"


def p2p_fields(p2p: dict | None) -> dict:
    """The ``env`` fields of a :func:`real.measure.harness.p2p_latency` result (none without one)."""
    if not p2p:
        return {}
    return {"p2p_latency_us": p2p["latency_us"], "p2p_latency_min_us": p2p["min_us"], "p2p_rounds": p2p["rounds"],
            "p2p_method": f"{p2p['method']}: ranks 0 and 1 send each other {p2p['nbytes']} B at once, median round"}


def p2p_line(p2p: dict) -> str:
    """``p2p latency: 52.31 us (...)``: the header line, read back by real.compare.measured."""
    return (f"p2p latency: {p2p['latency_us']:.2f} us one-way, rank 0 <-> rank 1 ({p2p['nbytes']} B exchanged "
            f"both ways at once, median of {p2p['rounds']} rounds, min {p2p['min_us']:.2f} us)")


def table_header(title: str, settings: str, ranks: list[str], notes: list[str], p2p: dict | None = None) -> str:
    """Lines printed before the first row: what runs, where, the measured message latency, and what to
    keep in mind."""
    lines = [f"# {title}", f"# {settings}", "#"] + [f"# {r}" for r in ranks]
    lines += [f"# {p2p_line(p2p)}"] if p2p else []
    lines += [f"# note: {n}" for n in notes]
    half = f"  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"
    unit = f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}"
    lines += ["#",
              f"# {'':10}  {'':12}  {'':8}  {'':6}  {'':6}  {'out-of-place':^31}  {'in-place':^31}",
              f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}" + half + half + f"  {'spread':>6}",
              f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}" + unit + unit + f"  {'(%)':>6}"]
    return "\n".join(lines)


def table_row(r: dict) -> str:
    """One size, formatted like nccl-tests."""
    line = f"{r['nbytes']:12d}  {r['count']:12d}  {r['dtype']:>8}  {r['redop']:>6}  {r['root']:6d}"
    for p in ("", "inplace_"):
        line += (f"  {_time(r[p + 'time_us'])}  {r[p + 'algbw_GBps']:6.2f}  {r[p + 'busbw_GBps']:6.2f}"
                 f"  {_wrong(r[p + 'wrong'])}")
    spread = row_spread(r)
    return line + (f"  {spread * 100:6.1f}" if spread is not None else f"  {'N/A':>6}")


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    v = sorted(values)

    def at(q: float) -> float:   # linear interpolation between order statistics
        k = q * (len(v) - 1)
        lo = int(k)
        return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (k - lo)
    return at(0.25), at(0.5), at(0.75)


def row_spread(r: dict) -> float | None:
    """Interquartile range over median of the iterations, the worse of out-of-place and in-place
    (None without samples).

    >>> row_spread({"time_samples_us": [10, 10, 10, 10, 10], "inplace_time_samples_us": [8, 10, 10, 14, 40]})
    0.4
    """
    worst = None
    for p in ("", "inplace_"):
        xs = r.get(p + "time_samples_us")
        if xs:
            q1, med, q3 = _quartiles(xs)
            if med > 0:
                worst = max(worst or 0.0, (q3 - q1) / med)
    return worst


def noise_warning(rows: list[dict]) -> str | None:
    """One sentence when some sizes' iterations disagree (see NOISY_SPREAD, NOISY_MEAN_RATIO), saying what
    to trust and what to do; None when the timings look steady."""
    noisy, worst_spread, worst_ratio = [], 0.0, 1.0
    for r in rows:
        spread = row_spread(r) or 0.0
        ratio = max((r[p + "time_us"] / r[p + "median_time_us"] for p in ("", "inplace_")
                     if r.get(p + "median_time_us")), default=1.0)
        if spread > NOISY_SPREAD or ratio > NOISY_MEAN_RATIO:
            noisy.append(r["nbytes"])
            worst_spread, worst_ratio = max(worst_spread, spread), max(worst_ratio, ratio)
    if not noisy:
        return None
    return (f"noisy timings at {len(noisy)} of {len(rows)} sizes (iteration spread up to {worst_spread:.0%}, mean up to "
            f"{worst_ratio:.1f}x the median): something else shares these cores. The mean (time) is what nccl-tests "
            "prints; trust median_time_us/min_time_us (collsim compare and calibrate use the median; --statistic min or "
            "auto for the least disturbed iteration), and for steadier numbers use more iterations (-n 50), --repeat 3, or pin the ranks to idle cores (taskset -c)")


def table_footer(rows: list[dict]) -> str:
    """nccl-tests' footer: total wrong elements, then the mean busbw over all sizes and both modes (and
    the noise warning, if any)."""
    wrong = sum((r["wrong"] or 0) + (r["inplace_wrong"] or 0) for r in rows)
    bws = [r[k] for r in rows for k in ("busbw_GBps", "inplace_busbw_GBps")]
    avg = sum(bws) / len(bws) if bws else 0.0
    warning = noise_warning(rows)
    return "\n".join(([f"# warning: {warning}"] if warning else []) +  # before nccl-tests' own footer lines
                     [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
                      f"# Avg bus bandwidth    : {avg:.4f}", "#"])


def document(topology: str, collective: str, nranks: int, backend: str, impl: str, timer: str,
             options: dict, env: dict, notes: list[str], rows: list[dict]) -> dict:
    """The JSON document of one run (see the module docstring)."""
    return {"topology": topology, "collective": collective, "nranks": nranks, "backend": backend, "impl": impl,
            "timer": timer, "options": options, "env": env, "notes": notes,
            "results": [{k: r.get(k) for k in RESULT_KEYS + SAMPLE_KEYS} for r in rows]}


def to_json(doc: dict) -> str:
    return json.dumps(doc, indent=2)


def to_csv(doc: dict) -> str:
    """One line per size; run-level fields repeated so each line stands alone."""
    out = io.StringIO()
    head = ("topology", "collective", "nranks", "backend", "impl")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(head + RESULT_KEYS)
    for r in doc["results"]:
        w.writerow([doc[k] for k in head] + ["" if r.get(k) is None else r[k] for k in RESULT_KEYS])
    return out.getvalue()
