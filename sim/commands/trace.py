"""``collsim trace``: a real job's collectives (profiler traces, NCCL logs, flight dumps) against the model.

    collsim trace traces/ --topology dgx-h100                 # one profiler trace per rank in a folder
    collsim trace rank0.pt.trace.json.gz --topology dgx-h100:nodes=2 --format json
    collsim trace nccl.log                                     # the topology from the log itself
    collsim trace traces/ nccl.log --format html --out report.html
    collsim trace nccl.log --topology-out machine.txt          # just the spec the log describes
"""
from __future__ import annotations

import json
import os

from ..errors import CollsimError
from ..io.safe_io import write_output
from ..presets import load_topology
from .common import check_model_choice, check_output_path
from .simulate import add_nccl_args, nccl_config_printed


def register(sub) -> None:
    p = sub.add_parser("trace", help="set a real job's collectives (profiler trace, NCCL log, flight dumps) against the model",
                       description="Read PyTorch profiler traces (Chrome-trace JSON, plain or .gz, one per rank or a folder), "
                                   "NCCL_DEBUG=INFO logs and flight-recorder dump folders; list every distinct collective "
                                   "with its measured time (median, spread, slowest rank) beside the prediction on a "
                                   "topology, NCCL's algorithm/protocol beside the model's, the step's share per "
                                   "collective type and stragglers. See docs/traces.md.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="trace files or folders, NCCL logs, flight-recorder dump folders")
    p.add_argument("--topology", "-t", default=None,
                   help="preset spec or file to predict on (default: the machine an NCCL log among PATHs describes)")
    p.add_argument("--topology-from-log", metavar="LOG", default=None,
                   help="take the topology from this NCCL debug log (need not be one of the PATHs)")
    p.add_argument("--topology-out", metavar="FILE", default=None,
                   help="also write the topology spec derived from the NCCL log (one line) to FILE")
    p.add_argument("--algorithm", "-a", default="auto", help="the model's algorithm (default auto: NCCL-style choice)")
    p.add_argument("--protocol", "-p", default="auto", help="auto, LL, LL128, Simple or ideal")
    add_nccl_args(p, default_note=_release_help())
    p.add_argument("--format", default="table", choices=("table", "json", "markdown", "html"),
                   help="table (default: text on stdout), json (the document of docs/traces.md), markdown (figures "
                        "written beside --out) or html (one page, figures embedded)")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write the output here instead of stdout (markdown: figures go beside it, named after it without .md: r.md -> r-time.png, ...)")
    p.set_defaults(func=run)


def _release_help() -> str:
    """What ``trace`` does without --nccl-version, as sim.nccl.versions.nearest_documented decides it."""
    from ..nccl.versions import LATEST, OLDEST, unmodelled_spans
    gaps = "; ".join(f"{span}: {entry}'s" for span, entry in unmodelled_spans())
    return (f"default: the release an NCCL log among PATHs prints, else one a trace or the dumps record, else "
            f"{LATEST.version}; a recorded release collsim does not model gets the nearest modelled one's rules ({gaps}; "
            f"before {OLDEST.version}: {OLDEST.version}'s; after {LATEST.version}: {LATEST.version}'s) and a note says "
            "which, while --nccl-version refuses those")


def _same_file(a: str, b: str) -> bool:
    """Whether two output names reach one file: the same path after links and '..', or one file by two names."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:   # one of them does not exist yet: they are different files
        return False


def _check_outputs(args) -> None:
    """Refuse two outputs that would write one file (one would silently replace the other)."""
    outs = [(args.out, "--out"), (args.topology_out, "--topology-out")]
    if args.out and args.format == "markdown":   # the report's figures go beside it (see run)
        from ..evidence.trace_report import FIGURES
        stem = os.path.splitext(args.out)[0]
        outs += [(f"{stem}-{name}.png", f"--out {args.out}'s figure") for name, _caption, _make in FIGURES]
    named = [(path, flag) for path, flag in outs if path]
    for i, (a, flag_a) in enumerate(named):
        for b, flag_b in named[i + 1:]:
            if _same_file(a, b):
                raise CollsimError(f"{flag_a} {a} and {flag_b} {b} are the same file: one would replace the other; "
                                   "give each its own name")


def _topology(args, job):
    """The topology to predict on, and where it came from (None: no prediction)."""
    from ..evidence.job import other_chip
    from ..evidence.nccl_log import read_log, topology_spec
    if args.topology and args.topology_from_log:
        raise CollsimError("give either --topology or --topology-from-log, not both")
    if args.topology:
        return load_topology(args.topology), args.topology, []
    logs = [read_log(args.topology_from_log)] if args.topology_from_log else list(job.logs)
    if args.topology_from_log:
        # the log must describe the job the evidence recorded: another job's machine would be compared unseen
        log = logs[0]
        clash = ([f"{log.nranks} ranks against {job.world_size}"] if log.nranks and job.world_size and
                 log.nranks != job.world_size else []) + \
                ([f"{log.gpu} against {job.device}"] if other_chip(job.device, log.gpu) else [])
        if clash:
            raise CollsimError(f"--topology-from-log {args.topology_from_log} describes another job than the evidence "
                               f"({'; '.join(clash)}): give the NCCL log of the same run, or --topology SPEC")
    if not logs:
        raise CollsimError("no topology: pass --topology SPEC (e.g. dgx-h100:nodes=2), or an NCCL debug log "
                           "(NCCL_DEBUG=INFO) among the paths or as --topology-from-log LOG")
    spec, why = topology_spec(max(logs, key=lambda log: log.nranks or 0))
    return load_topology(spec), spec, [f"topology from the NCCL log: {spec} ({'; '.join(why)})"]


def _topology_only(args) -> bool:
    """``--topology-out`` from NCCL logs that hold set-up lines but no per-call ones: the spec is still
    derivable, so it is written (with a note) rather than refused."""
    from ..evidence.nccl_log import read_log, topology_spec
    if not args.topology_out or args.topology or not all(os.path.isfile(p) for p in args.paths):
        return False
    logs = [read_log(p) for p in args.paths]
    if any(log.calls or log.nccl_tests for log in logs):
        return False
    spec, why = topology_spec(max(logs, key=lambda log: log.nranks or 0))
    write_output(args.topology_out, spec + "\n", "--topology-out")
    import sys
    print(f"collsim: wrote {spec} to {args.topology_out} ({'; '.join(why)}); the log has no per-call lines to "
          "compare (NCCL_DEBUG_SUBSYS=INIT,COLL,TUNING prints them)", file=sys.stderr)
    return True


def run(args) -> int:
    from ..evidence import trace_report as report
    from ..evidence.job_compare import compare_job
    from ..evidence.load import read_job
    check_model_choice(args.algorithm, args.protocol)
    for path, flag in ((args.out, "--out"), (args.topology_out, "--topology-out")):
        check_output_path(path, flag)
    _check_outputs(args)
    if args.out and args.format == "markdown" and not args.out.lower().endswith(".md"):
        raise CollsimError(f"--out {args.out}: a Markdown report needs a name ending in .md")
    if args.out and args.format == "html" and not args.out.lower().endswith((".html", ".htm")):
        raise CollsimError(f"--out {args.out}: an HTML report needs a name ending in .html")
    try:
        job = read_job(args.paths)
    except CollsimError:
        if _topology_only(args):
            return 0
        raise
    topo, spec, notes = _topology(args, job)
    from ..nccl import config as nccl_config
    printed = next((log.version for log in job.logs if log.version), None)
    if printed or not job.nccl_version:   # an NCCL log's banner, else what a trace or the dumps record
        release = printed, ("the NCCL log" if job.logs else "the paths"), "prints"
    else:
        release = job.nccl_version, "the evidence (profiler trace or flight dumps)", "records"
    cfg, release_note = nccl_config_printed(args, *release)
    with nccl_config.use(cfg):
        doc = compare_job(job, topo, args.algorithm, args.protocol)
    # the spec as given or derived, not the topology's name: a name leaves out parameters such as bandwidth_GBps
    # (fully-connected:n=2), and the printed topology must reproduce the prediction when given to -t
    doc["topology"] = doc["topology_spec"] = spec
    doc["nccl_version"] = cfg.version
    doc["nccl_rules"] = cfg.release.version
    doc["notes"] = notes + [release_note] + doc["notes"]
    if args.topology_out:
        write_output(args.topology_out, spec + "\n", "--topology-out")
    if args.format == "json":
        text = json.dumps(doc, indent=1)
    elif args.format == "html":
        text = report.html_report(doc)
    elif args.format == "markdown":
        figures = {}
        if args.out:
            stem = os.path.splitext(args.out)[0]
            for name, _caption, make in report.FIGURES:
                png = make(doc)
                if png:
                    path = f"{stem}-{name}.png"
                    write_output(path, png, f"--out {args.out}'s figure")
                    figures[name] = os.path.basename(path)
        text = report.markdown(doc, figures)
    else:
        text = report.text_table(doc)
    if args.out:
        write_output(args.out, text + "\n", "--out")
    else:
        print(text)
    return 0
