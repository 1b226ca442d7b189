"""``collsim tune``: write the CSV that NCCL's example tuner plugin reads (``NCCL_TUNER_CONFIG_FILE``).

NCCL's ``ext-tuner/example`` plugin reads lines ``colltype,minbytes,maxbytes,algorithm,protocol,
channels,nNodes,nRanks[,numPipeOps,regBuff]`` (colltypes allreduce, allgather, reducescatter,
broadcast, reduce; algorithms tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat;
protocols ll, ll128, simple; ``-1`` for "any" / "NCCL's default"; ``#`` comments) and, for a call whose
size falls in ``[minbytes, maxbytes]`` on a matching job, forces that algorithm and protocol.

From a topology (``--topology``) every power of two from 1 B to ``-e`` is predicted with
``--select fastest`` (the engine's fastest pair among those NCCL can run, as ``collsim simulate
--select fastest`` shows it); from measurements (``--measured``, one sweep per forced
``NCCL_ALGO``/``NCCL_PROTO``) each measured size takes the pair whose sweep was fastest there. Each
chosen size ``s`` owns the sizes above the previous one up to ``s``; runs of equal choices merge, the
first range starts at 0 and the last ends at ``-e``, so the ranges cover 0..``-e`` with no gap or
overlap. ``channels`` is ``-1`` (NCCL's own count, which the prediction assumes), ``nNodes``/``nRanks``
are the topology's (or the measured job's), so the plugin applies the file to that job shape only.

Examples::

    collsim tune --topology dgx-h100:nodes=2 --out nccl_tuner.conf
    collsim tune --topology cluster.yaml --collective all_reduce -e 1G --out ar.conf
    collsim tune --measured ring_ll.json ring_simple.json tree_ll128.json --out measured.conf
    NCCL_TUNER_PLUGIN=libnccl-tuner-example.so NCCL_TUNER_CONFIG_FILE=nccl_tuner.conf all_reduce_perf ...
"""
from __future__ import annotations

import datetime
import os
import re

from ..collectives import get_collective
from ..errors import CollsimError
from ..units import parse_size

# our collective name -> the plugin's colltype (the collectives NCCL's tuner interface covers)
COLLTYPES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
             "broadcast": "broadcast", "reduce": "reduce"}
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = {"LL": "ll", "LL128": "ll128", "Simple": "simple"}
NCCL_ALGO_VALUES = {"tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
                    "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
DEFAULT_MAX = "16G"


def register(sub) -> None:
    p = sub.add_parser("tune", help="write an NCCL tuner-plugin config (NCCL_TUNER_CONFIG_FILE) from predictions or measurements",
                       description="Write the CSV of NCCL's example tuner plugin: per collective and contiguous size range, "
                                   "the fastest NCCL-runnable algorithm and protocol, from the engine (--topology) or from "
                                   "measured sweeps, one per forced NCCL_ALGO/NCCL_PROTO (--measured).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--topology", "-t", help="preset spec NAME[:k=v,...] or a .yaml/.json/.xml topology file")
    src.add_argument("--measured", nargs="+", metavar="FILE",
                     help="collsim bench --format json sweeps, each run with --nccl-algo/--nccl-proto")
    p.add_argument("--out", "-o", required=True, metavar="FILE", help="the config file to write (e.g. nccl_tuner.conf)")
    p.add_argument("--collective", "-c", action="append", default=None,
                   help="only this collective (repeatable; default all five NCCL's tuner covers)")
    p.add_argument("-b", "--minbytes", default="1", help="smallest size predicted (default 1; the file still starts at 0)")
    p.add_argument("-e", "--maxbytes", default=DEFAULT_MAX, help=f"largest size covered (default {DEFAULT_MAX})")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..io.safe_io import check_not_input, check_output
    check_output(args.out, "--out")
    colls = _collectives(args.collective)
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    if hi < 1 or lo < 1 or lo > hi:
        raise CollsimError(f"-b {args.minbytes} / -e {args.maxbytes}: need 1 <= -b <= -e (e.g. -b 1 -e 16G)")
    if args.measured:
        check_not_input(args.out, "--out", args.measured)
        choices, nnodes, nranks, source = measured_choices(args.measured, colls)
    else:
        from ..presets import load_topology
        topo = load_topology(args.topology)
        choices = predicted_choices(topo, colls, lo, hi)
        nnodes, nranks, source = topo.nhosts, topo.nranks, f"collsim simulate --select fastest on {topo.name}"
    lines = config_lines(choices, hi, nnodes, nranks)
    header = [f"# NCCL tuner plugin config (ext-tuner/example, NCCL_TUNER_CONFIG_FILE), written by collsim tune "
              f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"# from: {source}",
              f"# job: nNodes {nnodes}, nRanks {nranks}; sizes 0..{hi} B; each range takes the choice at its upper end",
              "# colltype,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks  (channels -1: NCCL's own count)"]
    from ..io.safe_io import write_output
    write_output(args.out, "\n".join(header + lines) + "\n", "--out")
    per = {c: sum(1 for ln in lines if ln.startswith(COLLTYPES[c] + ",")) for c in choices}
    print(f"wrote {args.out}: {len(lines)} ranges ({', '.join(f'{COLLTYPES[c]} {n}' for c, n in per.items())}) "
          f"for nNodes {nnodes}, nRanks {nranks}")
    print(f"use it: NCCL_TUNER_PLUGIN=<path to libnccl-tuner-example.so> NCCL_TUNER_CONFIG_FILE={args.out}")
    return 0


def _collectives(names) -> list[str]:
    if not names:
        return list(COLLTYPES)
    out = []
    for n in names:
        c = get_collective(n).name
        if c not in COLLTYPES:
            raise CollsimError(f"NCCL's tuner plugin does not cover {c} (it tunes {', '.join(COLLTYPES)}): drop --collective {n}")
        out.append(c)
    return out


def power_sizes(lo: int, hi: int) -> list[int]:
    """Every power of two in [lo, hi], and hi itself.

    >>> power_sizes(3, 20)
    [4, 8, 16, 20]
    """
    sizes, s = [], 1
    while s <= hi:
        if s >= lo:
            sizes.append(s)
        s *= 2
    if not sizes or sizes[-1] != hi:
        sizes.append(hi)
    return sizes


def predicted_choices(topo, colls: list[str], lo: int, hi: int) -> dict:
    """collective -> [(size, algorithm, protocol)]: the engine's fastest NCCL-runnable pair per size."""
    from ..api import simulate
    out = {}
    for c in colls:
        picks = []
        for s in power_sizes(lo, hi):
            r = simulate(c, s, topo, select="fastest")
            if r.algorithm in ALGORITHMS and r.protocol in PROTOCOLS:
                picks.append((s, r.algorithm, r.protocol))
        if picks:
            out[c] = picks
    if not out:
        raise CollsimError(f"NCCL runs none of {', '.join(colls)} on {topo.name}: nothing to tune")
    return out


def measured_choices(paths: list[str], colls: list[str]):
    """collective -> [(size, algorithm, protocol)] from sweeps each forced to one pair; and the job shape."""
    from real.compare.measured import read_measurement, with_statistic
    best: dict[str, dict[int, tuple[float, str, str]]] = {}
    shapes = set()
    for path in paths:
        m = with_statistic(read_measurement(path))
        algo, proto = _forced_pair(path)
        shapes.add((_hosts(m.label, m.nranks, path), m.nranks))
        if m.collective not in colls:
            continue
        for r in m.rows:
            t = r.time("best")
            if t and (r.nbytes not in best.setdefault(m.collective, {}) or t < best[m.collective][r.nbytes][0]):
                best[m.collective][r.nbytes] = (t, algo, proto)
    if len(shapes) > 1:
        raise CollsimError(f"the measured files come from different jobs ({', '.join(f'{n} node(s)/{r} ranks' for n, r in sorted(shapes))}): "
                           "tune one job shape at a time")
    if not best:
        raise CollsimError(f"none of the measured files measures {', '.join(colls)}")
    (nnodes, nranks), = shapes
    choices = {c: [(s, a, p) for s, (_, a, p) in sorted(rows.items())] for c, rows in best.items()}
    return choices, nnodes, nranks, "measured sweeps " + ", ".join(os.path.basename(p) for p in paths)


def _forced_pair(path: str) -> tuple[str, str]:
    """The (algorithm, protocol) a bench JSON forced with NCCL_ALGO / NCCL_PROTO (its options.nccl_env)."""
    from real.compare.measured import MAX_FILE_BYTES

    from ..io.safe_io import load_json, read_input
    try:
        doc = load_json(read_input(path, "measured file", MAX_FILE_BYTES), path)
        env = dict(doc.get("options", {}).get("nccl_env") or [])
    except (CollsimError, ValueError, AttributeError, TypeError):
        env = {}
    algo = NCCL_ALGO_VALUES.get(str(env.get("NCCL_ALGO", "")).lower())
    proto = {k.lower(): k for k in PROTOCOLS}.get(str(env.get("NCCL_PROTO", "")).lower())
    if not algo or not proto:
        raise CollsimError(f"{path} does not say which single NCCL_ALGO and NCCL_PROTO it forced: measure each pair with "
                           "`collsim bench --backend nccl --nccl-algo Ring --nccl-proto Simple --format json`")
    return algo, proto


def _hosts(label: str, nranks: int | None = None, source: str = "") -> int:
    """Node count from a bench topology name (``local:nccl:8`` -> 1, ``cluster:nccl:16:hosts=2`` -> 2),
    checked by :mod:`sim.io.validation`: a whole number from 1 to the job's rank count."""
    from ..io.validation import MAX_RANKS, parse_number, whole
    if "hosts=" in label:
        raw = label.rsplit("hosts=", 1)[1].split(",")[0].strip()
        what = f"{source or 'the measured file'}: hosts"
        if not re.fullmatch(r"\d{1,8}", raw):
            raise CollsimError(f"{what}={raw[:30]!r} is not a whole number of hosts: re-run `collsim bench --format json`")
        return whole(parse_number(raw, what), what, low=1, high=nranks or MAX_RANKS, example="2")
    return 1


def config_lines(choices: dict, maxbytes: int, nnodes: int, nranks: int) -> list[str]:
    """The CSV lines: per collective, contiguous ranges 0..maxbytes (see the module docstring).

    >>> config_lines({"all_reduce": [(8, "tree", "LL"), (16, "tree", "LL"), (32, "ring", "Simple")]}, 64, 2, 16)
    ['allreduce,0,16,tree,ll,-1,2,16', 'allreduce,17,64,ring,simple,-1,2,16']
    """
    lines = []
    for coll, picks in choices.items():
        ranges = []   # [lo, hi, algorithm, protocol]
        for size, algo, proto in sorted(picks):
            if size > maxbytes:
                break
            if ranges and ranges[-1][2:] == [algo, proto]:
                ranges[-1][1] = size
            else:
                ranges.append([ranges[-1][1] + 1 if ranges else 0, size, algo, proto])
        if not ranges:
            continue
        ranges[-1][1] = maxbytes
        lines += [f"{COLLTYPES[coll]},{lo},{hi},{a},{PROTOCOLS[p]},-1,{nnodes},{nranks}" for lo, hi, a, p in ranges]
    return lines
