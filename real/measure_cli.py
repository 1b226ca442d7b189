"""``collsim bench`` and ``collsim env``. torch is imported inside the handlers only, so the rest of the
CLI (``collsim simulate``...) works on machines without torch.

Examples::

    collsim env
    collsim bench --backend gloo --nprocs 2 --collective all_reduce -b 1K -e 1M -f 4 -n 5 -w 2
    collsim bench --nprocs 8 -b 8 -e 8G -f 2 --format json > h100.json          # NCCL, one GPU per rank
    torchrun --nnodes 2 --nproc-per-node 8 $(which collsim) bench -b 1M -e 1G -f 2  # joins the torchrun job
    mpirun -np 16 -x MASTER_ADDR=node01 -x COLLSIM_TOKEN collsim bench -b 1M -e 1G -f 2   # like nccl-tests' MPI build
    srun -N 2 --ntasks-per-node 8 collsim bench --pairs -b 256M -e 256M --plot pairs.png  # which node is slow?
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os

from sim.errors import CollsimError

BENCH_HELP = """\
Measure a collective like nccl-tests: sizes -b..-e (x -f, or + -i), -w warm-up and -n timed calls
per size, out-of-place and in-place, a #wrong correctness check, time averaged over ranks (-a).
Sizes use K/M/G = 1024-based bytes; bandwidths are decimal GB/s. For all_gather, reduce_scatter
and all_to_all the size is the total buffer (n shards), as in nccl-tests."""


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure a collective on this machine (nccl-tests compatible)",
                              description=BENCH_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collective", default="all_reduce",
                   help="all_reduce, all_gather, reduce_scatter, broadcast, reduce or all_to_all (default all_reduce)")
    p.add_argument("-b", "--minbytes", default="32M", help="smallest size (default 32M)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    p.add_argument("-i", "--stepbytes", default="1M", help="size increment when -f is not given (default 1M)")
    p.add_argument("-f", "--stepfactor", type=float, default=0.0, help="size multiplier (default: use -i)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the whole sweep R times and pool each size's iterations (default 1): on a shared "
                        "machine a burst of load then hits every size a little instead of one size a lot")
    p.add_argument("-w", "--warmup_iters", type=int, default=1, help="warm-up iterations (default 1)")
    p.add_argument("-c", "--check", type=int, default=1, help="correctness checks per size, 0 = none (default 1)")
    p.add_argument("-o", "--op", default="sum", help="sum, prod, min, max, avg or all (default sum)")
    p.add_argument("-d", "--datatype", default="float",
                   help="int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2, or all (default float)")
    p.add_argument("-r", "--root", type=int, default=0, help="root rank of broadcast and reduce (default 0)")
    p.add_argument("-a", "--average", type=int, default=1,
                   help="time reported: 0 rank 0's, 1 average over ranks, 2 minimum, 3 maximum (default 1)")
    p.add_argument("--backend", default=None, help="nccl or gloo (default: nccl where CUDA is available, else gloo)")
    p.add_argument("--nprocs", type=int, default=None,
                   help="local ranks to start (default: one per GPU for nccl, 2 for gloo; under torchrun: its job)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before all ranks are stopped (default 300)")
    p.add_argument("--timer", choices=("host", "events"), default="host",
                   help="host clock + device sync (nccl-tests' way, default) or CUDA events")
    p.add_argument("--impl", default="torch",
                   help="torch (the backend's collective, default), program:ALGO (a sim algorithm, e.g. program:ring) "
                        "or program:FILE.py (a file defining build(collective, nranks, root) -> Program; it is your "
                        "own code and runs as you in every rank, not sandboxed beyond --timeout)")
    p.add_argument("--nccl-algo", default=None, help="NCCL_ALGO for this run (Ring, Tree, NVLS, CollNetDirect...)")
    p.add_argument("--nccl-proto", default=None, help="NCCL_PROTO for this run (LL, LL128, Simple)")
    p.add_argument("--nccl-channels", type=int, default=None, help="NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output (default table)")
    m = p.add_argument_group("multi-node (torchrun, srun, mpirun; docs/multinode.md)")
    m.add_argument("--listen", metavar="ADDR", default=None,
                   help="address rank 0's rendezvous listens on (default: 127.0.0.1 when every rank is on this host, "
                        "else the launcher's MASTER_ADDR / Slurm's first host; never all interfaces)")
    m.add_argument("--token-file", metavar="FILE", default=None,
                   help="file holding the job's shared secret (mode 600), which every rank must prove before joining "
                        "(default: $COLLSIM_TOKEN; a run that starts its own ranks makes a random one)")
    m.add_argument("--allow-no-token", action="store_true",
                   help="run a job whose rendezvous is on the network without a token (anyone reaching the port can join)")
    m.add_argument("--pairs", action="store_true",
                   help="cluster acceptance: time a send/recv exchange of -e bytes on every pair of ranks, compare each "
                        "with its prediction, and name the pairs, ranks, nodes and links below --threshold")
    m.add_argument("--threshold", type=float, default=0.8,
                   help="--pairs: measured/predicted below this is slow (default 0.8)")
    m.add_argument("--topology", metavar="SPEC", default=None,
                   help="--pairs: predict on this topology (preset spec or file; default: the GPU's DGX preset for nccl, "
                        "the host's loopback/NIC model for gloo)")
    m.add_argument("--plot", metavar="FILE.png", default=None, help="--pairs: write a node x node heat map")
    p.set_defaults(func=bench)

    e = subparsers.add_parser("env", help="what this machine can run: torch, CUDA, GPUs, NCCL, gloo",
                              description="Print the versions and devices collsim bench would use, and what they mean.")
    e.add_argument("--format", choices=("text", "json"), default="text")
    e.add_argument("--topology-out", metavar="FILE.yaml", default=None,
                   help="on a GPU machine: write this machine as a topology file (from `nvidia-smi topo -m`, the GPU "
                        "names and NCCL's own topology dump, NCCL_TOPO_DUMP_FILE), for `collsim compare/simulate --topology FILE.yaml`")
    e.set_defaults(func=env)


def build_options(args):
    """Flags -> checked :class:`real.measure.options.BenchOptions` (raises CollsimError with the fix)."""
    return options_and_job(args)[0]


def options_and_job(args):
    """Checked options, and the :class:`real.measure.launchers.Job` of the launcher that started this process
    (None: collsim starts its own ranks)."""
    from sim.collectives import get_collective
    from sim.units import parse_size

    from .measure import backends, launchers
    from .measure.options import BenchOptions, check_sweep, nccl_env, parse_dtypes, parse_impl, parse_ops, sweep_sizes
    job = launchers.detect()  # stale RANK/WORLD_SIZE/OMPI/SLURM variables: refused before anything starts
    collective = get_collective(args.collective).name
    sizes = sweep_sizes(args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes)
    if importlib.util.find_spec("torch") is None:  # cheap: importing torch here costs ~1 s per run
        raise CollsimError("collsim bench needs torch: pip install torch==2.13.0 (CPU) or a CUDA build")
    backend = (args.backend or backends.default_backend()).lower()
    nprocs = args.nprocs
    if job is not None and job.world == 1 and job.launcher in ("mpi", "slurm") and (nprocs or 1) > 1:
        job = None   # mpirun -np 1 / srun -n 1 collsim bench --nprocs N: start N local ranks, as nccl-tests' -g
    if job is not None:
        if nprocs not in (None, job.world):
            raise CollsimError(f"--nprocs {nprocs} differs from the {job.launcher} job's world size {job.world}: "
                               f"drop --nprocs under {job.launcher}")
        nprocs = job.world
    elif nprocs is None and backend == "nccl":
        import torch
        nprocs = max(1, torch.cuda.device_count())
    elif nprocs is None:
        nprocs = 2  # the smallest job that communicates
    opts = BenchOptions(
        collective=collective, sizes=sizes, minbytes=min(sizes), maxbytes=max(sizes), stepfactor=args.stepfactor,
        stepbytes=parse_size(args.stepbytes), iters=args.iters, repeat=args.repeat,
        warmup=args.warmup_iters, check=args.check, ops=parse_ops(args.op), dtypes=parse_dtypes(args.datatype),
        root=args.root, average=args.average, backend=backend, nprocs=nprocs, timeout_s=args.timeout,
        timer=args.timer, impl=parse_impl(args.impl), fmt=args.format,
        nccl_env=nccl_env(args.nccl_algo, args.nccl_proto, args.nccl_channels),
        listen=args.listen, token_file=args.token_file, allow_no_token=args.allow_no_token, pairs=args.pairs,
        threshold=args.threshold, topology=args.topology, plot=args.plot)
    check_multinode(opts, job)
    backends.check_backend(opts, None if job is None else job.local_world or 1)  # first: "no GPU" says more than what follows from it
    check_sweep(opts)
    backends.type_plan(opts, get_collective(collective).reduces)  # raises for a type/op the backend lacks
    if opts.impl.startswith("program:"):
        from .measure import executor
        spec = opts.impl.split(":", 1)[1]
        if spec.endswith(".py"):  # your own code: first in a child with a time limit, so exit() or a loop is reported
            from sim.grade.user_file import run_user_file  # as collsim verify runs it: sandboxed, judged here
            _, fatal = run_user_file(spec, [(collective, nprocs)], min(opts.timeout_s, 60.0))
            if fatal:
                raise CollsimError(f"--impl {opts.impl}: {fatal}")
        executor.load_program(opts.impl, collective, nprocs, opts.root)  # refuse bad programs before starting
    return opts, job


def check_multinode(opts, job) -> None:
    """--listen, the token, --pairs flags: refused before any rank starts, with the fix."""
    from sim.commands.common import check_output_path
    from sim.io.validation import number

    from .measure import rendezvous
    rendezvous.read_token(opts.token_file)   # unreadable or group-readable file, empty variable
    if opts.listen and job is not None and not job.serve_store:
        raise CollsimError("--listen: under torchrun its agent serves the rendezvous; give torchrun --master-addr instead")
    if opts.listen is not None:
        rendezvous.refuse_every_interface(opts.listen)   # "never all interfaces", as the help says
    addr = opts.listen or (job.master_addr if job is not None else "127.0.0.1")
    has_token = bool(opts.token_file or os.environ.get(rendezvous.TOKEN_VAR))
    if job is not None and not has_token and not opts.allow_no_token and not rendezvous.is_loopback(addr):
        raise CollsimError(f"the rendezvous at {addr} is reachable from the network and no token is set: give every rank "
                           f"the same secret (export {rendezvous.TOKEN_VAR}=$(openssl rand -hex 32), or --token-file FILE), "
                           "or --allow-no-token to run without one")
    if not opts.pairs:
        for flag, value in (("--plot", opts.plot), ("--topology", opts.topology)):
            if value:
                raise CollsimError(f"{flag} goes with --pairs: add --pairs, or drop {flag}")
        return
    number(opts.threshold, "--threshold", low=0, low_open=True, high=10, example="0.8")
    if opts.nprocs < 2:
        raise CollsimError("--pairs needs at least 2 ranks: --nprocs 2 or more, or a launcher with 2+ tasks")
    if opts.impl != "torch" or opts.fmt == "csv":
        raise CollsimError("--pairs measures a send/recv exchange and prints a table or JSON: drop --impl/--format csv")
    check_output_path(opts.plot, "--plot", (".png",))
    if opts.topology:
        from sim.presets import load_topology
        load_topology(opts.topology)   # a bad spec fails here, not in every rank


def bench(args) -> int:
    from .measure import launch
    opts, job = options_and_job(args)
    if job is not None:
        from .measure.worker import run_launched
        return 1 if run_launched(opts, job) else 0
    return launch.launch_local(opts)


def topology_out(path: str, rec: dict, dump: tuple[str | None, str] | None = None) -> str:
    """Write the machine ``rec`` (:func:`real.measure.envinfo.collect`) describes as a topology file, from its
    ``nvidia-smi topo -m`` matrix and NCCL's topology dump (:mod:`real.measure.topo_dump`); returns what was read.
    ``dump``: ``(xml_text or None, how or why not)``, made here (a child process initialising NCCL) when None."""
    import datetime
    import socket

    import yaml

    from sim.commands.common import check_output_path
    from sim.presets import load_topology
    from sim.topology import Topology
    from sim.topology.nccl_xml import mesh_pair_links, parse_topology_xml, preset_for
    from sim.topology.nvidia_smi import parse_nvidia_smi_topo, with_mesh_pair_links

    from .measure.topo_dump import merge_nodes, nccl_topology_dump, nic_legend
    check_output_path(path, "--topology-out", (".yaml", ".yml", ".json"))
    matrix = rec.get("nvidia_smi_topo") or ""
    gpus = [str(g) for g in rec.get("gpus") or []] if isinstance(rec.get("gpus"), list) else []
    smi, name = None, None
    if "GPU0" in matrix:
        smi, name = parse_nvidia_smi_topo(matrix + "\n" + "\n".join(f"GPU: {g}" for g in gpus) + "\n", "nvidia-smi topo -m")
    # NCCL runs only where a GPU is visible: torch's CUDA, or a matrix nvidia-smi printed on this machine
    on_gpu = bool(rec.get("cuda_available")) or (smi is not None and rec.get("hostname") == socket.gethostname())
    ngpus = (len(smi.gpus) if smi else len(gpus)) if on_gpu else 0
    xml_text, how = dump if dump is not None else nccl_topology_dump(ngpus)
    nccl_node = parse_topology_xml(xml_text, "NCCL_TOPO_DUMP_FILE") if xml_text else None
    if smi is None and nccl_node is None:
        raise CollsimError("--topology-out needs a GPU machine: this one has no `nvidia-smi topo -m` matrix "
                           f"({'no nvidia-smi' if not matrix else matrix.splitlines()[0][:80]}), and the NCCL topology "
                           f"dump part was {how}; run it where the GPUs are")
    node, said = merge_nodes(smi, nccl_node, nic_legend(matrix))
    params = {"gpu": name} if name else {}
    spec, read = preset_for(node, params, "this machine", scales_mesh=True)
    sources = (["nvidia-smi topo -m"] if smi else []) + ([f"NCCL_TOPO_DUMP_FILE ({how})"] if nccl_node else [])
    read = (said + read[:1] + ([f"GPU name in the text: NVIDIA {name.upper()}"] if name else []) + read[1:]
            + ([] if nccl_node else [f"NCCL topology dump: {how}"]))
    if len(node.gpus) < 2:   # NCCL's view still says something worth a line; a topology of one GPU does not
        raise CollsimError(f"--topology-out: this machine has {len(node.gpus)} GPU, so writing a topology was skipped (a "
                           f"collective needs at least 2 GPUs); what was read: {'; '.join(read[:-1])}")
    topo = load_topology(spec)
    if (pair := mesh_pair_links(node)) is not None:   # a direct mesh at its own NV# per pair, not the preset's
        topo = with_mesh_pair_links(topo, pair)
    hardware = topo.hardware.with_(xml_preset=spec, nccl_topo_dump=how if nccl_node else f"not used: {how}")
    doc = Topology.build(f"{rec.get('hostname') or 'this-machine'}({topo.name})", topo.nodes, topo.links, hardware).to_dict()
    doc["meta"].update(sources=sources, read=read)   # lists: to_dict keeps scalars only
    from sim.io.safe_io import write_output
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = "".join(f"# {line}\n" for line in [f"collsim env --topology-out on {rec.get('hostname')}, {stamp}",
                                                f"sources: {'; '.join(sources)}", *read])
    write_output(path, json.dumps(doc, indent=1) if path.lower().endswith(".json")
                 else head + yaml.safe_dump(doc, sort_keys=False), "--topology-out")
    return "\n".join(read) + f"\nwrote {path}: use it with `collsim compare --topology {path}`"


def env(args) -> int:
    from .measure import envinfo
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: collsim simulate works; collsim bench needs pip install torch==2.13.0")
        return 1
    rec = envinfo.collect(world_size=1)
    print(json.dumps(rec, indent=2) if args.format == "json" else envinfo.render(rec))
    if args.topology_out:
        print(topology_out(args.topology_out, rec))
    return 0
