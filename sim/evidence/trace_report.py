"""``collsim trace`` output: a text table, and a Markdown or HTML report with figures (the style of
``collsim compare``'s report: one page, tables, PNG figures embedded in HTML or written beside Markdown).

Every function takes the JSON document of :func:`sim.evidence.job_compare.compare_job`.
"""
from __future__ import annotations

import base64
import datetime
import html

from ..io.printable import printable
from ..units import format_size
from ..viz.canvas import png_bytes, report_figure

_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:64rem;margin:2rem auto;
padding:0 1rem;color:#222;line-height:1.45}table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;display:block;margin:.8rem 0}.note{color:#555;font-size:.9rem}"""


def _us(x) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def _choice(a, p) -> str:
    return (f"{a}/{p}" if p else a) if a else "-"   # NCCL's p2p names no protocol: "p2p", not "p2p/None"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def collective_table(doc: dict) -> tuple[list[str], list[list[str]]]:
    head = ["collective", "bytes/rank", "group", "calls", "ranks", "measured us (median)", "spread us", "slowest",
            "predicted us", "measured/pred", "NCCL algo/proto", "model algo/proto"]
    rows: list[list[str]] = []
    for r in doc["collectives"]:
        src = {"kernel name": " (kernel)", "NCCL log": " (log)"}.get(r["nccl_choice_source"] or "", "")
        rows.append([r["collective"], format_size(r["nbytes"]) if r["nbytes"] is not None else "?",
                     str(r["group_size"] or "?"), str(r["calls"]), _ranks_text(r["ranks"]), _us(r["measured_us"]),
                     _us(r["spread_us"]), "-" if r["slowest_rank"] is None else str(r["slowest_rank"]),
                     _us(r["predicted_us"]), "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
                     _choice(r["nccl_algorithm"], r["nccl_protocol"]) + src,
                     _choice(r["model_algorithm"], r["model_protocol"])])
    return head, [[printable(c) for c in row] for row in rows]   # names come from the traces and dumps


def _ranks_text(ranks: list) -> str:
    if len(ranks) > 4 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "")


def summary_lines(doc: dict) -> list[str]:
    """Agreement, step shares, stragglers, logs and notes as short sentences."""
    out = []
    a = doc["agreement"]
    if a["calls"]:
        unnamed = a["calls"] - a.get("protocol_calls", a["calls"])
        proto = (f"protocol {_pct(a['protocol_rate'])}, both {_pct(a['rate'])}" if a.get("protocol_calls", 1) else
                 "protocol not named")
        out.append(f"NCCL's choice vs the model's over {a['calls']} calls: algorithm {_pct(a['algorithm_rate'])}, {proto} (from "
                   + ", ".join(f"{k}: {v}" for k, v in a["sources"].items()) + ")"
                   + (f"; {unnamed} SendRecv call(s) name no protocol and are not counted in it" if unnamed else ""))
        if a["caveat"]:
            out.append(f"caveat: {a['caveat']}")
    elif a.get("recorded_calls"):
        out.append(f"NCCL's algorithm/protocol: recorded for {a['recorded_calls']} call(s), but none of them was "
                   "predicted (see the rows without a prediction and the notes), so no agreement is scored")
    else:
        out.append("NCCL's algorithm/protocol: not recorded (no NCCL kernels or tuning log lines)")
    s = doc["step"]
    if s["span_us"]:
        parts = [f"{b['collective']} {_pct(b['share'])}" + (f" ({_pct(b['exposed_share'])} exposed)" if b["exposed_share"] is not None else "")
                 for b in s["by_collective"]]
        out.append(f"step ({_us(s['span_us'])} us recorded per rank): communication {_pct(s['comm_share'])}: " + ", ".join(parts)
                   + ("" if s["exposed_known"] else "; exposed time not known (no GPU compute kernels in the trace)"))
    st = doc["stragglers"]
    if st["named"]:
        out.append(f"stragglers: rank(s) {', '.join(map(str, st['named']))} issue calls late ({st['rule']})")
    elif any(t["matched_calls"] for t in st["ranks"]):
        worst = max((t for t in st["ranks"] if t["late_us_median"] is not None), key=lambda t: t["late_us_median"])
        out.append(f"no straggler: the latest rank ({worst['rank']}) issues calls a median {_us(worst['late_us_median'])} us "
                   "after the first")
    for log in doc["logs"]:
        out.append(f"NCCL log {log['source']}: NCCL {log['version'] or '?'}, {log['nranks'] or '?'} ranks on {log['nnodes'] or '?'} "
                   f"node(s), {log['rings'] or '?'} rings, {log['coll_channels'] or '?'} coll channels, NVLS "
                   f"{ {True: 'available', False: 'not available', None: '?'}[log['nvls']] }, network {log['network'] or '?'}")
    out += [f"note: {n}" for n in doc["notes"]]
    # notes and log facts quote the files (a device name, a refused dump's reason): one line each, no terminal
    # control characters (sim.io.printable)
    return [printable(line) for line in out]


def text_table(doc: dict) -> str:
    head, rows = collective_table(doc)
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) if rows else len(head[i]) for i in range(len(head))]
    fmt = lambda cells: "  ".join(c.ljust(w) if i in (0, 10, 11) else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    title = (f"collsim trace: {len(doc['collectives'])} distinct collectives from {len(doc['sources'])} source(s), "
             f"ranks {_ranks_text(doc['ranks'])}, predicted on {doc['topology'] or '(no topology)'}")
    lines = [printable(title), fmt(head)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines + [""] + summary_lines(doc))


# ---- figures ---------------------------------------------------------------------------------------
def time_figure(doc: dict) -> bytes | None:
    """Measured (median, min-max bar) and predicted time per distinct collective against its size."""
    rows = [r for r in doc["collectives"] if r["measured_us"] and r["nccl_tests_nbytes"]]
    if not rows:
        return None
    fig, ax = report_figure()
    colours: dict = {}
    for r in rows:
        c = colours.setdefault(r["collective"], f"C{len(colours) % 10}")
        x = r["nccl_tests_nbytes"]
        ax.errorbar([x], [r["measured_us"]], yerr=[[r["measured_us"] - r["measured_min_us"]], [r["measured_max_us"] - r["measured_us"]]],
                    fmt="o", color=c, capsize=3)
        if r["predicted_us"]:
            ax.plot([x], [r["predicted_us"]], marker="s", mfc="none", color=c, linestyle="none")
    for name, c in colours.items():
        ax.plot([], [], "o", color=c, label=f"{name} measured")
    ax.plot([], [], "s", mfc="none", color="k", label="predicted")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (bytes, nccl-tests' convention)")
    ax.set_ylabel("time per call (us)")
    ax.set_title(f"measured vs predicted on {doc['topology'] or '-'}")
    ax.legend(fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    return png_bytes(fig)


def share_figure(doc: dict) -> bytes | None:
    """Share of the recorded step per collective type, split into exposed and overlapped where known."""
    by = doc["step"]["by_collective"]
    if not by:
        return None
    fig, ax = report_figure(7.0, max(2.4, 1.3 + 0.45 * len(by)))
    names = [b["collective"] for b in by][::-1]
    total = [100 * b["share"] for b in by][::-1]
    if doc["step"]["exposed_known"]:
        exposed = [100 * (b["exposed_share"] or 0) for b in by][::-1]
        ax.barh(names, exposed, color="#d62728", label="exposed (no compute running)")
        ax.barh(names, [t - e for t, e in zip(total, exposed)], left=exposed, color="#1f77b4", label="overlapped with compute")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=2, frameon=False)
    else:
        ax.barh(names, total, color="#1f77b4")
    ax.set_xlabel("% of the recorded step (per rank)")
    return png_bytes(fig)


FIGURES = (("time", "Measured (median, min-max) and predicted time per distinct collective", time_figure),
           ("share", "Share of the step per collective type", share_figure))


# ---- Markdown / HTML --------------------------------------------------------------------------------
def _md_table(head, rows) -> list[str]:
    cell = lambda vs: "| " + " | ".join(str(v).replace("|", "\\|") for v in vs) + " |"
    return [cell(head), "|" + "|".join("---" for _ in head) + "|"] + [cell(r) for r in rows]


def _intro(doc: dict) -> str:
    return printable(f"Generated by collsim on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} from "
                     f"{len(doc['sources'])} source(s); ranks {_ranks_text(doc['ranks'])}; predictions on "
                     f"{doc['topology'] or '(none)'}. Times are per call in microseconds. {doc['byte_convention']}.")


def markdown(doc: dict, figures: dict | None = None) -> str:
    """The report as Markdown; ``figures[name]`` is the relative path of each PNG written beside it."""
    out = ["# collsim trace: the job's collectives against the model", "", _intro(doc), ""]
    out += _md_table(*collective_table(doc)) + [""]
    out += [f"- {line}" for line in summary_lines(doc)] + [""]
    for name, caption, _ in FIGURES:
        if figures and name in figures:
            out += [f"![{caption}]({figures[name]})", ""]
    out += [printable("Sources: " + ", ".join(f"`{s}`" for s in doc["sources"])), ""]
    return "\n".join(out)


def html_report(doc: dict) -> str:
    """The report as one HTML page, figures embedded."""
    def table(head, rows):
        h = "".join(f"<th>{html.escape(x)}</th>" for x in head)
        b = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
        return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"
    t = "collsim trace: the job's collectives against the model"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{t}</title><style>{_CSS}</style></head><body>",
             f"<h1>{t}</h1>", f"<p class='note'>{html.escape(_intro(doc))}</p>", table(*collective_table(doc)), "<ul>"]
    parts += [f"<li>{html.escape(line)}</li>" for line in summary_lines(doc)] + ["</ul>"]
    for _name, caption, make in FIGURES:
        png = make(doc)
        if png:
            parts.append(f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>")
    parts += ["<p class='note'>Sources: " + html.escape(printable(", ".join(doc["sources"]))) + "</p>", "</body></html>"]
    return "\n".join(parts)
