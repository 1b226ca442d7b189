"""``collsim compare`` and ``collsim calibrate`` (no torch needed: they read measured files).

Examples::

    collsim compare --measured ar.json --topology local.yaml
    collsim compare --measured a100.txt --topology dgx-a100 --report a100-report
    collsim compare --measured old_format.txt --topology dgx-a100 --collective all_reduce --format json
    collsim calibrate ag.json --out local.yaml --holdout ar.json --report calib-report
"""
from __future__ import annotations

import argparse
import json
import os

from sim.commands.common import check_output_dir
from sim.commands.simulate import add_nccl_args, nccl_config_printed
from sim.errors import CollsimError
from sim.io.safe_io import check_not_input, check_output, write_output

COMPARE_HELP = """\
Predict every size of a measured sweep and score the prediction: a table per size (measured and
predicted time, algbw, busbw, relative error, the algorithm/protocol predicted), summary metrics
(median and mean |error|, geometric-mean error, worst size) and a short reading (latency- or
bandwidth-bound, which term the miss comes from). FILE is `collsim bench --format json` output or
raw nccl-tests output (current or older column layout). Errors are (predicted - measured)/measured."""

CALIBRATE_HELP = """\
Fit a topology to measured sweeps: link bandwidth and latency, per-call overhead and (for torch's gloo)
the host memory rate, by robust least squares through the algorithm's structure (see docs/compare.md).
Writes a YAML topology that `collsim simulate/compare --topology FILE` load; --holdout files are
predicted with it and scored (cross-validation: calibrate on all_gather, predict all_reduce)."""


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="prediction vs measurement: per-size errors, summary, report",
                              description=COMPARE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--measured", "-m", required=True, metavar="FILE", help="collsim bench JSON or nccl-tests text output")
    p.add_argument("--topology", "-t", required=True, help="preset spec NAME[:k=v,...] or .yaml/.json (e.g. one written by collsim calibrate)")
    _measured_args(p)
    p.add_argument("--algorithm", "-a", default="auto", help="auto (calibrated model's, else the simulator's choice) or a name")
    p.add_argument("--protocol", "-p", default="auto", help="auto, ideal, LL, LL128 or Simple")
    p.add_argument("--model", default="engine", choices=("engine", "tuner", "alpha-beta"), help="simulator model (default engine)")
    p.add_argument("--time", default="best", choices=("best", "out-of-place", "in-place"),
                   help="measured time to compare: best (faster of out-of-place and in-place, default), out-of-place, in-place")
    p.add_argument("--min-size", default="0", metavar="BYTES", help="leave out smaller sizes (e.g. 64K)")
    p.add_argument("--format", default="table", choices=("table", "json", "csv"))
    p.add_argument("--report", metavar="DIR", help="write report.md, report.html and figures/ here")
    add_nccl_args(p, default_note="default: the release the measured output prints ('NCCL version 2.22.3'), else the newest")
    p.set_defaults(func=run_compare)

    c = subparsers.add_parser("calibrate", help="fit link bandwidth/latency to measurements; write a topology file",
                              description=CALIBRATE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("measured", nargs="+", metavar="MEASURED", help="collsim bench JSON or nccl-tests text files to fit")
    c.add_argument("--out", "-o", required=True, metavar="TOPO.yaml", help="topology file to write (.yaml or .json)")
    c.add_argument("--holdout", nargs="+", default=[], metavar="FILE", help="measured files to predict and score, not fitted")
    _measured_args(c)
    c.add_argument("--algorithm", default="ring", help="algorithm the measured library runs (default ring: gloo, NCCL at large sizes)")
    c.add_argument("--host-model", default="auto", choices=("auto", "none", "torch-gloo", "torch-gloo-cache"),
                   help="host-side copies/reductions: auto (for gloo runs on one host torch-gloo-cache where the "
                        "bench recorded the CPU cache, env.cpu_cache, else torch-gloo; none elsewhere); torch-gloo "
                        "leaves the cache knee out")
    c.add_argument("--latency-us", type=float, default=None,
                   help="fix the per-step link latency (us) instead of fitting it")
    c.add_argument("--measured-latency", action="store_true",
                   help="take the per-step latency from the message latency collsim bench measured (env.p2p_latency_us)")
    c.add_argument("--name", default=None, help="topology name (default calibrated-<where it ran>)")
    c.add_argument("--format", default="text", choices=("text", "json"))
    c.add_argument("--report", metavar="DIR", help="write a report of the fit and the held-out predictions here")
    c.set_defaults(func=run_calibrate)


def _measured_args(p) -> None:
    p.add_argument("--statistic", default="median", choices=("median", "mean", "min", "auto"),
                   help="statistic of each size's timed iterations: median (default), mean (nccl-tests' time column), "
                        "min (least disturbed) or auto (the median, or the minimum where the bench flagged the "
                        "iterations as noisy); files with only a mean use the mean")
    p.add_argument("--collective", "-c", default=None, help="collective of nccl-tests text that does not name it")
    p.add_argument("--nranks", "-n", type=int, default=None, help="rank count of nccl-tests text that does not list its ranks")


def run_compare(args) -> int:
    check_output_dir(args.report, "--report")
    from .compare.markdown_report import check_report_target
    check_report_target(args.report, [args.measured])
    from sim.presets import load_topology
    from sim.units import parse_size

    from .compare.markdown_report import text_table, write_report
    from .compare.measured import read_measurement
    from .compare.mismatch import mismatch
    from .compare.score import compare
    m = read_measurement(args.measured, args.collective, args.nranks)
    topo = load_topology(args.topology)
    warning = mismatch(m, topo)
    if warning:   # one line, before the numbers it qualifies (and in the JSON/report notes)
        import sys
        print(warning, file=sys.stderr)
    printed = m.env.get("nccl_version") if isinstance(m.env.get("nccl_version"), str) else None
    cfg, release_note = nccl_config_printed(args, printed, "the output")
    if m.backend not in (None, "nccl"):
        release_note = None   # a gloo sweep: NCCL's release has nothing to say about it
    from sim.nccl import config as nccl_config
    with nccl_config.use(cfg):
        c = compare(m, topo, algorithm=args.algorithm, protocol=args.protocol, model=args.model,
                    time=args.time, min_bytes=parse_size(args.min_size), statistic=args.statistic)
    notes = tuple(n for n in (warning, release_note) if n)
    if notes:
        import dataclasses
        c = dataclasses.replace(c, notes=notes + tuple(c.notes))
    if args.format == "json":
        print(json.dumps({**c.to_dict(), "nccl_version": cfg.version}, indent=1))
    elif args.format == "csv":
        from sim.commands.common import csv_text
        print(csv_text(c.to_dict()["rows"]))
    else:
        print(text_table(c))
    if args.report:
        paths = write_report(args.report, [c], commands=[_command_line("compare", args)])
        _say(args.format, f"report: {paths['html']} and {paths['markdown']}")
    return 0


def run_calibrate(args) -> int:
    check_output_dir(args.report, "--report")
    from .compare.markdown_report import check_report_target
    check_report_target(args.report, [*args.measured, *args.holdout])
    from .compare.calibrate import calibrate
    from .compare.measured import read_measurement
    out = args.out
    if not out.lower().endswith((".yaml", ".yml", ".json")):
        raise CollsimError(f"--out {out!r}: name the topology file .yaml, .yml or .json so collsim can load it")
    check_output(out, "--out")
    check_not_input(out, "--out", [*args.measured, *args.holdout])
    fit = [read_measurement(p, args.collective, args.nranks) for p in args.measured]
    held = [read_measurement(p, None, args.nranks) for p in args.holdout]
    from .compare.mismatch import mixed
    warning = mixed(fit + held)
    if warning:
        import sys
        print(warning, file=sys.stderr)
    cal = calibrate(fit, holdout=held, host_model=args.host_model, algorithm=args.algorithm,
                    latency_us=args.latency_us, measured_latency=args.measured_latency, name=args.name,
                    statistic=args.statistic)
    write_output(out, json.dumps(cal.document, indent=1) if out.lower().endswith(".json") else cal.to_yaml(), "--out")
    if args.format == "json":
        print(json.dumps({"out": out, "bandwidth_GBps": cal.bandwidth_GBps, "latency_us": cal.latency_us,
                          "launch_us": cal.launch_us, "host_model": cal.host_model, "host_GBps": cal.host_GBps,
                          "fit_median_abs_rel_error": cal.fit_median_abs_rel_error,
                          "statistic": cal.document["meta"]["calibration"]["statistic"],
                          "uncertainty": cal.uncertainty,
                          "holdout": [h.to_dict() for h in cal.holdout], "notes": list(cal.notes)}, indent=1))
    else:
        print(calibration_text(cal, out))
    if args.report:
        from .compare.markdown_report import write_report
        from .compare.score import compare
        comps = list(cal.holdout) or [compare(m, cal.topology) for m in fit]
        paths = write_report(args.report, comps, calibration=cal, commands=[_command_line("calibrate", args)])
        _say(args.format, f"report: {paths['html']} and {paths['markdown']}")
    return 0


def calibration_text(cal, out: str) -> str:
    """What a calibration found, in a few lines (and each held-out comparison's table)."""
    from .compare.markdown_report import text_table
    u = cal.uncertainty
    rng = lambda key, fmt: (f"   (95%: {u[key]['low']:{fmt}} .. {u[key]['high']:{fmt}})" if key in u else "")
    stat = cal.document["meta"]["calibration"].get("statistic", "mean")
    lines = [f"# collsim calibrate: {len(cal.fit_sources)} file(s), {cal.nranks} ranks, through {cal.algorithm}, "
             f"{stat} of each size's iterations",
             f"#   link bandwidth     {cal.bandwidth_GBps:10.4f} GB/s" + rng("link_bandwidth_GBps", ".4f"),
             f"#   link latency       {cal.latency_us:10.3f} us per step" + rng("link_latency_us", ".3f"),
             f"#   per-call overhead  {cal.launch_us:10.3f} us" + rng("launch_us", ".3f"),
             f"#   host model         {cal.host_model}" + (f" at {cal.host_GBps:.3f} GB/s" if cal.host_GBps else ""),
             f"#   fit residual       median |error| {cal.fit_median_abs_rel_error:.1%} over {len(cal.residuals)} timings"]
    if u.get("method"):
        lines.append(f"#   uncertainty        {u['method']}")
    lines += [f"# note: {n}" for n in cal.notes]
    lines.append(f"# wrote {out}: use it with `collsim compare --topology {out}` or `collsim simulate --topology {out}`")
    for h in cal.holdout:
        lines += ["", text_table(h)]
    return "\n".join(lines)


def _say(fmt: str, text: str) -> None:
    import sys
    print(text, file=sys.stderr if fmt != "table" and fmt != "text" else sys.stdout)


def _command_line(name: str, args) -> str:
    import shlex
    import sys
    argv = sys.argv[1:] if sys.argv and os.path.basename(sys.argv[0]) in ("collsim", "__main__.py") else []
    return "collsim " + (" ".join(shlex.quote(a) for a in argv) if argv else name)
