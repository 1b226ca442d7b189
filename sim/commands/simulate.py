"""``collsim simulate``: the nccl-tests table a topology would print, predicted."""
from __future__ import annotations

import sys
from dataclasses import replace

from .. import api
from ..algorithms import candidates, why_not
from ..collectives import get_collective
from ..engine import ENGINES
from ..errors import CollsimError
from ..presets import load_topology
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
    p.add_argument("--nchannels", type=int, default=None, help="channels (default 1, or the model's choice)")
    p.add_argument("--pipeline", type=int, default=None, help="pieces per channel (default: chosen from the protocol)")
    p.add_argument("--root", type=int, default=0, help="root rank for broadcast/reduce")
    p.add_argument("--gpus-per-process", type=int, default=1, metavar="N",
                   help="GPUs one thread launches per call, as nccl-tests -g N (default 1: a process per GPU)")
    p.add_argument("--format", default="table", choices=("table", "json", "csv"))
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace of the largest size to FILE")
    p.add_argument("--explain", action="store_true", help="print the model's terms for each size")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="run the sweep's sizes/algorithms in N processes (0 = every core; default 1)")
    p.add_argument("--stochastic", type=int, default=0, metavar="N",
                   help="seeded stochastic mode: sample each row's network latency N times (log-normal per-hop latency, "
                        "the slowest of the collective's parallel paths; sim/prediction/stochastic.py) and report the "
                        "median and the 10-90%% spread (JSON: 'stochastic'); the 80%% range then covers that spread too")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of --stochastic, a whole number 0 or more (default 0; the same seed gives the same samples)")
    add_nccl_args(p)
    add_size_args(p)
    p.set_defaults(func=run)


def add_nccl_args(p) -> None:
    """--nccl-version, --nccl-env, --nccl-env-from-shell (:mod:`sim.nccl.config`)."""
    from ..nccl.config import HONOURED
    from ..nccl.versions import LATEST, RELEASES
    p.add_argument("--nccl-version", default=None, metavar="X.Y",
                   help=f"the NCCL release whose rules to model: {', '.join(r.version for r in RELEASES)} (a release in "
                        f"between takes the older one's rules; default {LATEST.version}, the newest documented)")
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

    from ..nccl.config import IN_TOPOLOGY, env_from_shell, make_config, split_env
    pairs = dict(env_from_shell()) if getattr(args, "nccl_env_from_shell", False) else {}
    if getattr(args, "nccl_env", None):
        pairs.update(dict(split_env(args.nccl_env)))
    cfg = make_config(getattr(args, "nccl_version", None), pairs or None)
    if cfg.ignored:
        print(f"collsim: ignoring {', '.join(cfg.ignored)}: the model does not honour "
              f"{'it' if len(cfg.ignored) == 1 else 'them'} (see --help for those it does)", file=sys.stderr)
        for var in cfg.ignored:
            if var in IN_TOPOLOGY:
                print(f"collsim: {var} describes the machine: {IN_TOPOLOGY[var]}", file=sys.stderr)
    return cfg


def run(args) -> int:
    import time

    from ..engine.runs import LEDGER
    from ..nccl.machine import with_gpus_per_process
    started, ledger = time.perf_counter(), LEDGER.snapshot()
    topo = with_gpus_per_process(load_topology(args.topology), args.gpus_per_process)
    coll = get_collective(args.collective)
    sizes = sizes_from_args(args)
    check_output_path(args.trace, "--trace", (".json",))
    if args.max_memory is not None:
        from ..prediction.budget import parse_memory
        parse_memory(args.max_memory)   # a bad size is refused before anything runs
    if args.algorithm == "all":
        algos = candidates(coll, topo.nranks, topo)
        if args.model == "flow":
            from ..prediction.flow import flow_covers  # only what the flow model can time on this topology
            algos = [a for a in algos if flow_covers(coll, a, topo) is None]
        elif args.model == "tuner":  # NCCL's closed form only knows NCCL's algorithms, where NCCL runs them
            from ..nccl.constants import NCCL_PROTOCOLS
            from ..nccl.tuner import rank_pairs
            protos = NCCL_PROTOCOLS if args.protocol == "auto" else (args.protocol,)
            algos = [a for a in algos if rank_pairs(coll, sizes[-1], topo, [a], protos)]
        if not algos:
            raise CollsimError(f"no algorithm can run {coll.name} on {topo.name}")
    else:
        if args.algorithm != "auto":
            reason = why_not(args.algorithm, coll, topo.nranks, topo)
            if reason:
                raise CollsimError(f"cannot run --algorithm {args.algorithm} on {topo.name}: {reason}")
        algos = [args.algorithm]
    cfg = nccl_config_from_args(args)
    from ..prediction import stochastic
    seed = 0 if args.seed is None else args.seed
    if args.stochastic:
        stochastic.check_args(args.stochastic, seed)   # refused before the sweep runs, not after it
    elif args.seed is not None:
        print("collsim: ignoring --seed: it has no effect without --stochastic N", file=sys.stderr)
    if args.root and not coll.rooted:   # accepted without a word before
        print(f"collsim: ignoring --root {args.root}: {coll.name} has no root (broadcast and reduce do)", file=sys.stderr)
    from ..prediction import sweep
    ntasks = len(sizes) * len(algos)
    # in this process the loaded topology is reused; worker processes get the spec and load it once each
    where = topo if sweep.jobs_for(args.jobs, ntasks) == 1 or args.gpus_per_process != 1 else args.topology
    tasks = [sweep.Task(coll.name, nbytes, where, a, args.protocol,
                        {"model": args.model, "max_memory": args.max_memory, "nchannels": args.nchannels,
                         "pipeline": args.pipeline, "root": args.root, "engine": args.engine,
                         **({"select": args.select} if args.select != "nccl" else {}),
                         "nccl_version": cfg.release.version if not cfg.requested else cfg.requested,
                         "nccl_env": cfg.env or None,
                         "trace": bool(args.trace) and nbytes == sizes[-1]})
             for nbytes in sizes for a in algos]
    done = iter(sweep.run(tasks, args.jobs, desc=f"simulate {coll.name}"))
    results = []
    for nbytes in sizes:
        group = [next(done) for _ in algos]
        best = min(group, key=lambda r: r.time_us)
        results.append((nbytes, group, best))
    if args.trace:
        trace = results[-1][2].trace
        if trace is None:
            raise CollsimError(f"--trace needs the engine model (got --model {args.model})")
        trace.save(args.trace)
    elem = DTYPE_BYTES[args.datatype]
    from ..nccl.config import use
    with use(cfg):
        faster = _faster_choices(results, topo, args) if algos == ["auto"] else {}
    from ..prediction.intervals import interval, regime
    where = regime(topo)
    ranges = {}
    rows = []
    for nbytes, group, best in results:
        for r in group:
            row = r.row()
            iv = ranges[id(r)] = interval(r.time_us, r.busbw_GBps, nbytes, where=where, collective=coll.name)
            if args.stochastic:
                st = stochastic.sample(r, topo, args.stochastic, seed)
                row["stochastic"] = st
                iv = ranges[id(r)] = replace(iv, time_us_range=(min(iv.time_us_range[0], st["time_us_p10"]),
                                                                 max(iv.time_us_range[1], st["time_us_p90"])),
                                             busbw_GBps_range=(min(iv.busbw_GBps_range[0], st["busbw_GBps_p10"]),
                                                               max(iv.busbw_GBps_range[1], st["busbw_GBps_p90"])))
            row.update({"nccl_version": cfg.version, "time_us_range": list(iv.time_us_range),
                        "busbw_GBps_range": list(iv.busbw_GBps_range), "validated": iv.validated})
            if iv.note:
                row["note"] = iv.note
            if len(algos) > 1:
                row["fastest"] = r is best
            if nbytes in faster:
                f = faster[nbytes]
                row["faster_choice"] = {"algorithm": f.algorithm, "protocol": f.protocol, "time_us": f.time_us,
                                        "faster_by": f.explain["faster_by"], "nccl_env": f.explain["nccl_env"]}
            rows.append(row)
    payload = {"topology": topo.name, "collective": coll.name, "nranks": topo.nranks, "model": args.model,
               "nccl_version": cfg.version, "nccl_rules": cfg.release.tag, "nccl_env": dict(cfg.env),
               "nccl_env_ignored": list(cfg.ignored), "results": rows}
    payload["stats"] = _stats(LEDGER.since(ledger), time.perf_counter() - started)
    text = _table(topo, coll, results, elem, args, multi=len(algos) > 1, faster=faster, ranges=ranges, cfg=cfg)
    if args.stochastic:
        text += (f"\n# stochastic mode: {args.stochastic} samples, seed {seed}, per-hop latency spread "
                 f"sigma {stochastic.HOP_SIGMA} (log-normal); time median [10%-90%] per row:\n")
        text += "\n".join(f"#   {row['nbytes']:>12d} {row['algorithm']}/{row['protocol']}: "
                           f"{row['stochastic']['time_us_median']:.2f} us [{row['stochastic']['time_us_p10']:.2f}-"
                           f"{row['stochastic']['time_us_p90']:.2f}]" for row in rows)
    print(emit(args.format, text, payload, rows))
    return 0


def _faster_choices(results, topo, args) -> dict:
    """Sizes where a pair NCCL can run is predicted >10% faster than NCCL's pick -> that pair's Result
    (:func:`sim.api.faster_choice`: the model layer decides where the note applies and reuses the runs
    the sweep made)."""
    found = {}
    for nbytes, group, _ in results:
        f = api.faster_choice(group[0], topo, model=args.model, protocol=args.protocol, select=args.select,
                              nchannels=args.nchannels, pipeline=args.pipeline, root=args.root, engine=args.engine,
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


def _table(topo, coll, results, elem, args, multi: bool, faster: dict | None = None, ranges: dict | None = None,
           cfg=None) -> str:
    from ..algorithms import in_nccl
    faster, ranges = faster or {}, ranges or {}
    env = " ".join(f"{k}={v}" for k, v in cfg.env) if cfg is not None else ""
    lines = [f"# collsim simulate: {coll.name} on {topo.name} ({topo.nranks} ranks, {topo.nhosts} host(s)), model {args.model}"
             + (f", NCCL {cfg.version}" if cfg is not None else "") + (f" with {env}" if env else ""),
             f"# {'size':>10s} {'count':>12s} {'type':>6s} {'algorithm':>14s} {'protocol':>8s} {'steps':>6s} {'time':>10s} {'algbw':>8s} {'busbw':>8s}"
             f" {'busbw 80% range':>17s}",
             f"# {'(B)':>10s} {'(elements)':>12s} {'':>6s} {'':>14s} {'':>8s} {'':>6s} {'(us)':>10s} {'(GB/s)':>8s} {'(GB/s)':>8s}"
             f" {'(GB/s)':>17s}"]
    notes: dict[str, None] = {}
    for nbytes, group, best in results:
        for r in group:
            mark = " *" if multi and r is best else " +" if nbytes in faster else ""
            mark += "" if in_nccl(r.algorithm, coll) else " ^"
            iv = ranges.get(id(r))
            rng = f"{iv.busbw_GBps_range[0]:>8.3g}-{iv.busbw_GBps_range[1]:<8.3g}" if iv else ""
            if iv is not None and not iv.validated:
                rng += "!"
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
        lines.append("# busbw 80% range: from the out-of-sample errors of the public cases nearest in regime "
                     "(docs/nccl-model.md, Intervals)")
    for note in notes:
        lines.append(f"# ! not validated: {note}")
    if multi:
        lines.append("# * fastest algorithm at that size")
    textbook = sorted({r.algorithm for _, group, _ in results for r in group if not in_nccl(r.algorithm, coll)})
    if textbook:
        lines.append(f"# ^ not an NCCL algorithm for {coll.name} ({', '.join(textbook)}): a textbook algorithm NCCL "
                     "cannot run (no NCCL_ALGO selects it); the JSON rows say \"in_nccl\": false")
    if getattr(args, "select", "nccl") == "fastest":
        picks = [(n, b) for n, _, b in results if not in_nccl(b.algorithm, coll)]
        if picks:
            lines.append("# --select fastest picked an algorithm NCCL cannot run: "
                         + ", ".join(f"{b.algorithm} at {n} B" for n, b in picks))
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
                                                  f" ({s[0]}..{s[-1]} B)" for m, s in used.items()))
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
