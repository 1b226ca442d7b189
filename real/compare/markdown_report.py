"""Comparison output: the terminal table, and reports as Markdown and self-contained HTML.

:func:`write_report` writes ``DIR/report.md`` (figures as ``DIR/figures/*.png``) and ``DIR/report.html``
(the same content, figures embedded as base64 PNG data URIs, so the one file can be mailed, attached
to a course hand-in or to a cluster acceptance review, and opened in any browser).

>>> from real.compare.measured import Measurement, MeasuredRow
>>> from real.compare.score import compare
>>> c = compare(Measurement("x.json", "collsim-json", "all_gather", 2, (MeasuredRow(1 << 20, 600.0),)),
...             "switch:n=2,bandwidth_GBps=1,latency_us=1", algorithm="ring", protocol="ideal")
>>> print(text_table(c).splitlines()[4])
     1048576      600.00      525.29     1.748     1.996     0.874     0.998  -12.5%  ring/ideal       bandwidth-bound
"""
from __future__ import annotations

import base64
import datetime
import html
import os

from sim.algorithms import analytic
from sim.errors import CollsimError
from sim.io.safe_io import write_output

from .measured import size_text as _size

_HEAD = (f"# {'size':>10} {'measured':>11} {'predicted':>11} {'algbw':>9} {'algbw':>9} {'busbw':>9} {'busbw':>9} "
         f"{'error':>7}  {'algorithm':<16} {'regime'}")
_UNITS = (f"# {'(B)':>10} {'(us)':>11} {'(us)':>11} {'meas GB/s':>9} {'pred GB/s':>9} {'meas GB/s':>9} "
          f"{'pred GB/s':>9} {'':>7}")


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"




def time_rule(choice: str) -> str:
    return {"best": "the faster of out-of-place and in-place (interference only adds time)",
            "out-of-place": "out-of-place (nccl-tests' first columns)", "in-place": "in-place"}[choice]


def text_table(c) -> str:
    """nccl-tests-like table of one comparison, its summary and its reading."""
    m = c.measurement
    lines = [f"# collsim compare: {m.describe()}", f"# model: {c.predictor_description}; measured time: "
             f"{getattr(m, 'statistic', 'mean')} of the iterations, {time_rule(c.time_choice)}",
             _HEAD, _UNITS]
    for r in c.rows:
        d = r.to_dict(m.collective, m.nranks)
        lines.append(f"  {r.nbytes:>10d} {r.measured_time_us:>11.2f} {r.prediction.time_us:>11.2f} "
                     f"{d['measured_algbw_GBps']:>9.3f} {d['predicted_algbw_GBps']:>9.3f} {d['measured_busbw_GBps']:>9.3f} "
                     f"{d['predicted_busbw_GBps']:>9.3f} {_pct(r.rel_error):>7}  "
                     f"{r.prediction.algorithm + '/' + r.prediction.protocol:<16} {r.prediction.regime}")
    lines += [summary_line(c.summary)] + [f"# {s}" for s in c.reading] + [f"# note: {n}" for n in c.notes]
    return "\n".join(lines)


def summary_line(s: dict) -> str:
    return (f"# {s['sizes']} sizes: median |error| {s['median_abs_rel_error']:.1%}, mean |error| "
            f"{s['mean_abs_rel_error']:.1%}, geometric-mean error {s['geomean_error']:.1%} (bias "
            f"{_pct(s['geomean_bias'])}), worst {_size(s['worst']['nbytes'])} ({_pct(s['worst']['rel_error'])})")


# ---- Markdown ---------------------------------------------------------------------------------------
def _summary_rows(c) -> list[tuple[str, str]]:
    s = c.summary
    out = [("sizes compared", str(s["sizes"])), ("median absolute error", f"{s['median_abs_rel_error']:.1%}"),
           ("mean absolute error", f"{s['mean_abs_rel_error']:.1%}"),
           ("geometric-mean error", f"{s['geomean_error']:.1%}"), ("bias (geometric mean of predicted/measured - 1)", _pct(s["geomean_bias"])),
           ("worst size", f"{_size(s['worst']['nbytes'])} ({_pct(s['worst']['rel_error'])})")]
    for g, sub in s["by_regime"].items():
        if sub["sizes"]:
            out.append((f"median absolute error, {g} sizes", f"{sub['median_abs_rel_error']:.1%} ({sub['sizes']} sizes)"))
    return out


def _size_rows(c) -> tuple[list[str], list[list[str]]]:
    m = c.measurement
    head = ["size", "measured (us)", "predicted (us)", "measured busbw (GB/s)", "predicted busbw (GB/s)", "error",
            "algorithm/protocol", "regime"]
    rows = []
    for r in c.rows:
        meas_bus = analytic.busbw_GBps(m.collective, m.nranks, r.nbytes, r.measured_time_us)
        rows.append([_size(r.nbytes), f"{r.measured_time_us:.2f}", f"{r.prediction.time_us:.2f}", f"{meas_bus:.3f}",
                     f"{r.prediction.busbw_GBps:.3f}", _pct(r.rel_error),
                     f"{r.prediction.algorithm}/{r.prediction.protocol}", r.prediction.regime])
    return head, rows


def _calibration_rows(cal) -> list[tuple[str, str]]:
    out = [("fitted on", "; ".join(f"{m.collective} ({os.path.basename(m.source)})" for m in cal.fit_sources)),
           ("algorithm assumed", cal.algorithm), ("link bandwidth", f"{cal.bandwidth_GBps:.3f} GB/s"),
           ("link latency (per step)", f"{cal.latency_us:.2f} us"), ("per-call overhead", f"{cal.launch_us:.1f} us"),
           ("host model", cal.host_model + (f" (host memory rate {cal.host_GBps:.2f} GB/s)" if cal.host_GBps else "")),
           ("fit residual, median |error|", f"{cal.fit_median_abs_rel_error:.1%}")]
    for h in cal.holdout:
        out.append((f"held out: {h.measurement.collective} ({os.path.basename(h.measurement.source)})",
                    f"median |error| {h.summary['median_abs_rel_error']:.1%}"))
    return out


def _md_table(head, rows) -> list[str]:
    def cells(values):   # a bare | would end the cell
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"
    return [cells(head), "|" + "|".join("---" for _ in head) + "|"] + [cells(r) for r in rows]


def markdown(comparisons, calibration=None, figures: dict | None = None, title: str | None = None,
             commands: list[str] | None = None) -> str:
    """The report as Markdown; ``figures[(index, name)]`` is the relative path of each PNG."""
    figures = figures or {}
    out = [f"# {title or default_title(comparisons)}", "",
           f"Generated by collsim on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. Times are per call in "
           "microseconds; bandwidths are decimal GB/s (1e9 B/s) with nccl-tests' bus factors; "
           "errors are (predicted - measured) / measured.", ""]
    if calibration is not None:
        out += ["## Calibration", ""] + _md_table(["quantity", "value"], [list(r) for r in _calibration_rows(calibration)])
        out += [""] + [f"- {n}" for n in calibration.notes] + [""]
    for i, c in enumerate(comparisons):
        m = c.measurement
        out += [f"## {section_title(c)}", "",
                f"- Measured: `{m.source}` ({m.kind}), {m.collective} on {m.nranks} ranks"
                + (f", {m.label}" if m.label else "") + (f", backend {m.backend}" if m.backend else ""),
                f"- Model: {c.predictor_description}",
                f"- Measured time used: {time_rule(c.time_choice)}", ""]
        out += _md_table(["metric", "value"], [list(r) for r in _summary_rows(c)]) + [""]
        out += ["**Reading.** " + " ".join(c.reading), ""]
        for name, caption, _ in _figure_list():
            if (i, name) in figures:
                out += [f"![{caption}]({figures[(i, name)]})", ""]
        out += _md_table(*_size_rows(c)) + [""]
        out += [f"- note: {n}" for n in c.notes] + ([""] if c.notes else [])
    if commands:
        out += ["## Reproduce", "", "```"] + commands + ["```", ""]
    return "\n".join(out)


def default_title(comparisons) -> str:
    c = comparisons[0]
    return f"Prediction vs measurement: {c.measurement.collective} on {c.measurement.label or c.topology}"


def section_title(c) -> str:
    m = c.measurement
    return f"{m.collective}, {m.nranks} ranks: measured vs predicted"


def _figure_list():
    from .figures import FIGURES
    return FIGURES


# ---- HTML -------------------------------------------------------------------------------------------
_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:60rem;margin:2rem auto;
padding:0 1rem;color:#222;line-height:1.45}table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #ccc;padding:.25rem .55rem;text-align:right}th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;display:block;margin:.8rem 0}code,pre{background:#f6f6f6;padding:.1rem .3rem}
pre{padding:.6rem;overflow-x:auto}.note{color:#555;font-size:.9rem}"""


def _html_table(head, rows) -> str:
    h = "".join(f"<th>{html.escape(x)}</th>" for x in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def html_report(comparisons, calibration=None, pngs: dict | None = None, title: str | None = None,
                commands: list[str] | None = None) -> str:
    """The report as one HTML page; ``pngs[(index, name)]`` are PNG bytes, embedded as data URIs."""
    pngs = pngs or {}
    t = html.escape(title or default_title(comparisons))
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{t}</title><style>{_CSS}</style></head><body>",
             f"<h1>{t}</h1>",
             f"<p class='note'>Generated by collsim on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. Times are per call "
             "in microseconds; bandwidths are decimal GB/s (1e9 B/s) with nccl-tests' bus factors; errors are "
             "(predicted &minus; measured) / measured.</p>"]
    if calibration is not None:
        parts += ["<h2>Calibration</h2>", _html_table(["quantity", "value"], [list(r) for r in _calibration_rows(calibration)])]
        parts += [f"<p class='note'>{html.escape(n)}</p>" for n in calibration.notes]
    for i, c in enumerate(comparisons):
        m = c.measurement
        parts += [f"<h2>{html.escape(section_title(c))}</h2>", "<ul>",
                  f"<li>Measured: <code>{html.escape(m.source)}</code> ({m.kind}), {html.escape(m.collective)} on {m.nranks} ranks"
                  + (f", {html.escape(m.label)}" if m.label else "") + (f", backend {html.escape(m.backend)}" if m.backend else "") + "</li>",
                  f"<li>Model: {html.escape(c.predictor_description)}</li>",
                  f"<li>Measured time used: {html.escape(time_rule(c.time_choice))}</li></ul>",
                  _html_table(["metric", "value"], [list(r) for r in _summary_rows(c)]),
                  f"<p><b>Reading.</b> {html.escape(' '.join(c.reading))}</p>"]
        for name, caption, _ in _figure_list():
            if (i, name) in pngs:
                data = base64.b64encode(pngs[(i, name)]).decode("ascii")
                parts.append(f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>")
        parts.append(_html_table(*_size_rows(c)))
        parts += [f"<p class='note'>note: {html.escape(n)}</p>" for n in c.notes]
    if commands:
        parts += ["<h2>Reproduce</h2>", "<pre>" + html.escape("\n".join(commands)) + "</pre>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def check_report_target(directory: str | None, inputs) -> None:
    """Refuse, before any work, a report folder where ``write_report`` would write over one of ``inputs``
    (its ``report.md``, ``report.html`` or a file under ``figures/``): checked per file at write time too,
    but by then the other files of the report would already be written."""
    if not directory:
        return
    folder = os.path.realpath(directory)
    figures = os.path.join(folder, "figures")
    fixed = {os.path.join(folder, "report.md"), os.path.join(folder, "report.html")}
    for p in inputs:
        try:
            real = os.path.realpath(p)
            st = os.stat(p)
        except (OSError, ValueError):
            continue
        hit = real in fixed or os.path.dirname(real) == figures
        for out in fixed:   # a hard link to an input under another name
            try:
                hit = hit or os.stat(out) == st
            except OSError:
                pass
        if hit:
            raise CollsimError(f"--report {directory}: the report would write over {p}, an input of this command "
                               "(report.md, report.html and figures/ are its files): choose another folder")


def write_report(directory: str, comparisons, calibration=None, title: str | None = None,
                 commands: list[str] | None = None) -> dict:
    """Write ``report.md`` (+ ``figures/*.png``) and ``report.html`` under ``directory``; return their paths."""
    comparisons = list(comparisons)
    os.makedirs(os.path.join(directory, "figures"), exist_ok=True)
    pngs, rel = {}, {}
    for i, c in enumerate(comparisons):
        for name, _caption, make in _figure_list():
            png = make(c)
            pngs[(i, name)] = png
            path = os.path.join("figures", f"{i + 1}-{c.measurement.collective}-{name}.png")
            write_output(os.path.join(directory, path), png, "--report")
            rel[(i, name)] = path
    md_path, html_path = os.path.join(directory, "report.md"), os.path.join(directory, "report.html")
    write_output(md_path, markdown(comparisons, calibration, rel, title, commands), "--report")
    write_output(html_path, html_report(comparisons, calibration, pngs, title, commands), "--report")
    return {"markdown": md_path, "html": html_path, "figures": [os.path.join(directory, p) for p in rel.values()]}
