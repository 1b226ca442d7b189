"""``collsim validate``: predictions against published (or your own) nccl-tests measurements.

Per case it prints the median relative error of busbw over sizes >= 64 MiB (bandwidth regime), the
median relative error of time over sizes <= 64 KiB (latency regime), the algorithms and protocols the
model chose, and the run time; then an overall line pooling every case's errors (the acceptance rule).

FILE is one of:

* a cases file like ``sim/data/public_cases.json`` (``{"cases": [{"id", "topology", "rows": [{"size",
  "time_us", "busbw"}...]}]}``); a case without ``topology`` takes ``--topology``. A case may pin
  ``algorithm``/``protocol`` (the measurement forced them with NCCL_ALGO/NCCL_PROTO); ``--auto`` ignores
  the pins and lets the model choose, as the acceptance check does;
* raw nccl-tests output (``all_reduce_perf ... > out.txt``), with ``--topology SPEC`` describing the
  machine it ran on: one case, out-of-place columns;
* collsim JSON with measured ``results`` (``collsim bench --format json``), with ``--topology``.

``collsim validate`` with no FILE validates the public cases shipped with collsim.
"""
from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time

from .. import api
from ..collectives import get_collective
from ..errors import CollsimError
from ..io.nccl_tests_format import all_reduce_by_columns_note, collective_from_rows, parse_nccl_tests, parse_nccl_tests_meta
from ..io.safe_io import read_input
from ..io.validation import MAX_BYTES, MAX_GBPS, MAX_RANKS, MAX_US, number, whole
from ..nccl import config as nccl_config
from ..nccl.machine import with_gpus_per_process
from ..prediction import sweep
from ..prediction.intervals import RESIDUALS, regime
from ..presets import load_topology

BW_MIN_BYTES = 64 << 20
LAT_MAX_BYTES = 64 << 10
MAX_MEASUREMENT_BYTES = 64 << 20  # nccl-tests output of every size and type is well under 1 MiB
# No collective completes in under a nanosecond (nccl-tests prints 0.01 us steps); a smaller non-zero time is a
# unit mistake or damage, and scored it makes an error of 10**300 %
MIN_TIME_US = 1e-3
PUBLIC_CASES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "public_cases.json")


def register(sub) -> None:
    p = sub.add_parser("validate", help="compare predictions with published or your own nccl-tests results",
                       description="Median relative error of busbw (sizes >= 64 MiB) and of time (sizes <= 64 KiB) "
                                   "per case and overall, with the algorithms chosen.")
    p.add_argument("file", nargs="?", default=None,
                   help="cases JSON, raw nccl-tests output, or collsim JSON (default: the public cases); raw output is "
                        "predicted with the NCCL release its banner prints ('NCCL version 2.22.3'), else the newest")
    p.add_argument("--topology", "-t", default=None, help="topology spec for cases that name none (required for raw nccl-tests output)")
    p.add_argument("--collective", "-c", default=None, help="collective of raw output (default: from the *_perf name in it, else all_reduce where every row's "
                        "busbw/algbw is 2(n-1)/n; otherwise it must be given)")
    p.add_argument("--model", default="auto", choices=api.MODELS,
                   help="model to validate (default auto: the engine where it fits sim.simulate's time budget, the "
                        "large-scale flow models beyond, as a user's prediction runs)")
    p.add_argument("--algorithm", "-a", default=None, help="force an algorithm for every case (default: the case's pin, else auto)")
    p.add_argument("--protocol", "-p", default=None, help="force a protocol for every case (default: the case's pin, else auto)")
    p.add_argument("--auto", action="store_true", help="ignore the algorithms/protocols the cases pin (as the acceptance check runs)")
    p.add_argument("--case", action="append", default=None, help="only this case id (repeatable)")
    p.add_argument("--rows", action="store_true",
                   help="also print every size: measured vs predicted (with --cross-validate --format json: every "
                        "out-of-sample row with its 80%% range in cross_validated_cases, for scripts/accuracy_plots.py)")
    p.add_argument("--cross-validate", action="store_true",
                   help="also score every case out of sample: each fitted constant refitted without that case "
                        "(leave-one-case-out), reported beside the in-sample score")
    p.add_argument("--by", default="case", choices=("case", "system"),
                   help="with --cross-validate: leave out one case at a time (default), or every case of one "
                        "system (the cluster it was measured on) at a time")
    p.add_argument("--write-intervals", nargs="?", const=RESIDUALS, default=None, metavar="PATH",
                   help="with --cross-validate: write the out-of-sample residual table the 80%% ranges of "
                        "collsim simulate are made from (default: the package's sim/data/residuals.json)")
    p.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                   help="worker processes scoring the cases and making the cross-validation's runs (default 0: "
                        "every core; 1: in this process); every figure is the same whatever N")
    p.add_argument("--format", default="table", choices=("table", "json"))
    p.set_defaults(func=run)


# ---- reading measurements ------------------------------------------------------------------------
def load_cases(path: str | None, topology: str | None = None, collective: str | None = None) -> list[dict]:
    """Cases ``{"id", "topology", "collective", "rows": [{"size", "time_us", "busbw"}], ...}`` from ``path``,
    every number checked (sizes up to 1 PiB, finite non-negative times, a world size from 2 ranks)."""
    cases = _read_cases(path or PUBLIC_CASES, topology, collective)
    for c in cases:
        where = f"{path or PUBLIC_CASES}: case {str(c.get('id'))[:40]}"
        if c.get("nranks") is not None:
            c["nranks"] = whole(c["nranks"], f"{where}: nranks", low=2, high=MAX_RANKS)
        if not isinstance(c.get("rows"), list) or not c["rows"]:
            raise CollsimError(f"{where}: no measured sizes: 'rows' must be a non-empty list of {{size, time_us, busbw}} "
                               "(a collsim JSON needs 'nbytes' and 'time_us' per result)")
        for i, r in enumerate(c["rows"]):
            if not isinstance(r, dict):
                raise CollsimError(f"{where}: row #{i} must be a mapping {{size, time_us, busbw}}")
            whole(r.get("size"), f"{where}: row #{i} size", low=0, high=MAX_BYTES)
            t = number(r.get("time_us"), f"{where}: row #{i} time_us", low=0, high=MAX_US)
            if 0 < t < MIN_TIME_US:
                raise CollsimError(f"{where}: row #{i} time_us {t:g} is under {MIN_TIME_US:g} us (a nanosecond), faster "
                                   "than any collective runs: is the unit microseconds? (fix or delete that row)")
            number(r.get("busbw", 0.0), f"{where}: row #{i} busbw", low=0, high=MAX_GBPS)
        # score_case leaves out rows of size 0 or time 0 (no error can be taken of them): say so, and refuse a
        # case with nothing else, which would be "scored" as n/a over 0 sizes and pass
        left = sum(1 for r in c["rows"] if r["size"] <= 0 or r["time_us"] <= 0)
        if left == len(c["rows"]):
            raise CollsimError(f"{where}: nothing to score: every row has size 0 or time 0: give measured sizes above 0 "
                               "with their times")
        if left:
            print(f"collsim: {where}: {left} row(s) of size 0 or time 0 left out (no error can be taken of them)",
                  file=sys.stderr)
    return cases


def _read_cases(path: str, topology: str | None, collective: str | None) -> list[dict]:
    text = read_input(path, "measurement file", MAX_MEASUREMENT_BYTES)  # regular files only: not /dev/zero, a FIFO
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    except RecursionError:
        raise CollsimError(f"{path}: JSON nested too deeply: not a measurement or cases file") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        if not all(isinstance(c, dict) for c in data["cases"]):
            raise CollsimError(f"{path}: every case must be a mapping with 'id' and 'rows' (see sim/data/public_cases.json)")
        cases = [dict(c) for c in data["cases"]]
        for c in cases:
            if "rows" not in c or "id" not in c:
                raise CollsimError(f"{path}: every case needs an 'id' and 'rows' (see sim/data/public_cases.json)")
            c.setdefault("topology", topology)
            c.setdefault("collective", collective or "all_reduce")
        return cases
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        rows = [{"size": r["nbytes"], "time_us": r["time_us"], "busbw": r.get("busbw_GBps", 0.0)}
                for r in data["results"] if "nbytes" in r and "time_us" in r]
        return [{"id": os.path.basename(path), "topology": topology or data.get("topology"),
                 "collective": collective or data.get("collective", "all_reduce"), "rows": rows, "source": path,
                 "nranks": data.get("nranks")}]
    rows = parse_nccl_tests(text)
    meta = parse_nccl_tests_meta(text)
    coll = collective or meta["collective"]
    if coll is None:   # older nccl-tests print no *_perf name: the columns may still say; a guess is no answer
        coll = collective_from_rows(rows)
        if coll is None:
            raise CollsimError(f"{os.path.basename(path)!r} does not say its collective (no *_perf name in it, and its "
                               "busbw/algbw fits several): pass --collective all_reduce (or all_gather, reduce_scatter, "
                               "all_to_all, broadcast, reduce)")
        print(all_reduce_by_columns_note(os.path.basename(path)), file=sys.stderr)
    meta["nranks"] = _device_lines_or_columns(rows, coll, meta["nranks"], topology, path)
    _check_bus_factor(rows, coll, meta["nranks"], path)
    case = {"id": os.path.basename(path), "topology": topology, "collective": coll, "format": "nccl-tests",
            "nranks": meta["nranks"], "source": path, "gpus_per_process": meta["gpus_per_process"],
            "rows": [{"size": r["nbytes"], "time_us": r["time_us"], "busbw": r["busbw_GBps"] or 0.0} for r in rows]}
    if meta["nccl_version"]:   # the release that ran it ("NCCL version 2.22.3"): its rules, not the newest's
        case["nccl_version"] = meta["nccl_version"]
        _say_clamped_release(meta["nccl_version"], path)
    return [case]


def _say_clamped_release(version: str, path: str) -> None:
    """Say so (stderr) when a file's NCCL release is outside those collsim documents: it is scored with the
    nearest one's rules (:func:`sim.nccl.config.case_config`), which ``simulate --nccl-version`` would refuse."""
    from ..nccl import versions
    try:
        key = versions.parse_version(version)
    except CollsimError:
        return
    nearest = versions.nearest_documented(key)
    if nearest is not None:
        where = ("newer than" if nearest is versions.LATEST else "older than" if key < versions.OLDEST.key()
                 else "between")
        print(f"collsim: {os.path.basename(path)!r} ran NCCL {version}, {where} the releases collsim documents: "
              f"scored with NCCL {nearest.version}'s rules", file=sys.stderr)


def _bus_ratios(rows: list[dict]) -> list[float]:
    return [r["busbw_GBps"] / r["algbw_GBps"] for r in rows if (r.get("algbw_GBps") or 0) >= 1.0 and r.get("busbw_GBps")]


def _device_lines_or_columns(rows: list[dict], coll: str, listed: int | None, topology: str | None, path: str) -> int | None:
    """The rank count to score a raw nccl-tests file over. Its ``#  Rank N ... device`` lines count the ranks,
    unless the listing was cut (a file trimmed to one device line). Then, where the --topology given does not
    contradict the table's own busbw/algbw (which nccl-tests computes with the true rank count), the
    topology's count is taken and said so; with one device line and nothing to take, one error names the fix
    (a real mismatch of file and topology is still refused where the case is scored)."""
    if not listed:
        return listed
    given = load_topology(topology).nranks if topology else None   # a bad spec: its own one-line error
    ratios, factor = _bus_ratios(rows), get_collective(coll).bus_factor
    name = os.path.basename(path)

    def fits(n: int) -> bool:
        return all(abs(x - factor(n)) <= 0.02 for x in ratios)
    columns = f"its busbw/algbw ({statistics.median(ratios):.3g})" if ratios else "its table (no busbw to check)"
    if given and given != listed and (listed < 2 or ratios and not fits(listed)) and (not ratios or fits(given)):
        print(f"collsim: note: {name!r} lists {listed} device line(s) ('#  Rank ...'), and {columns} fits {coll} over "
              f"the {given} ranks of {topology}: scored over {given} (the device listing was cut)", file=sys.stderr)
        return given
    if listed < 2:   # no single rank measured a collective
        why = f"{columns} does not fit {coll} over the {given} ranks of {topology} either" if given else \
            "no --topology says how many ranks ran"
        raise CollsimError(f"{name!r} lists {listed} device line ('#  Rank ...'), too few for a collective, and {why}: "
                           f"give --topology the ranks the run had (or --collective, if it was not {coll}), or the whole "
                           "nccl-tests output")
    return listed


def _check_bus_factor(rows: list[dict], coll: str, nranks: int | None, path: str) -> None:
    """Say so (stderr) when the table's own busbw/algbw contradicts the collective it is scored as: nccl-tests
    writes busbw = algbw x the collective's bus factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather,
    reduce_scatter and all_to_all, 1 for broadcast and reduce), so a file of another collective shows it."""
    if not nranks:
        return
    want = get_collective(coll).bus_factor(nranks)
    ratios = _bus_ratios(rows)
    if ratios and all(abs(x - want) > 0.02 for x in ratios):
        print(f"collsim: warning: {os.path.basename(path)!r}: its busbw/algbw is {statistics.median(ratios):.3g}, where "
              f"{coll} over {nranks} ranks gives {want:.3g}: the file measures another collective (or rank count) "
              "than it is scored as", file=sys.stderr)


# ---- scoring -------------------------------------------------------------------------------------
def score_case(case: dict, *, model: str = "auto", algorithm: str | None = None, protocol: str | None = None) -> dict:
    """Predict every measured size of ``case`` and return the errors (relative, 0.1 = 10 %)."""
    spec = case.get("topology")
    if not spec:
        raise CollsimError(f"case {case['id']}: no topology: pass --topology SPEC describing the machine it ran on")
    topo = load_topology(spec)
    # the rank count first: with -g N in the output, a topology of the wrong size would otherwise be reported as
    # a --gpus-per-process problem the user never asked about
    if case.get("nranks") is not None and case["nranks"] != topo.nranks:
        raise CollsimError(f"case {case['id']}: the measurement has {case['nranks']} ranks but {spec} has {topo.nranks} GPUs: "
                           f"fix --topology (e.g. nodes=, gpus_per_node=)")
    gpp = case.get("gpus_per_process")
    ppn = max(len(h) for h in topo.hosts)
    if gpp and gpp > ppn and case.get("format") == "nccl-tests":
        # the output's own header says -g N; a topology drawn without servers (a simple preset: every GPU its own
        # host) cannot hold one process's N GPUs, and the user asked for no launch mode: said, not refused
        print(f"collsim: note: {case['id']} ran {gpp} GPUs per process (nccl-tests -g {gpp}); {spec} has {ppn} GPU(s) per "
              "host, so one process launching several GPUs is not modelled (a hardware preset, e.g. "
              f"dgx-a100:gpus_per_node={gpp}, models it)", file=sys.stderr)
        gpp = None
    topo = with_gpus_per_process(topo, gpp)   # nccl-tests -g N
    coll = get_collective(case.get("collective", "all_reduce"))
    algo = algorithm or case.get("algorithm") or "auto"
    proto = protocol or case.get("protocol") or "auto"
    cfg = nccl_config.case_config(case)   # the NCCL release and variables the run used, where stated
    t0 = time.perf_counter()
    bw_errs: list[float] = []
    lat_errs: list[float] = []
    mid_errs: list[float] = []
    rows: list[dict] = []
    chosen: dict[str, list[int]] = {}
    for r in sorted(case["rows"], key=lambda r: r["size"]):
        if r["size"] <= 0 or r["time_us"] <= 0:
            continue
        with nccl_config.use(cfg):
            q = api.simulate(coll, r["size"], topo, algo, proto, model=model)
        chosen.setdefault(f"{q.algorithm}/{q.protocol}", []).append(r["size"])
        row = {"size": r["size"], "time_us": r["time_us"], "busbw": r.get("busbw", 0.0), "pred_time_us": q.time_us,
               "pred_busbw": q.busbw_GBps, "algorithm": q.algorithm, "protocol": q.protocol}
        if r["size"] >= BW_MIN_BYTES and r.get("busbw", 0) > 0:
            row["busbw_err"] = abs(q.busbw_GBps - r["busbw"]) / r["busbw"]
            bw_errs.append(row["busbw_err"])
        row["time_err"] = abs(q.time_us - r["time_us"]) / r["time_us"]
        if r["size"] <= LAT_MAX_BYTES:
            lat_errs.append(row["time_err"])
        elif r["size"] < BW_MIN_BYTES:
            mid_errs.append(row["time_err"])
        rows.append(row)
    med = lambda xs: statistics.median(xs) if xs else None
    fabric, nodes, domain = regime(topo)
    return {"id": case["id"], "system": case.get("system") or case["id"], "nranks": topo.nranks, "fabric": fabric,
            "nodes": nodes, "domain": domain, "nccl_version": cfg.version, "topology": topo.name, "collective": coll.name,
            "algorithm": algo, "protocol": proto, "bw_errors": bw_errs, "lat_errors": lat_errs, "mid_errors": mid_errs,
            "bw_median": med(bw_errs), "lat_median": med(lat_errs), "mid_median": med(mid_errs), "chosen": chosen,
            "rows": rows, "seconds": time.perf_counter() - t0, "source": case.get("source", "")}


def _score_all(cases: list[dict], jobs: int, **kwargs) -> list[dict]:
    """:func:`score_case` of every case, in order, on ``jobs`` forked worker processes (1: in this one)."""
    import multiprocessing
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [score_case(c, **kwargs) for c in cases]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(functools.partial(score_case, **kwargs), cases, chunksize=1)


def summarize(scores: list[dict]) -> dict:
    """Pooled medians over every case's errors (the acceptance rule) and the worst case."""
    bw = [e for s in scores for e in s["bw_errors"]]
    lat = [e for s in scores for e in s["lat_errors"]]
    mid = [e for s in scores for e in s.get("mid_errors", ())]
    worst = max((s for s in scores if s["bw_median"] is not None), key=lambda s: s["bw_median"], default=None)
    return {"bw_median": statistics.median(bw) if bw else None, "lat_median": statistics.median(lat) if lat else None,
            "mid_median": statistics.median(mid) if mid else None, "mid_points": len(mid),
            "bw_points": len(bw), "lat_points": len(lat), "worst_bw_case": worst["id"] if worst else None,
            "worst_bw_median": worst["bw_median"] if worst else None, "seconds": sum(s["seconds"] for s in scores)}


def _short(value):
    """A report's float to 5 decimals (a median error or a coverage: 1e-5 is far below what a case can tell)."""
    return round(value, 5) if isinstance(value, float) else value


def run(args) -> int:
    cases = load_cases(args.file, args.topology, args.collective)
    if args.case:
        wanted = set(args.case)
        cases = [c for c in cases if c["id"] in wanted]
        if not cases:
            raise CollsimError(f"no case named {', '.join(sorted(wanted))} in {args.file or PUBLIC_CASES}")
    jobs = sweep.jobs_for(args.jobs, len(cases))
    if args.auto:
        cases = [{k: v for k, v in c.items() if k not in ("algorithm", "protocol")} for c in cases]
    scores = _score_all(cases, jobs, model=args.model, algorithm=args.algorithm, protocol=args.protocol)
    total = summarize(scores)
    cv, cv_total, refit = None, None, None
    per_cov: dict[str, float | None] = {}
    if args.write_intervals and not args.cross_validate:
        raise CollsimError("--write-intervals writes the out-of-sample residuals: add --cross-validate (--by system)")
    if args.write_intervals:
        from ..io.safe_io import check_output
        check_output(args.write_intervals, "--write-intervals")   # refused before the long run, not after
    if args.cross_validate:
        from .crossval import cross_validate
        from .residuals import coverage, residual_rows, write_residuals
        if args.case:   # what "out of sample" means here: refitted on the other selected cases only
            print(f"collsim: note: --cross-validate with --case: each left-out group is refitted on the other "
                  f"{len(cases) - 1} selected case(s) only, and its ranges come from their residuals alone; the "
                  "public set's out-of-sample figures need every case (drop --case)", file=sys.stderr)
        cv, refit = cross_validate(cases, score_case, algorithm=args.algorithm, protocol=args.protocol, model=args.model,
                                   by=args.by, jobs=jobs)
        cv_total = summarize(cv)
        resid = residual_rows(cv)
        cv_total["coverage"], per_cov = coverage(cv, resid)
        # in sample: ranges from every system's residuals, the case's own included (what --write-intervals ships)
        total["coverage"] = coverage(scores, resid, exclude_own=False)[0]
        if args.write_intervals:
            write_residuals(resid, args.write_intervals, args.by)
    if args.format == "json":
        out = {"model": args.model, "cases": scores, "overall": total}
        if cv is not None:
            assert refit is not None
            # per-size rows stay out of this report (use --rows / a plain run for them), and so do the cases'
            # sources (the public set has them), with medians to 5 decimals: the report must stay small enough
            # to pass around as one shell argument (capped at 128 KiB; 124 cases make 106 KB)
            out["cases"] = [{k: _short(v) for k, v in s.items() if k not in ("rows", "bw_errors", "lat_errors", "mid_errors",
                                                                              "source")} for s in scores]
            out.update({"cross_validated_by": args.by, "cross_validated": cv_total, "cross_validated_cases": [
                {"id": s["id"], "system": s["system"], "nranks": s["nranks"], "collective": s["collective"],
                 "bw_median": s["bw_median"], "lat_median": s["lat_median"], "mid_median": s["mid_median"],
                 "coverage": per_cov.get(s["id"]), "nccl_version": s["nccl_version"], "fitted": s["fitted"],
                 "fabric": s["fabric"], "nodes": s["nodes"], "domain": s["domain"],
                 **({"rows": [{k: r[k] for k in ("size", "time_us", "pred_time_us", "busbw", "pred_busbw", "algorithm",
                                                 "protocol", "time_us_range") if k in r} for r in s["rows"]]}
                    if args.rows else {})} for s in cv],
                "fit_all_cases": {k: round(v, 4) for k, v in refit.items()}})
            out["cross_validated_cases"] = [{k: _short(v) for k, v in c.items()} for c in out["cross_validated_cases"]]
            # compact: indented, the report of 101 cases passed the 128 KiB cap on one shell argument
            print(json.dumps(out, separators=(",", ":")))
            return 0
        print(json.dumps(out, indent=1))
        return 0
    pct = lambda x: f"{x:6.1%}" if x is not None else "   n/a"
    # raw nccl-tests output is scored on its out-of-place column, as the public cases were transcribed (collsim
    # compare takes the faster of the two by default, and --time out-of-place gives the same numbers as here)
    raw = (" (raw nccl-tests output: its out-of-place times, as `collsim compare --time out-of-place`)"
           if any(c.get("format") == "nccl-tests" for c in cases) else "")
    print(f"# collsim validate: model {args.model}; busbw error over sizes >= 64 MiB, time error over sizes <= 64 KiB{raw}")
    wid = max([8] + [len(str(s["id"])) for s in scores])   # the case column as wide as its longest id
    print(f"# {'case':{wid}s} {'bw-median':>9s} {'lat-median':>10s} {'sizes':>5s} {'secs':>5s}  chosen (algorithm/protocol: sizes)")
    for s in scores:
        chosen = "; ".join(f"{k} {_span(v)}" for k, v in s["chosen"].items())
        pin = f"  [pinned {s['algorithm']}]" if s["algorithm"] != "auto" else ""
        print(f"  {s['id']:{wid}s} {pct(s['bw_median']):>9s} {pct(s['lat_median']):>10s} {len(s['rows']):5d} {s['seconds']:5.1f}  "
              f"{chosen}  ({s['topology']}){pin}")
        if args.rows:
            for r in s["rows"]:
                print(f"#   {r['size']:>12d} {r['algorithm']:>14s}/{r['protocol']:<6s} time {r['time_us']:10.2f} -> "
                      f"{r['pred_time_us']:10.2f} us   busbw {r['busbw']:8.2f} -> {r['pred_busbw']:8.2f} GB/s")
    worst = (f"worst case {total['worst_bw_case']} ({pct(total['worst_bw_median']).strip()})" if total["worst_bw_case"]
             else f"no worst case (no size of {BW_MIN_BYTES >> 20} MiB or more with a busbw)")
    print(f"overall: busbw median error {pct(total['bw_median']).strip()} over {total['bw_points']} sizes, "
          f"small-size time median error {pct(total['lat_median']).strip()} over {total['lat_points']} sizes; "
          f"{worst}; {total['seconds']:.1f} s of scoring, summed over the cases (with -j, more than the wall time)")
    if cv is not None:
        assert cv_total is not None and refit is not None
        what = "one system" if args.by == "system" else "one case"
        print(f"# cross-validated (leave-{what}-out: every fitted constant refitted without it)")
        sys_wid = max([10] + [len(str(s_out["system"])) for s_out in cv])
        print(f"# {'case':{wid}s} {'system':>{sys_wid}s} {'ranks':>6s} {'bw in':>7s} {'bw out':>7s} {'lat in':>7s} {'lat out':>7s} "
              f"{'mid out':>7s} {'cover':>6s}  refitted constants used")
        for s_in, s_out in zip(scores, cv):
            fitted = ", ".join(f"{k}={v:g}" for k, v in s_out["fitted"].items())
            print(f"  {s_in['id']:{wid}s} {str(s_out['system']):>{sys_wid}s} {s_out['nranks']:6d} {pct(s_in['bw_median']):>7s} "
                  f"{pct(s_out['bw_median']):>7s} {pct(s_in['lat_median']):>7s} {pct(s_out['lat_median']):>7s} "
                  f"{pct(s_out['mid_median']):>7s} {pct(per_cov.get(s_out['id'])):>6s}  {fitted}")
        print(f"cross-validated (leave {what} out): busbw median error {pct(cv_total['bw_median']).strip()} over "
              f"{cv_total['bw_points']} sizes, small-size time {pct(cv_total['lat_median']).strip()} over "
              f"{cv_total['lat_points']}, mid-size time {pct(cv_total['mid_median']).strip()} over {cv_total['mid_points']}; "
              f"worst case {cv_total['worst_bw_case']} ({pct(cv_total['worst_bw_median']).strip()}); "
              f"80% interval coverage {pct(cv_total['coverage']).strip()} "
              f"(in-sample {pct(total['bw_median']).strip()} / {pct(total['lat_median']).strip()})")
        print(f"# fit on {'every case' if not args.case else f'the {len(scores)} case(s) selected'}: " + ", ".join(f"{k}={v:.4g}" for k, v in refit.items()))
    return 0


def _span(sizes: list[int]) -> str:
    from ..units import format_size
    lo, hi = min(sizes), max(sizes)
    return format_size(lo) if lo == hi else f"{format_size(lo)}-{format_size(hi)}"
