"""``collsim simulate``: the nccl-tests table a topology would print, predicted."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from .. import api
from ..algorithms import candidates, in_nccl, why_not
from ..collectives import get_collective
from ..engine import ENGINES
from ..errors import CollsimError
from ..nccl.select import FLOW_CHECK_MAX_RANKS
from ..nccl.versions import patch_asked
from ..presets import load_topology, spec_notes
from .common import (
    DEFAULT_TOPOLOGY,
    DTYPE_BYTES,
    add_size_args,
    check_output_path,
    emit,
    sizes_from_args,
)


def register(sub) -> None:
    p = sub.add_parser("simulate", help="predict time, algbw and busbw of a collective on a topology",
                       description="Predict an nccl-tests sweep: time, algbw, busbw, algorithm, protocol and steps per size.")
    p.add_argument("--topology", "-t", default=DEFAULT_TOPOLOGY, help=f"preset spec NAME[:k=v,...] or .yaml/.json file (default {DEFAULT_TOPOLOGY})")
    p.add_argument("--collective", "-c", default="all_reduce", help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all")
    p.add_argument("--algorithm", "-a", default="auto", help="auto (pick the fastest, like NCCL), all (compare every algorithm), or a name")
    p.add_argument("--protocol", "-p", default="auto", help="auto, ideal, LL, LL128 or Simple")
    p.add_argument("--model", default="auto", choices=api.MODELS,
                   help="auto (default: the engine where it fits the time and memory budget, flow beyond), engine "
                        "(discrete-event), tuner (NCCL's closed form), alpha-beta, flow (large clusters: rings as flows, "
                        "trees/NVLS/CollNet through a replica)")
    p.add_argument("--max-memory", default=None, metavar="SIZE",
                   help="memory a run may take, e.g. 4G (default: half of the available memory); runs estimated "
                        "above it switch to the flow model (auto) or are refused")
    p.add_argument("--select", default="nccl", choices=("nccl", "fastest"),
                   help="with -a auto: nccl (the pair NCCL's tuner picks, what nccl-tests measures; default) or fastest "
                        "(the model's fastest pair among those NCCL can run: what NCCL_ALGO/NCCL_PROTO could get)")
    p.add_argument("--engine", default="default", choices=ENGINES,
                   help="what times the engine model: default (fast) or reference (readable SimPy, the oracle)")
    p.add_argument("--nchannels", type=int, default=None,
                   help="flows the engine simulates in parallel (default: the model's choice, one per NIC port "
                        "across nodes, else 1; inside a node they share the same links, so the time does not "
                        "change). NCCL's own channel count is an NCCL variable: --nccl-env "
                        "NCCL_MIN_NCHANNELS=N,NCCL_MAX_NCHANNELS=N")
    p.add_argument("--pipeline", type=int, default=None, help="pieces per channel (default: chosen from the protocol)")
    p.add_argument("--root", type=int, default=0, help="root rank for broadcast/reduce")
    p.add_argument("--gpus-per-process", type=int, default=1, metavar="N",
                   help="GPUs one thread launches per call, as nccl-tests -g N (default 1: a process per GPU)")
    p.add_argument("--format", default="table", choices=("table", "json", "csv"))
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace of the largest size to FILE")
    p.add_argument("--explain", action="store_true", help="print the model's terms for each size")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="run the sweep's sizes/algorithms in N processes (0 = every core; default 1)")
    p.add_argument("--stochastic", type=int, default=None, metavar="N",
                   help="seeded stochastic mode: sample each row's network latency N times (log-normal per-hop latency, "
                        "the slowest of the collective's parallel paths; sim/prediction/stochastic.py) and report the "
                        "median and the 10-90%% spread under the table (JSON: 'stochastic'; the columns stay the deterministic "
                        "prediction); the 80%% range then covers that spread too")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of --stochastic, a whole number 0 or more (default 0; the same seed gives the same samples)")
    add_nccl_args(p)
    add_size_args(p)
    p.set_defaults(func=run)


def add_nccl_args(p, default_note: str | None = None) -> None:
    """--nccl-version, --nccl-env, --nccl-env-from-shell (:mod:`sim.nccl.config`); ``default_note`` says what a
    command takes without --nccl-version (simulate: the newest release)."""
    from ..nccl.config import HONOURED
    from ..nccl.versions import LATEST, RELEASES
    default_note = default_note or f"default {LATEST.version}, the newest documented"
    p.add_argument("--nccl-version", default=None, metavar="X.Y",
                   help=f"the NCCL release whose rules to model: {', '.join(r.version for r in RELEASES)} (a release in "
                        f"between takes the older one's rules, but 2.8 stands for 2.8-2.9 only, its latency tables "
                        f"with 2.18's other rules; {default_note})")
    p.add_argument("--nccl-env", default=None, metavar="K=V,...",
                   help="NCCL variables the run sets, e.g. NCCL_ALGO=Ring,NCCL_MIN_NCHANNELS=32. Honoured: "
                        + "; ".join(f"{k} ({v})" for k, v in HONOURED.items()).replace("%", "%%")
                        + ". Any other NCCL_* or FI_* is ignored (named on stderr); NCCL_P2P_LEVEL and NCCL_P2P_DISABLE "
                          "describe the machine: give them in the topology (pcie preset: p2p_level=, p2p=0)")
    p.add_argument("--nccl-env-from-shell", action="store_true",
                   help="also read every NCCL_* variable of this shell's environment, and the FI_* ones above "
                        "(--nccl-env wins)")


def nccl_config_from_args(args):
    """The NcclConfig of --nccl-version/--nccl-env/--nccl-env-from-shell; names ignored variables on stderr."""
    import sys

    from ..nccl.config import (
        CHANNEL_VARIABLES,
        HONOURED,
        IN_TOPOLOGY,
        absent_from_release,
        env_from_shell,
        make_config,
        split_env,
    )
    pairs = dict(env_from_shell()) if getattr(args, "nccl_env_from_shell", False) else {}
    if getattr(args, "nccl_env", None):
        given = split_env(args.nccl_env)
        for i, (var, _) in enumerate(given):
            if any(var == other for other, _ in given[:i]):   # the later one would silently win
                raise CollsimError(f"--nccl-env {args.nccl_env!r} sets {var!r} twice: give each variable once")
        pairs.update(dict(given))
    version = getattr(args, "nccl_version", None)
    if version is not None and not str(version).strip():   # an unset shell variable: --nccl-version "$V"
        from ..nccl.versions import LATEST
        raise CollsimError(f"--nccl-version is empty: give a release such as 2.27, or leave the flag out for the "
                           f"newest collsim documents ({LATEST.version})")
    cfg = make_config(version, pairs or None)
    for var, value in pairs.items():   # NCCL clamps a channel count past its MAXCHANNELS (with an INFO line): say so
        if var in CHANNEL_VARIABLES and \
                value.strip().isdigit() and int(value) > cfg.release.max_channels:
            print(f"collsim: {var}={value} is more than NCCL {cfg.version}'s MAXCHANNELS: NCCL takes "
                  f"{cfg.release.max_channels}, as collsim does", file=sys.stderr)
    unhonoured = []
    for var in cfg.ignored:
        why = absent_from_release(var, cfg.release)
        if why:
            print(f"collsim: ignoring {var}: NCCL {cfg.version} {why}", file=sys.stderr)
        else:
            unhonoured.append(var)
    cased = [v for v in unhonoured if v != v.upper() and v.upper() in HONOURED]
    if cased:   # NCCL reads its variables by their upper-case names only
        print(f"collsim: ignoring {', '.join(cased)}: these variables are read by their upper-case names "
              f"({', '.join(v.upper() for v in cased)}), so the run would not have read these either", file=sys.stderr)
        unhonoured = [v for v in unhonoured if v not in cased]
    if unhonoured:
        print(f"collsim: ignoring {', '.join(unhonoured)}: the model does not honour "
              f"{'it' if len(unhonoured) == 1 else 'them'} (see --help for those it does)", file=sys.stderr)
        for var in cfg.ignored:
            if var in IN_TOPOLOGY:
                print(f"collsim: {var} describes the machine: {IN_TOPOLOGY[var]}", file=sys.stderr)
    return cfg


def nccl_config_printed(args, printed: str | None, where: str, verb: str = "prints"):
    """(the NCCL configuration, the note that says which) for a command reading measured output (``trace``,
    ``compare``): --nccl-version where given, else the release ``printed`` by ``where`` (clamped to the releases
    collsim models, as ``validate`` scores it; --nccl-env alone sets the variables under it), else the one in
    force. The note names the modelled release whose rules ran, and why where it is not the one asked or printed."""
    from ..nccl import config as nccl_config
    from ..nccl.versions import rules_why
    env = bool(args.nccl_env or args.nccl_env_from_shell)
    if args.nccl_version is not None:
        cfg = nccl_config_from_args(args)
        return cfg, (f"predicted with NCCL {cfg.release.version}'s rules{rules_why(args.nccl_version, cfg.release)} "
                     f"(--nccl-version{'/--nccl-env' if env else ''})")
    if not printed:
        cfg = nccl_config_from_args(args) if env else nccl_config.current()
        return cfg, (f"predicted with NCCL {cfg.version}'s rules (no release printed in {where}; --nccl-version to "
                     "change)" + (", with the variables of --nccl-env" if env else ""))
    if env:   # variables say how NCCL was set, not which NCCL ran: the release printed still decides the rules
        release = nccl_config.case_config({"id": where, "nccl_version": printed}).version
        cfg = nccl_config_from_args(argparse.Namespace(**{**vars(args), "nccl_version": release}))
    else:
        cfg = nccl_config.case_config({"id": where, "nccl_version": printed})
    return cfg, (f"{where} {verb} NCCL {printed}: predicted with NCCL {cfg.release.version}'s rules"
                 f"{rules_why(printed, cfg.release)}{' and the variables of --nccl-env' if env else ''}; "
                 "--nccl-version to change")


def _tables_arch(cfg, topo) -> str | None:
    """The GPU generation whose rows of NCCL's tables the release reads, where it is not the GPU's own (before 2.25,
    Hopper's for Blackwell), else None."""
    arch = topo.hardware.gpu_arch if topo.hardware is not None else None
    tables = cfg.release.table_arch(arch)
    return tables if tables != arch else None


def _warn_off_fabric(cfg, topo) -> None:
    """Say on stderr where the run's FI_* variables (libfabric's cxi provider: Slingshot's) change nothing."""
    fi = [k for k, _ in cfg.env if k.startswith("FI_")]
    fabric = topo.hardware.fabric if topo.hardware is not None else None
    if fi and fabric != "slingshot":
        print(f"collsim: {', '.join(fi)} set the Slingshot (cxi) provider's matching and copies: they change nothing on "
              f"{fabric or 'this topology'}", file=sys.stderr)


def _say_spec_notes(spec) -> None:
    """Say (stderr) what a preset spec means where a reader may take it otherwise (:func:`sim.presets.spec_notes`)."""
    for note in spec_notes(spec):
        print(f"collsim: note: {note}", file=sys.stderr)


def run(args) -> int:
    import time

    from ..engine.runs import LEDGER
    from ..nccl.config import use
    from ..nccl.machine import with_gpus_per_process
    from ..prediction import stochastic
    from ..prediction.budget import parse_memory
    started, ledger = time.perf_counter(), LEDGER.snapshot()
    topo = with_gpus_per_process(load_topology(args.topology), args.gpus_per_process)
    _say_spec_notes(args.topology)
    coll = get_collective(args.collective)
    sizes = nccl_tests_sizes(sizes_from_args(args), coll, topo.nranks, DTYPE_BYTES[args.datatype])
    check_output_path(args.trace, "--trace", (".json",))
    # a bad size is refused before anything runs
    max_memory = None if args.max_memory is None else parse_memory(args.max_memory)
    seed = 0 if args.seed is None else args.seed
    if args.stochastic is not None:
        stochastic.check_args(args.stochastic, seed)   # refused before the sweep runs, not after it (0 too)
    elif args.seed is not None:
        print("collsim: ignoring --seed: it has no effect without --stochastic N", file=sys.stderr)
    root = args.root
    if root and not coll.rooted:   # ignored, so not checked either: a rootless collective runs from rank 0
        print(f"collsim: ignoring --root {root}: {coll.name} has no root (broadcast and reduce do)", file=sys.stderr)
        root = 0
    cfg = nccl_config_from_args(args)
    _warn_off_fabric(cfg, topo)
    with use(cfg):   # NCCL's rules and variables decide what NCCL can run and picks
        algos, left_out = _algorithms(args, coll, topo, sizes, max_memory)
        picks = _nccl_picks(coll, topo, sizes, args.protocol) if args.algorithm == "all" else {}
        if args.model == "engine":
            _warn_engine_time(coll, topo, sizes, algos, args, max_memory)
    for algo, why in left_out:
        print(f"collsim: -a all leaves out {algo}: {why}", file=sys.stderr)
    results, algos = _sweep(args, coll, topo, sizes, algos, root, cfg, left_out)
    if args.trace:
        trace = results[-1][2].trace
        if trace is None:
            raise CollsimError(f"--trace needs the engine model (got --model {args.model})")
        trace.save(args.trace)
    elem = DTYPE_BYTES[args.datatype]
    with use(cfg):
        faster = _faster_choices(results, topo, args, root) if algos == ["auto"] else {}
    from ..prediction.intervals import clip_to_line_rate, interval, line_rate_busbw, regime
    where = regime(topo)
    bounds: dict[str, float | None] = {}
    ranges = {}
    offs: dict = {}   # id(row's Result) -> why NCCL would not run its pair here (None: it would): JSON and table
    rows = []
    earlier = shorter_than_before(results)
    for nbytes, group, best in results:
        for r in group:
            row = r.row()
            if id(r) in earlier:
                row["faster_than_smaller_size"] = earlier[id(r)][0]
            if r.algorithm not in bounds:
                bounds[r.algorithm] = line_rate_busbw(topo, coll.name, r.algorithm)
            iv = interval(r.time_us, r.busbw_GBps, nbytes, where=where, collective=coll.name, algorithm=r.algorithm)
            iv = ranges[id(r)] = clip_to_line_rate(iv, r.busbw_GBps, bounds[r.algorithm])
            widened = False   # by the stochastic mode's spread, where it reaches past the out-of-sample range
            if args.stochastic:
                st = stochastic.sample(r, topo, args.stochastic, seed)
                row["stochastic"] = st
                wide = replace(iv, time_us_range=(min(iv.time_us_range[0], st["time_us_p10"]),
                                                  max(iv.time_us_range[1], st["time_us_p90"])),
                               busbw_GBps_range=(min(iv.busbw_GBps_range[0], st["busbw_GBps_p10"]),
                                                 max(iv.busbw_GBps_range[1], st["busbw_GBps_p90"])))
                widened = (wide.time_us_range, wide.busbw_GBps_range) != (iv.time_us_range, iv.busbw_GBps_range)
                iv = ranges[id(r)] = wide
            off = offs[id(r)] = _disabled_here(r, coll, topo, cfg)
            if off:
                row["nccl_disabled"] = off
            why_not = _not_validated(args, row["in_nccl"], r.protocol, off, topo, widened)
            if why_not and iv.validated:
                iv = ranges[id(r)] = replace(iv, validated=False, note=why_not)
            row.update({"nccl_version": cfg.version, "time_us_range": list(iv.time_us_range),
                        "busbw_GBps_range": list(iv.busbw_GBps_range), "validated": iv.validated})
            if iv.note:
                row["note"] = iv.note
            if len(algos) > 1:
                row["fastest"] = r is best
            if picks:
                row["nccl_pick"] = picks.get(nbytes) == (r.algorithm, r.protocol)
            if nbytes in faster:
                f = faster[nbytes]
                row["faster_choice"] = {"algorithm": f.algorithm, "protocol": f.protocol, "time_us": f.time_us,
                                        "faster_by": f.explain["faster_by"], "nccl_env": f.explain["nccl_env"]}
            if args.explain:   # the terms the table prints under each row (the table's notes point here)
                row["explain"] = {k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
                                  for k, v in r.explain.items()}
            rows.append(row)
    payload = {"topology": topo.name, "collective": coll.name, "nranks": topo.nranks, "model": args.model,
               "gpus_per_process": args.gpus_per_process,
               "nccl_version": cfg.version, "nccl_rules": cfg.release.tag, "nccl_env": dict(cfg.env),
               "nccl_env_ignored": list(cfg.ignored), "results": rows}
    if left_out:
        payload["left_out"] = [{"algorithm": a, "reason": why} for a, why in left_out]
    if tables := _tables_arch(cfg, topo):
        payload["nccl_tables_arch"] = tables
    payload["stats"] = _stats(LEDGER.since(ledger), time.perf_counter() - started)
    with use(cfg):   # --explain reads NCCL's channel bounds from the configuration
        text = _table(topo, coll, results, elem, args, multi=len(algos) > 1, faster=faster, ranges=ranges, cfg=cfg,
                      offs=offs, earlier=earlier,
                      picks=picks)
    if args.stochastic:
        # the columns above are the deterministic prediction (JSON time_us/busbw_GBps); the samples add
        # per-hop latency, so their median is slower and may sit outside a deterministic busbw: say both
        text += (f"\n# stochastic mode: {args.stochastic} samples, seed {seed}, per-hop latency spread "
                 f"sigma {stochastic.HOP_SIGMA} (log-normal). The columns above are the deterministic prediction; "
                 f"the samples' median [10%-90%] per row (JSON 'stochastic'):\n")
        text += "\n".join(f"#   {row['nbytes']:>12d} {row['algorithm']}/{row['protocol']}: time "
                           f"{row['stochastic']['time_us_median']:.2f} us [{row['stochastic']['time_us_p10']:.2f}-"
                           f"{row['stochastic']['time_us_p90']:.2f}], busbw {row['stochastic']['busbw_GBps_median']:.3g} "
                           f"GB/s [{row['stochastic']['busbw_GBps_p10']:.3g}-{row['stochastic']['busbw_GBps_p90']:.3g}]"
                           for row in rows)
    print(emit(args.format, text, payload, rows, always=("note",)))   # a validated sweep's CSV has the column too
    return 0


# a busbw range whose top is more than this many times its bottom decides nothing a planner asks (a footnote says so)
WIDE_RANGE = 4.0


def _release_note(args, cfg) -> list[str]:
    """The footnote of an asked-for NCCL release: the engine takes its per-hop latencies and protocol shares from
    that release's own tuner tables, which NCCL re-tuned between releases, so the same pair can time differently
    under two of them (a planner's trial read it as a regression of the hardware)."""
    if getattr(args, "nccl_version", None) is None or cfg is None:
        return []
    return [f"# NCCL {cfg.version}'s tables: per-hop latencies (hwLat, baseLat) and protocol shares are that release's "
            "own, which NCCL re-tuned between releases, so one algorithm and protocol can time differently under "
            "another (docs/nccl-model.md, NCCL releases)"]


def _range_notes(results, ranges: dict) -> list[str]:
    """The footnotes of the busbw range column: where it comes from, and where it is too wide to decide on."""
    lines = ["# busbw 80% range lo..hi: from the out-of-sample errors of the public cases nearest in regime "
             "(docs/nccl-model.md, Intervals)"]
    wide = [n for n, group, _ in results for r in group if (iv := ranges.get(id(r))) is not None
            and iv.busbw_GBps_range[0] > 0 and iv.busbw_GBps_range[1] / iv.busbw_GBps_range[0] > WIDE_RANGE]
    if wide:   # a planner asking "will we reach X GB/s?" gets no answer from such a range: say so
        lines.append(f"# the range spans more than {WIDE_RANGE:g}x at {len(wide)} size(s) ({wide[0]} B first): too wide "
                     "to decide whether a target busbw is met; measure a few nodes and fit them (collsim calibrate), "
                     "or read it as the model's uncertainty there")
    return lines


# models whose numbers no cross-validation scored: their rows keep the range the engine's and the flow model's
# out-of-sample errors give (a scale for the question), said so, and are not validated
UNVALIDATED_MODELS = {
    "tuner": "--model tuner is NCCL's own closed form, not cross-validated: the range is the engine's out-of-sample error",
    "alpha-beta": "--model alpha-beta is a textbook formula, not cross-validated: the range is the engine's out-of-sample error",
}
TEXTBOOK_NOTE = ("a textbook topology (ring, switch, fully-connected, a hand-written file without a GPU model), not a "
                 "machine a published case ran on: the range is the NCCL model's out-of-sample error")
DISABLED_NOTE = ("NCCL would not run this pair here (see ~), so no measurement of it exists; the range is the NCCL "
                 "model's out-of-sample error")
NOT_NCCL_NOTE = ("not one of NCCL's algorithms: no published case (nccl-tests runs NCCL's) scores it; the range is the "
                 "NCCL model's out-of-sample error")
IDEAL_NOTE = ("the ideal latency-bandwidth protocol is a textbook model, not NCCL's LL/LL128/Simple: no published case "
              "scores it; the range is the NCCL model's out-of-sample error")
STOCHASTIC_NOTE = ("the range is widened by the stochastic mode's spread, which no public case validates "
                   "(docs/nccl-model.md, Known gaps)")


def nccl_tests_sizes(sizes: list[int], coll, n: int, elem: int) -> list[int]:
    """The sizes nccl-tests runs for ``sizes``: where a size is n shards or n blocks (all_gather, reduce_scatter,
    all_to_all) it counts whole elements per rank (``count / nranks``, common.cu's *GetCollByteCount), so
    all_gather -b 100 over 8 ranks of float runs 96 B. A size under one element per rank (nccl-tests runs 0 B)
    is predicted as given. The changed sizes are named on stderr.

    >>> from sim.collectives import get_collective
    >>> nccl_tests_sizes([8, 100, 1024], get_collective("all_gather"), 8, 4), nccl_tests_sizes([100], get_collective("all_reduce"), 8, 4)
    ([8, 96, 1024], [100])
    """
    if not (coll.sharded or coll.pairwise) or n < 2:
        return sizes
    unit = n * elem
    out = sorted({s - s % unit if s >= unit else s for s in sizes})
    moved = [f"{s} -> {s - s % unit}" for s in sizes if s % unit and s >= unit]
    tiny = [s for s in sizes if s < unit]
    if moved or tiny:
        print(f"collsim: {coll.name} over {n} ranks runs whole elements per rank, as nccl-tests counts them: "
              + (f"sizes {', '.join(moved[:6])}{' ...' if len(moved) > 6 else ''} B" if moved else "")
              + ("; " if moved and tiny else "")
              + (f"{', '.join(map(str, tiny[:6]))} B hold under one element per rank (nccl-tests runs them as 0 B rows); "
                 "predicted as given" if tiny else ""), file=sys.stderr)
    return out


def _not_validated(args, in_nccl: bool, protocol: str, disabled: str | None, topo, widened: bool = False) -> str | None:
    """Why a row is outside what the public cases validate, or None: they are nccl-tests runs of NCCL's own
    algorithms and protocols on real machines, scored through the default models. ``widened``: the stochastic
    mode's spread reached past the out-of-sample range, which no public case validates (a spread inside it
    leaves the range, and what it says, as they were)."""
    if topo.hardware.gpu_arch is None and not topo.hardware.calibration:
        return TEXTBOOK_NOTE
    if args.model in UNVALIDATED_MODELS:
        return UNVALIDATED_MODELS[args.model]
    if widened:
        return STOCHASTIC_NOTE
    if disabled:
        return DISABLED_NOTE
    if not in_nccl:
        return NOT_NCCL_NOTE
    return IDEAL_NOTE if protocol == "ideal" else None


def _disabled_here(r, coll, topo, cfg) -> str | None:
    """Why NCCL (this release and these variables) would not run ``r``'s algorithm and protocol on ``topo``, for
    one of NCCL's pairs that ``-a NAME`` or ``-a all`` ran anyway; None where NCCL would run it (or it is no
    NCCL pair: ``^`` says that)."""
    from ..nccl.config import use
    from ..nccl.constants import NCCL_ALGORITHMS, NCCL_PROTOCOLS
    from ..nccl.tuner import tuner_terms
    if r.algorithm not in NCCL_ALGORITHMS or r.protocol not in NCCL_PROTOCOLS:
        return None
    with use(cfg):
        return tuner_terms(coll, r.nbytes, topo, r.algorithm, r.protocol).detail.get("disabled")


def _algorithms(args, coll, topo, sizes, max_memory) -> tuple[list[str], list[tuple[str, str]]]:
    """(the algorithms to run, [(algorithm, why -a all leaves it out)]), decided before anything is built.

    A named algorithm that cannot run is refused in one line; ``-a all`` runs every algorithm that can
    run the collective here and leaves out, saying why, those the model cannot time, those NCCL cannot run
    (an NCCL algorithm NCCL does not use for this collective or that its rules or NCCL_* variables rule
    out: its selection would refuse them) and the textbook ones whose program over every rank would not
    fit the memory budget (:func:`sim.api.program_refusal`)."""
    if args.algorithm != "all":
        if args.algorithm != "auto":
            reason = (why_not(args.algorithm, coll, topo.nranks, topo)
                      or api.program_refusal(args.algorithm, coll, topo, args.model, max_memory))
            if reason:
                raise CollsimError(f"cannot run --algorithm {args.algorithm} on {topo.name}: {reason}")
        return [args.algorithm], []
    algos: list[str] = []
    left_out: list[tuple[str, str]] = []
    for algo in candidates(coll, topo.nranks, topo):
        why = (_why_left_out(algo, args, coll, topo, sizes) or api.program_refusal(algo, coll, topo, args.model, max_memory)
               or _too_slow_for_all(algo, args, coll, topo, sizes))
        if why is None:
            algos.append(algo)
        else:
            left_out.append((algo, why))
    if not algos:
        raise CollsimError(f"no algorithm can run {coll.name} on {topo.name}"
                           + "".join(f"; {a}: {why}" for a, why in left_out[:3]))
    return algos, left_out


# -a all's budget for one textbook algorithm the flow model cannot route (engine seconds over the sweep's
# sizes and protocols): a comparison table, not a wait; the algorithm alone (-a NAME) still runs
ALL_TEXTBOOK_SECONDS = 10.0


def _too_slow_for_all(algo: str, args, coll, topo, sizes) -> str | None:
    """Why ``-a all`` leaves out textbook ``algo`` under ``--model auto``: the flow model cannot route it
    here and the engine's estimate for the sweep is over :data:`ALL_TEXTBOOK_SECONDS`; None otherwise.
    (A planner's trial: ``-a all`` on 4 GB200 racks spent 42 s of its 86 on the direct all_gather.)"""
    from ..nccl.recipe import protocols_for
    from ..prediction.budget import run_estimate
    from ..prediction.flow import flow_covers
    if args.model != "auto" or in_nccl(algo, coll):
        return None
    reason = flow_covers(coll, algo, topo)
    if reason is None:
        return None
    seconds = sum(run_estimate(coll, nbytes, topo, algo, p, args.nchannels, args.pipeline).seconds
                  for nbytes in sizes for p in protocols_for(args.protocol))
    if seconds <= ALL_TEXTBOOK_SECONDS:
        return None
    return (f"a textbook algorithm the flow model cannot time here ({reason}), and the engine would take about "
            f"{seconds:.0f} s over these sizes: time it alone with -a {algo}")


def _why_left_out(algo: str, args, coll, topo, sizes) -> str | None:
    """Why ``-a all`` cannot time ``algo`` with this model and protocol, or None."""
    from ..nccl.constants import NCCL_ALGORITHMS
    from ..nccl.recipe import protocols_for
    from ..nccl.tuner import rank_pairs, tuner_terms
    from ..prediction.flow import flow_covers
    if args.model == "flow":   # only what the flow model can time on this topology
        reason = flow_covers(coll, algo, topo)
        return None if reason is None else f"the flow model cannot time it ({reason})"
    protos = protocols_for(args.protocol)
    if args.protocol == "ideal" or (algo not in NCCL_ALGORITHMS and args.model != "tuner"):
        return None
    if args.model == "tuner" and algo not in NCCL_ALGORITHMS:
        return "a textbook algorithm: the tuner model is NCCL's closed form, for NCCL's algorithms"
    refused: dict[int, str] = {}
    for nbytes in sizes:
        if rank_pairs(coll, nbytes, topo, [algo], protos):
            continue
        reasons = list(dict.fromkeys(tuner_terms(coll, nbytes, topo, algo, p).detail.get("disabled", "") for p in protos))
        nccl = [r for r in reasons if r.startswith("NCCL")]
        if nccl or args.model == "tuner":   # else not a refusal: selection times it with the model's fastest protocol
            refused[nbytes] = "; ".join(nccl or [r for r in reasons if r] or ["NCCL's tuner ranks no protocol of it here"])
    if not refused:
        return None
    nbytes, why = next(iter(refused.items()))
    if not in_nccl(algo, coll):
        why += f" (-a {algo} -p Simple times collsim's {algo} schedule as a textbook algorithm)"
    more = f" and {len(refused) - 1} more size(s)" if len(refused) > 1 else ""
    return why if len(refused) == len(sizes) else f"at {nbytes} B{more}: {why}"


def _nccl_picks(coll, topo, sizes, protocol: str) -> dict:
    """size -> (algorithm, protocol) NCCL's tuner picks there (what ``-a auto`` times and nccl-tests
    measures); empty with ``-p ideal``, which is not NCCL."""
    from ..nccl.constants import NCCL_ALGORITHMS
    from ..nccl.recipe import protocols_for
    from ..nccl.tuner import rank_pairs
    if protocol == "ideal":
        return {}
    usable = [a for a in candidates(coll, topo.nranks, topo) if a in NCCL_ALGORITHMS]
    picks = {}
    for nbytes in sizes:
        ranked = rank_pairs(coll, nbytes, topo, usable, protocols_for(protocol)) if usable else []
        if ranked:
            picks[nbytes] = (ranked[0].algorithm, ranked[0].protocol)
    return picks


def _warn_engine_time(coll, topo, sizes, algos, args, max_memory) -> None:
    """One line on stderr when a forced ``--model engine`` run is estimated beyond ``--model auto``'s time
    budget (:data:`sim.prediction.budget.AUTO_ENGINE_SECONDS`, past which auto takes the flow model): the
    user asked for it, so it runs; the estimate says how long to expect. Runs over the memory budget say
    nothing here: the engine refuses them in one line."""
    from ..nccl.constants import NCCL_ALGORITHMS
    from ..nccl.recipe import protocols_for
    from ..nccl.tuner import rank_pairs
    from ..prediction.budget import AUTO_ENGINE_SECONDS, default_max_memory, run_estimate
    limit = default_max_memory() if max_memory is None else max_memory
    protos = protocols_for(args.protocol)
    usable = candidates(coll, topo.nranks, topo)
    worst = None
    for nbytes in sizes:
        for algo in algos:
            # the pairs selection will time: NCCL's pick among its algorithms (or for the pinned one), else
            # every protocol of the pinned algorithm, or every pair with -p ideal / --select fastest
            ranked = [] if args.protocol == "ideal" or args.algorithm == "auto" and args.select != "nccl" else \
                rank_pairs(coll, nbytes, topo, [a for a in usable if a in NCCL_ALGORITHMS] if algo == "auto" else [algo], protos)
            pairs = [(t.algorithm, t.protocol) for t in ranked[:1]] or \
                [(a, p) for a in (usable if algo == "auto" else [algo]) for p in protos]
            for a, p in pairs:
                est = run_estimate(coll, nbytes, topo, a, p, args.nchannels, args.pipeline)
                if est.bytes <= limit and (worst is None or est.seconds > worst[0].seconds):
                    worst = (est, a, p, nbytes)
    if worst is not None and worst[0].seconds > AUTO_ENGINE_SECONDS:
        est, algo, proto, nbytes = worst
        print(f"collsim: warning: --model engine on {algo}/{proto} at {nbytes} B over {topo.nranks:,} GPUs is estimated "
              f"at {est.describe()}{' (the slowest run of this command)' if len(sizes) * len(algos) > 1 else ''}, "
              f"beyond --model auto's {AUTO_ENGINE_SECONDS:g} s budget for the engine (auto takes the flow model there "
              "where it can): running it as asked; at this scale the engine simulates a few pieces and extrapolates the rest, so it can "
              "differ from auto's flow model by 10% or more, and the published cases were scored as auto runs "
              "(docs/performance.md, Agreement with the engine)", file=sys.stderr)


def _sweep(args, coll, topo, sizes, algos, root, cfg, left_out) -> tuple[list, list[str]]:
    """[(size, [Result per algorithm], fastest)] and the algorithms that ran. Where one of ``-a all``'s
    algorithms is refused by its model (over the engine's budget where the flow model cannot take it,
    say), each algorithm runs as its own sweep and that one is left out with the refusal, not the whole
    table; a single algorithm's refusal is the command's error."""
    from ..prediction import sweep
    # in this process the loaded topology is reused; worker processes get the spec and load it once each
    where = topo if sweep.jobs_for(args.jobs, len(sizes) * len(algos)) == 1 or args.gpus_per_process != 1 else args.topology
    options = {"model": args.model, "max_memory": args.max_memory, "nchannels": args.nchannels,
               "pipeline": args.pipeline, "root": root, "engine": args.engine,
               **({"select": args.select} if args.select != "nccl" else {}),
               "nccl_version": cfg.release.version if not cfg.requested else cfg.requested,
               "nccl_env": cfg.env or None}

    def tasks(algo_list):
        return [sweep.Task(coll.name, nbytes, where, a, args.protocol,
                           {**options, "trace": bool(args.trace) and nbytes == sizes[-1]})
                for nbytes in sizes for a in algo_list]

    try:
        done = sweep.run(tasks(algos), args.jobs, desc=f"simulate {coll.name}")
    except CollsimError:
        if len(algos) == 1:
            raise
        done, ran = [], []
        for algo in algos:   # again one algorithm at a time (runs already made are cached in this process)
            try:
                done.append(sweep.run(tasks([algo]), args.jobs, desc=f"simulate {coll.name} {algo}"))
                ran.append(algo)
            except CollsimError as e:
                left_out.append((algo, str(e)))
                print(f"collsim: -a all leaves out {algo}: {e}", file=sys.stderr)
        if not ran:
            raise
        algos, done = ran, [runs[i] for i in range(len(sizes)) for runs in done]
    results = []
    for i, nbytes in enumerate(sizes):
        group = done[i * len(algos):(i + 1) * len(algos)]
        results.append((nbytes, group, min(group, key=lambda r: r.time_us)))
    return results, algos


def _faster_choices(results, topo, args, root: int = 0) -> dict:
    """Sizes where a pair NCCL can run is predicted >10% faster than NCCL's pick -> that pair's Result
    (:func:`sim.api.faster_choice`: the model layer decides where the note applies and reuses the runs
    the sweep made)."""
    found = {}
    for nbytes, group, _ in results:
        f = api.faster_choice(group[0], topo, model=args.model, protocol=args.protocol, select=args.select,
                              nchannels=args.nchannels, pipeline=args.pipeline, root=root, engine=args.engine,
                              max_memory=args.max_memory)
        if f is not None:
            found[nbytes] = f
    return found


def _stats(runs: dict, seconds: float) -> dict:
    """What the command cost: engine runs made (worker processes' included), the distinct inputs among
    them (equal when nothing was simulated twice, :mod:`sim.engine.runs`) and the wall seconds of the
    whole prediction."""
    return {"engine_runs": runs["engine_runs"], "distinct_engine_runs": runs["distinct_engine_runs"],
            "seconds": round(seconds, 3)}


# What the closed-form models leave out, said under their tables (the engine and flow models keep them).
MODEL_OMITS = {
    "alpha-beta": "textbook formulas over one ring of uniform hops at the slowest hop's bandwidth and highest "
                  "latency, one channel: no NCCL channels, link efficiencies, latency term, contention or routes",
    "tuner": "NCCL's own closed form (latency + size / bus bandwidth of its graph search): no contention, no "
             "routes, no pipeline fill, no link queueing; only the algorithms NCCL has",
}


def busbw_range(lo: float, hi: float, validated: bool = True) -> str:
    """The table's busbw 80% range, ``lo..hi`` (a dash would read as a minus beside ``9.04e-05``), then
    `` !`` where the question is not validated (two spaces where it is, so the columns stay aligned).

    >>> busbw_range(6.11e-05, 0.000785, validated=False), busbw_range(182.0, 331.0)
    ('6.11e-05..0.000785 !', '     182..331       ')
    """
    return f"{lo:>8.3g}..{hi:<8.3g}" + ("  " if validated else " !")


RANGE_WIDTH = len(busbw_range(1.0, 1.0))
SHORTER_TOLERANCE = 0.01   # a larger size predicted more than 1% faster than the one before it is marked 'v'


def shorter_than_before(results) -> dict:
    """id(Result) -> (the smaller size before it, that size's Result) for each row predicted more than
    :data:`SHORTER_TOLERANCE` faster than the size before it with the same algorithm and protocol (the
    table marks it 'v', the JSON says ``faster_than_smaller_size``): NCCL runs a small message on fewer
    channels, so such rows are its rule, said rather than printed bare."""
    before: dict = {}
    by_algorithm: dict = {}   # -a all: an algorithm's row of the size before, whatever protocol NCCL gave it
    out = {}
    last_pick = None   # one row per size (NCCL's pick): the row of the size before, whatever its pair
    for nbytes, group, _ in results:
        for r in group:
            prev = before.get((r.algorithm, r.protocol))
            before[(r.algorithm, r.protocol)] = (nbytes, r)
            if prev is None and len(group) == 1 and last_pick is not None:
                prev = last_pick   # NCCL switched pair at this size: its tuner's switch point, not where times cross
            if prev is None and len(group) > 1:
                prev = by_algorithm.get(r.algorithm)   # NCCL switched this algorithm's protocol at this size
            by_algorithm[r.algorithm] = (nbytes, r)
            if prev is not None and r.time_us < prev[1].time_us * (1 - SHORTER_TOLERANCE):
                out[id(r)] = prev
        last_pick = (nbytes, group[0]) if len(group) == 1 else None
    return out


def _marks(r, fastest: bool, faster: bool, pick, coll, off: str | None, disabled: dict) -> str:
    """A row's marks: * fastest, + a faster NCCL pair exists, < NCCL's pick, ^ not NCCL's, ~ NCCL would not run
    it here (``off``: why; recorded in ``disabled`` for the footnote)."""
    from ..algorithms import in_nccl
    mark = " *" if fastest else " +" if faster else ""
    mark += " <" if pick == (r.algorithm, r.protocol) else ""
    mark += "" if in_nccl(r.algorithm, coll) else " ^"
    if off:
        mark += " ~"
        disabled.setdefault(f"{r.algorithm}/{r.protocol}: {off}", None)
    return mark


def _table(topo, coll, results, elem, args, multi: bool, faster: dict | None = None, ranges: dict | None = None,
           cfg=None, picks: dict | None = None, *, offs: dict, earlier: dict) -> str:
    """The text table; ``offs`` (id(Result) -> why NCCL would not run the pair here) and ``earlier``
    (:func:`shorter_than_before`) as the JSON rows were built from them."""
    from ..algorithms import in_nccl
    faster, ranges, picks = faster or {}, ranges or {}, picks or {}
    env = " ".join(f"{k}={v}" for k, v in cfg.env) if cfg is not None else ""
    lines = [f"# collsim simulate: {coll.name} on {topo.name} ({topo.nranks} ranks, {topo.nhosts} host(s)"
             + (f", {args.gpus_per_process} GPUs per process" if args.gpus_per_process != 1 else "") + f"), model {args.model}"
             + (f", NCCL {cfg.version}" if cfg is not None else "")
             + (f" (the rules of {cfg.release.tag}, the nearest release collsim reads at or below it)"
                if cfg is not None and cfg.version != cfg.release.version else
                f" (asked {patch}: the rules of {cfg.release.tag}, the release of {cfg.version} collsim reads)"
                if cfg is not None and (patch := patch_asked(getattr(args, "nccl_version", None), cfg.release)) else "")
             + (f" with {env}" if env else "")
             + (f"; NCCL {cfg.version} predates {topo.hardware.gpu_arch.capitalize()} (2.25 added its tables): its tuner "
                f"reads {tables.capitalize()}'s rows for these GPUs, as collsim does"
                if cfg is not None and (tables := _tables_arch(cfg, topo)) else ""),
             f"# {'size':>10s} {'count':>12s} {'type':>6s} {'algorithm':>14s} {'protocol':>8s} {'steps':>6s} {'time':>10s} {'algbw':>8s} {'busbw':>8s}"
             f" {'busbw 80% range':^{RANGE_WIDTH}s}",
             f"# {'(B)':>10s} {'(elements)':>12s} {'':>6s} {'':>14s} {'':>8s} {'':>6s} {'(us)':>10s} {'(GB/s)':>8s} {'(GB/s)':>8s}"
             f" {'(GB/s, lo..hi)':^{RANGE_WIDTH}s}"]
    notes: dict[str, None] = {}
    disabled: dict[str, None] = {}   # NCCL's pairs that NCCL would not run here, and why
    shorter: list[str] = []   # larger sizes predicted faster than the smaller one before them, same pair
    for nbytes, group, best in results:
        for r in group:
            mark = _marks(r, r is best and multi, nbytes in faster, picks.get(nbytes), coll, offs[id(r)], disabled)
            prev = earlier.get(id(r))
            if prev is not None:
                mark += " v"
                used = [x.explain.get("nccl_channels_threads_used", "").split(" channels")[0] for x in (prev[1], r)]
                pair = (prev[1].algorithm, prev[1].protocol)
                shorter.append(f"{prev[0]} -> {nbytes} B {r.algorithm}/{r.protocol}"
                               + (f" on {used[0]} -> {used[1]} channels" if all(used) and pair == (r.algorithm, r.protocol) else "")
                               + (f" after {pair[0]}/{pair[1]}" if pair != (r.algorithm, r.protocol) else ""))
            iv = ranges.get(id(r))
            rng = busbw_range(*iv.busbw_GBps_range, validated=iv.validated) if iv else ""
            if iv is not None and not iv.validated:
                notes.setdefault(iv.note, None)
            lines.append(f"  {nbytes:>10d} {nbytes // elem:>12d} {args.datatype:>6s} {r.algorithm:>14s} {r.protocol:>8s} "
                         f"{r.steps:>6d} {r.time_us:>10.2f} {r.algbw_GBps:>8.2f} {r.busbw_GBps:>8.2f} {rng}{mark}")
            if args.explain:
                lines.extend(_explain(r, topo))
                if nbytes in faster:
                    f = faster[nbytes]
                    lines.append(f"#     faster: {f.algorithm}/{f.protocol} {f.time_us:.2f} us ({f.explain['faster_by']:.0%} "
                                 f"faster): set {f.explain['nccl_env']}")
    if ranges:
        lines += _range_notes(results, ranges)
    lines += _release_note(args, cfg)
    for note in notes:
        lines.append(f"# ! not validated: {note}")
    if multi:
        lines.append("# * fastest algorithm at that size; each algorithm's row runs the protocol NCCL's tuner picks for "
                     "that algorithm there (-p forces one)")
    if picks:
        shown = {(n, r.algorithm, r.protocol) for n, group, _ in results for r in group}
        absent = [f"{a}/{p} at {n} B" for n, (a, p) in picks.items() if (n, a, p) not in shown]
        lines.append("# < NCCL's pick at that size (its tuner's choice: what -a auto times and nccl-tests measures)"
                     + (f"; not in this table: {', '.join(absent)}" if absent else ""))
    textbook = sorted({r.algorithm for _, group, _ in results for r in group if not in_nccl(r.algorithm, coll)})
    if textbook:
        lines.append(f"# ^ not an NCCL algorithm for {coll.name} ({', '.join(textbook)}): a textbook algorithm NCCL "
                     "cannot run (no NCCL_ALGO selects it); the JSON rows say \"in_nccl\": false")
    if disabled:
        lines.append("# ~ NCCL would not run this pair here (so nccl-tests cannot measure it): " + "; ".join(disabled))
    if getattr(args, "select", "nccl") == "fastest":
        picks = [(n, b) for n, _, b in results if not in_nccl(b.algorithm, coll)]
        if picks:
            lines.append("# --select fastest picked an algorithm NCCL cannot run: "
                         + ", ".join(f"{b.algorithm} at {n} B" for n, b in picks))
    alone = [f"{n} B {r.algorithm}/{r.protocol} {r.explain['single_call_us']:,.0f} us" for n, group, _ in results
             for r in group if isinstance(r.explain.get("single_call_us"), (int, float))]
    if alone:   # a planner timing one broadcast (weights at start-up) wants this figure, not the loop's
        lines.append(f"# {coll.name}: the times are per call of nccl-tests' back-to-back loop, whose calls overlap down "
                     f"the chain from the root; one call alone takes longer ({'; '.join(alone[:4])}"
                     f"{'; ...' if len(alone) > 4 else ''}; JSON explain single_call_us)")
    if shorter:
        lines.append(f"# v faster than the smaller size before it ({'; '.join(shorter[:4])}"
                     f"{'; ...' if len(shorter) > 4 else ''}): NCCL runs a small message on fewer of its channels "
                     "(enqueue.cc: as many as the message fills at a few bytes per thread), so a larger one can run on "
                     "more of them and finish sooner; where the pair changes ('after'), NCCL's tuner, by its own model, "
                     "kept the slower pair up to that size; --explain gives each size's terms")
    if args.model in MODEL_OMITS:
        lines.append(f"# model {args.model} leaves out: {MODEL_OMITS[args.model]}")
    if faster:
        sizes = ", ".join(f"{n} B {f.algorithm}/{f.protocol} -{f.explain['faster_by']:.0%}" for n, f in faster.items())
        lines.append(f"# + NCCL's choice, but a pair NCCL can run is predicted over 10% faster ({sizes}): "
                     "--select fastest shows it, --explain names the NCCL_ALGO/NCCL_PROTO")
    if args.model == "auto":  # which model timed which sizes (the JSON has "model" per row)
        used: dict = {}
        for nbytes, group, _ in results:
            for r in group:
                name = f"{r.model} ({args.engine} engine)" if r.model == "engine" and args.engine != "default" else r.model
                used.setdefault(name, []).append(nbytes)
        lines.append("# model auto: " + "; ".join(f"{m} for {len(s)} of {len(results) * len(results[0][1])} run(s)"
                                                  f" ({s[0]}..{s[-1]} B)" for m, s in used.items())
                     + ("; --trace records the engine's events, so the largest size ran on the engine, which may differ "
                        "from the flow model auto takes without it (docs/nccl-model.md, Known gaps)"
                        if any(r.explain.get("engine_for_trace") for _, group, _ in results for r in group) else ""))
        if ("flow" in used and topo.nranks > FLOW_CHECK_MAX_RANKS and args.algorithm == "auto"
                and getattr(args, "select", "nccl") == "nccl" and args.protocol == "auto"):
            lines.append(f"# flow-model sizes over {FLOW_CHECK_MAX_RANKS:,} GPUs are not checked for a faster pair NCCL "
                         "could run ('+'): -a all compares every algorithm there, --select fastest picks the fastest")
    avg = sum(b.busbw_GBps for _, _, b in results) / len(results)
    lines.append(f"# Avg bus bandwidth    : {avg:.3f}")
    return "\n".join(lines)


def _explain(r, topo) -> list[str]:
    from ..nccl.explain import channel_lines, difference_lines
    out = [f"#   {r.algorithm}/{r.protocol}: engine channels {r.nchannels}, pipeline {r.pipeline}"]
    out.extend(channel_lines(r, topo))
    out.extend(difference_lines(r, topo))
    for k, v in r.explain.items():
        out.append(f"#     {k}: {v:.4g}" if isinstance(v, float) else f"#     {k}: {v}")
    b = r.bottleneck()
    if b:
        out.append(f"#     busiest link {b[0]}: busy {b[1]:.2f} us of {r.time_us:.2f} us ({b[1] / r.time_us:.0%})")
    return out
