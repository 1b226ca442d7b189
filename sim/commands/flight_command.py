"""``collsim flight``: analyze flight-recorder dumps, simulate faulty jobs, run a real faulty gloo job.

- ``collsim flight analyze DIR [--format text|json]``: name the culprit rank(s) from the dumps in DIR
  (PyTorch's pickles or JSON, or the simulator's ``rank_N.json``);
- ``collsim flight simulate SCENARIO [--format text|json] [--dump DIR]``: run a built-in scenario or a
  YAML file, print the timeline and the diagnosis;
- ``collsim flight demo [--nprocs 3] [--fault skip|size|dtype|type]``: a real gloo job with one faulty
  rank (needs torch; imported only here, inside the handler).

All exit 0 when the work was done (whatever it found), 2 on bad input.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time

from ..errors import CollsimError
from ..flight.analyze import rank_text, ranks_short
from ..flight.loader import MAX_DIR_ENTRIES, MAX_DUMP_ENTRIES, NAMING, shown_items
from ..flight.scenarios import BUILTIN
from ..io.printable import printable_lines


def _print_json(obj) -> None:
    # written as it is encoded: the JSON keeps every rank of every group (3,000,000-rank groups are 100 MB),
    # and building it as one string first doubled the peak memory
    batch: list[str] = []
    for chunk in json.JSONEncoder(indent=1, default=str).iterencode(obj):
        batch.append(chunk)
        if len(batch) >= 65536:   # one write per chunk (millions of them) tripled the time
            sys.stdout.write("".join(batch))
            batch.clear()
    sys.stdout.write("".join(batch) + "\n")


def _evidence_lines(d: dict) -> list[str]:
    """The evidence, one line per distinct observation with the ranks that show it compacted (``rank(s)
    [0-1022]: op=all_reduce, ...``): one line per rank made a 1,024-rank run's answer 93 KB. Keys that are
    not single ranks (a run of ranks with no dump, ``4-2999999``) are printed as they are."""
    if d["error_type"] == "slow_link":   # keyed by process group: each group's median time
        return [f"  group {name!r}: median {ms:.3f} ms" for name, ms in d["evidence"].items()]
    by_text: dict[str, list] = {}
    lines = []
    for key, ev in d["evidence"].items():
        text = ev if not isinstance(ev, dict) else ", ".join(f"{k}={v}" for k, v in ev.items())
        if key.isdigit():
            by_text.setdefault(text, []).append(int(key))
        else:
            lines.append(f"  rank(s) {key}: {text}")
    return [f"  rank {ranks[0]}: {text}" if len(ranks) == 1 else f"  rank(s) {rank_text(ranks)}: {text}"
            for text, ranks in by_text.items()] + lines


def format_diagnosis(d: dict, elapsed_s: float | None = None, last: int | None = None) -> str:
    """The analyzer's answer as a few lines and a per-rank table (``last``: each dump's entries were cut to it)."""
    lines = [f"ranks read: {rank_text(d['ranks'])}" + (f"; refused: {len(d['refused'])} file(s)" if d["refused"] else "")
             + (f"; the last {last:,} entries of each (--last)" if last else "")]
    if d.get("skipped"):   # a dump under another name is otherwise a "missing" rank with no word of why
        lines.append(f"  skipped {len(d['skipped'])} file(s) or folder(s) (folders, hidden files, names not like a "
                     f"rank's dump: {NAMING}): {shown_items(d['skipped'])}")
    for why in d["refused"].values():
        lines.append(f"  refused {why}")
    for path, why in (d.get("other_job") or {}).items():
        lines.append(f"  left out {path}: {why}")
    for path, why in (d.get("damaged") or {}).items():
        lines.append(f"  note {path}: {why}")
    for name, g in d["process_groups"].items():
        lines.append(f"process group {name!r} ({g['desc'] or 'no description'}): ranks {rank_text(g['ranks'])}")
    lines.append(f"diagnosis: {d['error_type']}")
    lines.append(f"culprit rank(s): {ranks_short(d['culprits']) if d['culprits'] else 'none named'}")
    if d["collective_seq_id"] is not None:
        lines.append(f"where: process group {d['process_group']!r} ({d['pg_desc']}), collective_seq_id {d['collective_seq_id']}")
    lines.append(f"why: {d['details']}")
    if d["evidence"]:
        lines.append("evidence:")
        lines += _evidence_lines(d)
    for f in d["secondary"]:
        lines.append(f"also (explained by the above): {f['error_type']} in group {f['process_group']} seq "
                     f"{f['collective_seq_id']}: {f['details']}")
    for f in d["other_findings"]:
        lines.append(f"also: {f['error_type']} culprits {ranks_short(f['culprits'])} in group {f['process_group']} seq "
                     f"{f['collective_seq_id']}: {f['details']}")
    if elapsed_s is not None:
        lines.append(f"(analyzed in {elapsed_s:.2f} s)")
    # names, descriptions and profiling names are the dumps' text: an ESC sequence or a line break in them
    # must not reach the terminal or start a report line of its own
    return printable_lines(lines)


def _analyze(args) -> int:
    from ..flight.analyze import analyze
    from ..flight.loader import load_dir
    from ..flight.replay import no_cyclic_gc
    from ..io.validation import number, whole
    number(args.straggler_ms, "--straggler-ms", low=0, example="10")
    number(args.slow_factor, "--slow-factor", low=1, low_open=True, example="1.5")
    if args.last is not None:
        whole(args.last, "--last", low=1, high=MAX_DUMP_ENTRIES, example="2000")
    t0 = time.perf_counter()
    with no_cyclic_gc():   # a million entries are kept: the collector rescanning them doubled the reading time
        d = analyze(load_dir(args.dir, last=args.last), straggler_ms=args.straggler_ms, slow_factor=args.slow_factor)
    if args.format == "json":
        _print_json(d)
    else:
        print(format_diagnosis(d, time.perf_counter() - t0, args.last))
    return 0


def _simulate(args) -> int:
    from ..flight.scenarios import format_text, load_scenario, run_scenario
    out = run_scenario(load_scenario(args.scenario), dump_dir=args.dump)
    if args.format == "json":
        _print_json(out)
    else:
        print(format_text(out))
    return 0


def _demo(args) -> int:
    try:
        from real.measure.flight_demo import check_nprocs, run_demo  # its ranks import torch; this module does not
    except ImportError as e:
        raise CollsimError(f"the demo needs torch and the real/ package ({e}): pip install torch==2.13.0") from None
    from ..flight.analyze import analyze
    from ..flight.loader import load_dir
    from ..flight.records import check_dump_dir
    from ..io.validation import number
    # every refusal before anything runs or is written: the gloo job's ranks write rank_<r> into --dump, and a
    # folder of a real incident's dumps was overwritten, then left unreadable (the check simulate --dump makes)
    number(args.timeout_s, "--timeout-s", low=0, low_open=True, high=3600, example="5")
    check_nprocs(args.nprocs)
    if args.dump:
        check_dump_dir(args.dump, keep_simulated=False)
    directory = args.dump or tempfile.mkdtemp(prefix="collsim-flight-")
    info = run_demo(directory, nprocs=args.nprocs, fault=args.fault, timeout_s=args.timeout_s)
    d = analyze(load_dir(directory))
    if args.format == "json":
        _print_json({"demo": info, "dump_dir": directory, "diagnosis": d})
    else:
        print(f"gloo job: {args.nprocs} ranks; injected: {info['injected']}; exit codes {info['exitcodes']}"
              + (" (negative: killed by a signal; gloo aborts a rank that receives the wrong byte count)"
                 if any(c and c < 0 for c in info["exitcodes"]) else ""))
        print(f"dumps (PyTorch's flight recorder) in {directory}")
        print(format_diagnosis(d))
    return 0


FORMAT_HELP = "text (default): a few lines to read; json: every field, every rank (docs/flight.md lists the keys)"


def register(subparsers) -> None:
    p = subparsers.add_parser("flight", help="flight recorder: analyze dumps, simulate hangs and faults, recovery",
                              description=__doc__.split("\n\n")[0].replace("``", ""))   # reST quotes, not help text
    sub = p.add_subparsers(dest="flight_command", metavar="SUBCOMMAND", parser_class=type(p))
    a = sub.add_parser("analyze", help="name the culprit rank(s) from flight-recorder dumps in DIR")
    a.add_argument("dir", metavar="DIR", help=f"directory with one dump per rank, named like {NAMING} (pickle or "
                   "JSON, as PyTorch or collsim wrote it)")
    a.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    a.add_argument("--last", type=int, metavar="N", help="read only each dump's last N entries, as a ring buffer of N "
                   f"would have kept them (for dumps past the limit of {MAX_DUMP_ENTRIES:,} entries each, {MAX_DIR_ENTRIES:,} in all)")
    a.add_argument("--straggler-ms", type=float, default=10.0,
                   help="a rank enqueuing this much later than the median member is a straggler (default 10)")
    a.add_argument("--slow-factor", type=float, default=1.5,
                   help="a group this many times slower than its peers points at a slow link (default 1.5)")
    a.set_defaults(func=_analyze)
    s = sub.add_parser("simulate", help="run a fault scenario (built-in name or YAML file) and diagnose it")
    s.add_argument("scenario", metavar="SCENARIO", help="a .yaml file or a built-in: " + ", ".join(BUILTIN))
    s.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    s.add_argument("--dump", metavar="DIR", help="also write the simulated dumps (rank_N.json) here; a folder holding "
                   "dumps collsim did not simulate (a real job's), or an earlier simulation's that this run would not "
                   "replace, is refused")
    s.set_defaults(func=_simulate)
    d = sub.add_parser("demo", help="a real gloo job with one faulty rank, its dumps, and their analysis (needs torch)")
    d.add_argument("--nprocs", type=int, default=3,
                   help="ranks (processes) of the gloo job (default 3; at most 4 per CPU core, and 64)")
    d.add_argument("--fault", choices=("skip", "size", "dtype", "type"), default="skip")
    d.add_argument("--dump", metavar="DIR", help="write the dumps here (default: a new temporary directory); a folder "
                   "already holding dumps is refused")
    d.add_argument("--timeout-s", type=float, default=5.0, help="gloo timeout: how long ranks wait (default 5)")
    d.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    d.set_defaults(func=_demo)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
