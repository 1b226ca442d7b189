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
from .common import check_output_path


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
    p.add_argument("--format", default="table", choices=("table", "json", "markdown", "html"))
    p.add_argument("--out", metavar="FILE", default=None,
                   help="write the output here instead of stdout (markdown: figures go beside it as FILE-*.png)")
    p.set_defaults(func=run)


def _topology(args, job):
    """The topology to predict on, and where it came from (None: no prediction)."""
    from ..evidence.nccl_log import read_log, topology_spec
    if args.topology and args.topology_from_log:
        raise CollsimError("give either --topology or --topology-from-log, not both")
    if args.topology:
        return load_topology(args.topology), args.topology, []
    logs = [read_log(args.topology_from_log)] if args.topology_from_log else list(job.logs)
    if not logs:
        raise CollsimError("no topology: pass --topology SPEC (e.g. dgx-h100:nodes=2), or an NCCL debug log "
                           "(NCCL_DEBUG=INFO) among the paths or as --topology-from-log LOG")
    spec, why = topology_spec(max(logs, key=lambda log: log.nranks or 0))
    return load_topology(spec), spec, [f"topology from the NCCL log: {spec} ({'; '.join(why)})"]


def run(args) -> int:
    from ..evidence import trace_report as report
    from ..evidence.job_compare import compare_job
    from ..evidence.load import read_job
    for path, flag in ((args.out, "--out"), (args.topology_out, "--topology-out")):
        check_output_path(path, flag)
    if args.out and args.format == "markdown" and not args.out.lower().endswith(".md"):
        raise CollsimError(f"--out {args.out}: a Markdown report needs a name ending in .md")
    if args.out and args.format == "html" and not args.out.lower().endswith((".html", ".htm")):
        raise CollsimError(f"--out {args.out}: an HTML report needs a name ending in .html")
    job = read_job(args.paths)
    topo, spec, notes = _topology(args, job)
    doc = compare_job(job, topo, args.algorithm, args.protocol)
    doc["topology_spec"] = spec
    doc["notes"] = notes + doc["notes"]
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
                    write_output(path, png, "--out")
                    figures[name] = os.path.basename(path)
        text = report.markdown(doc, figures)
    else:
        text = report.text_table(doc)
    if args.out:
        write_output(args.out, text + "\n", "--out")
    else:
        print(text)
    return 0
