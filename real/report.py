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

``time_us``/``algbw_GBps``/``busbw_GBps``/``wrong`` are the out-of-place values; GB/s are decimal (1e9).
With two or more ranks ``env`` also holds the message latency between ranks 0 and 1 measured before
the sweep (:func:`real.harness.p2p_latency`): ``p2p_latency_us`` (median, us), ``p2p_latency_min_us``,
``p2p_rounds``, ``p2p_method``; the table says it in a ``# p2p latency:`` header line.
"""
from __future__ import annotations

import csv
import io
import json

RESULT_KEYS = ("nbytes", "count", "dtype", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "wrong",
               "inplace_time_us", "inplace_algbw_GBps", "inplace_busbw_GBps", "inplace_wrong",
               "algorithm", "protocol", "steps")
_LEAD = f"{'':12}  {'':12}  {'':8}  {'':6}  {'':6}"


def _time(us: float) -> str:
    # nccl-tests' precision: fewer decimals as the time grows, the column stays 7 wide
    if us >= 10000.0:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100.0 else f"{us:7.2f}"


def _wrong(value: int | None) -> str:
    return f"{value:6d}" if value is not None else f"{'N/A':>6}"


def p2p_fields(p2p: dict | None) -> dict:
    """The ``env`` fields of a :func:`real.harness.p2p_latency` result (none without one)."""
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
              f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}" + half + half,
              f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}" + unit + unit]
    return "\n".join(lines)


def table_row(r: dict) -> str:
    """One size, formatted like nccl-tests."""
    line = f"{r['nbytes']:12d}  {r['count']:12d}  {r['dtype']:>8}  {r['redop']:>6}  {r['root']:6d}"
    for p in ("", "inplace_"):
        line += (f"  {_time(r[p + 'time_us'])}  {r[p + 'algbw_GBps']:6.2f}  {r[p + 'busbw_GBps']:6.2f}"
                 f"  {_wrong(r[p + 'wrong'])}")
    return line


def table_footer(rows: list[dict]) -> str:
    """nccl-tests' footer: total wrong elements, then the mean busbw over all sizes and both modes."""
    wrong = sum((r["wrong"] or 0) + (r["inplace_wrong"] or 0) for r in rows)
    bws = [r[k] for r in rows for k in ("busbw_GBps", "inplace_busbw_GBps")]
    avg = sum(bws) / len(bws) if bws else 0.0
    return "\n".join([f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
                      f"# Avg bus bandwidth    : {avg:.4f}", "#"])


def document(topology: str, collective: str, nranks: int, backend: str, impl: str, timer: str,
             options: dict, env: dict, notes: list[str], rows: list[dict]) -> dict:
    """The JSON document of one run (see the module docstring)."""
    return {"topology": topology, "collective": collective, "nranks": nranks, "backend": backend, "impl": impl,
            "timer": timer, "options": options, "env": env, "notes": notes,
            "results": [{k: r.get(k) for k in RESULT_KEYS} for r in rows]}


def to_json(doc: dict) -> str:
    return json.dumps(doc, indent=2)


def to_csv(doc: dict) -> str:
    """One line per size; run-level fields repeated so each line stands alone."""
    out = io.StringIO()
    head = ("topology", "collective", "nranks", "backend", "impl")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(head + RESULT_KEYS)
    for r in doc["results"]:
        w.writerow([doc[k] for k in head] + ["" if r[k] is None else r[k] for k in RESULT_KEYS])
    return out.getvalue()
