"""Scale benchmark: wall time, transfers per second and peak memory of collsim against world size,
each point next to the bare simpy reference measured in the same run (see ``cases.py``).

Run from the repository root::

    python benchmarks/run.py                 # 8..1024 ranks, all cases, ~5 min on 2 cores; writes docs/
    python benchmarks/run.py --quick         # 8..128 ranks, a minute; prints only
    python benchmarks/run.py --sizes 8,64,512 --cases ring,switch-4ch --no-write

It prints one table, and unless ``--no-write`` replaces the generated part of docs/performance.md and
redraws docs/performance.png. Besides the engine cases it times three command lines end to end
(interpreter start-up, imports and topology building included): the 1024-rank ring all-reduce of
``/work/shared/checks/scale-1024`` and the flow model on 16,384 H100 (all_reduce and all_to_all) and 128
GB200 NVL72 racks.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cases import CASES  # noqa: E402

SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
QUICK = (8, 16, 32, 64, 128)
DOC = os.path.join(ROOT, "docs", "performance.md")
FIGURE = os.path.join(ROOT, "docs", "performance.png")
BEGIN, END = "<!-- benchmark:begin (benchmarks/run.py writes this part) -->", "<!-- benchmark:end -->"
TBEGIN, TEND = "<!-- targets:begin (benchmarks/run.py writes this part) -->", "<!-- targets:end -->"
CLI_CASES = (
    ("scale-1024 check: ring all_reduce, 1024 ranks, 1 GiB, engine",
     ["simulate", "--topology", "ring:n=1024,bandwidth_GBps=100,latency_us=1", "--collective", "all_reduce",
      "--algorithm", "ring", "--protocol", "ideal", "-b", "1G", "-e", "1G", "--format", "json"], 1024, 2 * 1023 * 1024),
    ("flow: all_reduce on dgx-h100:nodes=2048 (16,384 GPUs), 1 GiB, auto",
     ["simulate", "--topology", "dgx-h100:nodes=2048", "--model", "flow", "-b", "1G", "-e", "1G", "--format", "json"], 0, 0),
    ("flow: all_reduce on gb200-nvl72:nodes=128 (9,216 GPUs), 1 GiB, auto",
     ["simulate", "--topology", "gb200-nvl72:nodes=128", "--model", "flow", "-b", "1G", "-e", "1G", "--format", "json"], 0, 0),
    ("flow: all_to_all on dgx-h100:nodes=2048 (16,384 GPUs), 1 GiB, default model",
     ["simulate", "--topology", "dgx-h100:nodes=2048", "--collective", "all_to_all", "-b", "1G", "-e", "1G",
      "--format", "json"], 0, 0),
)


# issue 14's targets: (what, collsim arguments, bar as a multiple of the bare simpy reference, or None for
# "an answer within 30 s or a clear refusal")
TARGETS = (
    ("1,024 GPUs: full sweep 8 B..8 GiB", ["--topology", "dgx-h100:nodes=128", "-b", "8", "-e", "8G", "-f", "2"], 2.0),
    ("1,024 GPUs: ring forced, 1 GiB", ["--topology", "dgx-h100:nodes=128", "--algorithm", "ring", "-b", "1G", "-e", "1G"], 1.0),
    ("1,024 GPUs: all_gather, 1 GiB", ["--topology", "dgx-h100:nodes=128", "--collective", "all_gather", "-b", "1G", "-e", "1G"], 1.0),
    ("16,384 GPUs: default model, 1 GiB", ["--topology", "dgx-h100:nodes=2048", "-b", "1G", "-e", "1G"], 2.0),
    ("131,072 GPUs (collsim builds at most 131,072 GPUs): 1 GiB", ["--topology", "dgx-h100:nodes=16384", "-b", "1G", "-e", "1G"], None),
)


def targets() -> list[dict]:
    """Issue 14's target table: each command in a fresh process, against bare simpy (1024 processes x
    2046 timeouts, the scale checks' reference) measured in the same run."""
    code = "import sys; sys.path.insert(0, %r); import time, cases; t = time.perf_counter(); " \
           "cases.bare_simpy(1024, 2 * 1023 * 1024); print(time.perf_counter() - t)" % HERE
    ref = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
    print(f"bare simpy reference (1024 x 2046 timeouts): {ref:.2f} s", flush=True)
    rows = []
    for what, argv, bar in TARGETS:
        try:
            wall, rss, payload = run_cli(["simulate", *argv, "--format", "json"], timeout=300)
            first = payload["results"][0]
            answer = f"{first['algorithm']}/{first['protocol']} ({', '.join(sorted({r['model'] for r in payload['results']}))})"
        except SystemExit as e:   # a refusal is an answer too, if it is clear
            wall, rss, answer = float("nan"), float("nan"), "refused: " + str(e).strip().splitlines()[-1][-120:]
        ratio = wall / ref
        ok = (ratio <= bar) if bar is not None else (wall <= 30 or answer.startswith("refused"))
        ok = ok and (rss != rss or rss <= 2048)
        rows.append({"what": what, "command": "collsim simulate " + " ".join(argv), "wall_s": wall, "peak_rss_MB": rss,
                     "ratio": ratio, "bar": bar, "answer": answer, "ok": bool(ok), "ref_wall_s": ref})
        print(f"{what}: {wall:.2f} s = {ratio:.2f}x bare simpy (bar {bar or '30 s'}), {rss:.0f} MB, {answer}"
              f" -> {'ok' if ok else 'MISSED'}", flush=True)
    return rows


def _targets_table(rows: list[dict]) -> str:
    out = [f"Bare simpy reference in the same run: {rows[0]['ref_wall_s']:.2f} s.", "",
           "| target | wall (s) | ratio to bare simpy | bar | peak RSS (MB) | timed | met |", "|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        out.append(f"| {r['what']} (`{r['command']}`) | {r['wall_s']:.2f} | **{r['ratio']:.2f}** | "
                   f"{str(r['bar']) + 'x' if r['bar'] else 'answer in 30 s'} | {r['peak_rss_MB']:.0f} | {r['answer']} | "
                   f"{'yes' if r['ok'] else 'no'} |")
    return "\n".join(out)


def child(case: str, nranks: int, rounds: int) -> dict:
    """Measure one point in a fresh interpreter (its own peak RSS)."""
    code = ("import json, sys; sys.path.insert(0, %r); from cases import measure; "
            "print(json.dumps(measure(%r, %d, %d)))" % (HERE, case, nranks, rounds))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise SystemExit(f"benchmark point {case} n={nranks} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_cli(argv: list[str], timeout: float | None = None) -> tuple[float, float, dict]:
    """Wall seconds and peak RSS (MB) of one ``python -m sim`` run, and its JSON output."""
    code = ("import resource, runpy, sys, time; sys.argv = ['collsim'] + %r; t = time.perf_counter()\n"
            "try:\n    runpy.run_module('sim', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('%%f %%f\\n' %% (time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))"
            % (argv,))
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"collsim {' '.join(argv)}: no answer in {timeout:.0f} s") from None
    wall = time.perf_counter() - t
    if p.returncode or not p.stdout.strip():
        raise SystemExit(f"collsim {' '.join(argv)} failed:\n{p.stderr}")
    rss = float(p.stderr.strip().splitlines()[-1].split()[1])
    return wall, rss, json.loads(p.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", help="comma-separated world sizes (default 8..1024)")
    ap.add_argument("--quick", action="store_true", help="8..128 ranks and no docs update")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated cases ({', '.join(CASES)})")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end command-line timings")
    ap.add_argument("--json", help="also save the raw measurements to this file")
    ap.add_argument("--targets-only", action="store_true", help="only issue 14's target table (about a minute)")
    ap.add_argument("--no-targets", action="store_true", help="skip issue 14's target table")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(QUICK if args.quick else SIZES)
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"unknown case {c!r}: choose from {', '.join(CASES)}")
    goals = [] if args.no_targets or args.quick else targets()
    if args.targets_only:
        print(_targets_table(goals))
        if not args.no_write:
            _write_block(TBEGIN, TEND, _targets_doc(goals))
            print(f"wrote {os.path.relpath(DOC, ROOT)}")
        return 0
    rows = []
    for case in cases:
        for n in sizes:
            if case == "dgx" and n < 16:
                continue   # at least two nodes
            row = child(case, n, 5 if n <= 128 else 3 if n <= 512 else 2)
            rows.append(row)
            print(_line(row), flush=True)
    cli = [] if args.no_cli or args.quick else _cli_rows()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "cli": cli, "targets": goals}, f, indent=1)
    if goals:
        print(_targets_table(goals))
    if not (args.no_write or args.quick):
        _write_doc(rows, cli, sizes)
        if goals:
            _write_block(TBEGIN, TEND, _targets_doc(goals))
        _figure(rows, cases)
        print(f"wrote {os.path.relpath(DOC, ROOT)} and {os.path.relpath(FIGURE, ROOT)}")
    return 0


def _cli_rows() -> list[dict]:
    out = []
    for label, argv, nranks, transfers in CLI_CASES:
        wall, rss, payload = run_cli(argv)
        row = {"label": label, "command": "collsim " + " ".join(a for a in argv if a not in ("--format", "json")),
               "wall_s": wall, "peak_rss_MB": rss, "time_us": payload["results"][0]["time_us"],
               "protocol": payload["results"][0]["protocol"]}
        if transfers:   # the same reference the scale-1024 check runs
            code = "import sys; sys.path.insert(0, %r); import time, cases; t = time.perf_counter(); " \
                   "cases.bare_simpy(%d, %d); print(time.perf_counter() - t)" % (HERE, nranks, transfers)
            ref = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
            row.update(ref_wall_s=ref, ratio=wall / ref)
        out.append(row)
        print(f"{label}: {wall:.2f} s wall, {rss:.0f} MB" + (f", ratio {row['ratio']:.2f}" if transfers else ""), flush=True)
    return out


def _line(r: dict) -> str:
    return (f"{r['case']:>10s} n={r['nranks']:>5d}  transfers {r['transfers']:>9d}  simulated {r['simulated']:>9d}  "
            f"{r['wall_s']:7.3f} s  {r['transfers'] / r['wall_s']:>12.0f} transfers/s  {r['peak_rss_MB']:6.0f} MB  |  "
            f"simpy {r['ref_wall_s']:7.3f} s  ratio {r['ratio']:.3f}")


def _table(rows: list[dict]) -> str:
    out = ["| case | ranks | transfers | simulated | wall (s) | transfers/s | peak RSS (MB) | bare simpy (s) | ratio |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['nranks']} | {r['transfers']:,} | {r['simulated']:,} | {r['wall_s']:.3f} | "
                   f"{r['transfers'] / r['wall_s']:,.0f} | {r['peak_rss_MB']:.0f} | {r['ref_wall_s']:.3f} | "
                   f"**{r['ratio']:.3f}** |")
    return "\n".join(out)


def _targets_doc(goals: list[dict]) -> str:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return "\n".join([f"Measured {stamp} on {platform.machine()} ({os.cpu_count()} cores, shared), Python "
                      f"{platform.python_version()}, by `python benchmarks/run.py --targets-only`; each command in a "
                      f"fresh process (start-up, imports and topology building included).", "", _targets_table(goals)])


def _write_block(begin: str, end: str, body: str) -> None:
    """Replace the text between ``begin`` and ``end`` in docs/performance.md (appended if missing)."""
    text = open(DOC).read()
    if begin not in text or end not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    with open(DOC, "w") as f:
        f.write(head + begin + "\n\n" + body + "\n\n" + end + rest.split(end, 1)[1])


def _write_doc(rows: list[dict], cli: list[dict], sizes) -> None:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    parts = [BEGIN, "",
             f"Measured {stamp} on {platform.machine()} ({os.cpu_count()} cores, shared), Python "
             f"{platform.python_version()}, by `python benchmarks/run.py` (sizes {', '.join(map(str, sizes))}).", "",
             "Cases: " + "; ".join(f"`{k}`: {v[1]}" for k, v in CASES.items()) + ".", "",
             _table(rows), ""]
    if cli:
        parts += ["End to end (a fresh `python -m sim`: start-up, imports, topology, prediction):", "",
                  "| command | wall (s) | peak RSS (MB) | predicted time (us) | bare simpy (s) | ratio |",
                  "|---|---:|---:|---:|---:|---:|"]
        for c in cli:
            parts.append(f"| `{c['command']}` | {c['wall_s']:.2f} | {c['peak_rss_MB']:.0f} | {c['time_us']:.2f} ({c['protocol']}) | "
                         + (f"{c['ref_wall_s']:.2f} | **{c['ratio']:.2f}** |" if "ratio" in c else "– | – |"))
        parts.append("")
    parts.append(END)
    text = open(DOC).read() if os.path.exists(DOC) else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC, "w") as f:
        f.write(head + "\n".join(parts) + tail)


def _figure(rows: list[dict], cases) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    colors = dict(zip(CASES, ("C0", "C1", "C2", "C3")))
    for case in cases:
        rs = [r for r in rows if r["case"] == case]
        if not rs:
            continue
        n = [r["nranks"] for r in rs]
        c = colors[case]
        axes[0].plot(n, [r["wall_s"] for r in rs], "o-", color=c, label=f"{case}")
        axes[0].plot(n, [r["ref_wall_s"] for r in rs], "x--", color=c, alpha=0.6, label=f"{case}: bare simpy")
        axes[1].plot(n, [r["ratio"] for r in rs], "o-", color=c, label=case)
        axes[2].plot(n, [r["peak_rss_MB"] for r in rs], "o-", color=c, label=case)
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[1].text(8, 1.05, "as fast as bare simpy", fontsize=8)
    titles = ("wall time (s): collsim (solid) vs bare simpy, same transfers (dashed)",
              "ratio collsim / bare simpy (lower is faster)", "peak RSS (MB) of the process (Python + numpy: ~32)")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("world size (ranks)")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    axes[1].legend(fontsize=7)
    fig.suptitle("collsim engine scaling: ring all_reduce of 1 GiB, one fresh process per point", fontsize=11)
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
