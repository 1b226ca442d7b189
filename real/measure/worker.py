"""One rank of ``collsim bench``: join the process group, run the sweep, and (rank 0) print the results.

Started by :mod:`real.measure.launch` as ``python -m real.measure.worker`` with the options in the JSON file
``$COLLSIM_BENCH_OPTIONS_FILE`` and torch's rank variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT); rank 0 serves the rendezvous on the launcher's loopback socket (see :mod:`real.measure.launch`).
Under torchrun, mpirun or srun ``collsim bench`` calls :func:`run_rank` directly with the
:class:`real.measure.launchers.Job` it read from the launcher's variables. Every rank passes the token check of
:mod:`real.measure.rendezvous` before any collective; rank 0 reports every rank's host, local rank and device.

Exit status: 0 when every check passed, 4 (``WRONG``) when rank 0 found wrong elements (it has said
so already), 1 when the rank failed.

Test hook (used by tests/real/test_launch.py to show that a dead rank cannot hang the run):
``COLLSIM_TEST_KILL_RANK=R`` makes rank R leave with ``os._exit(3)`` after
``COLLSIM_TEST_KILL_AFTER_ROWS`` (default 1) rows of the sweep.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import socket
import sys
import traceback
import warnings

from sim.errors import CollsimError

from . import bench_report as report
from .backends import notes_for, type_plan
from .launch import OPTIONS_FILE_VAR, STORE_FD_VAR, WRONG
from .launchers import Job, detect
from .options import BenchOptions


def _kill_hook(rank: int):
    target = os.environ.get("COLLSIM_TEST_KILL_RANK")
    after = int(os.environ.get("COLLSIM_TEST_KILL_AFTER_ROWS", "1"))
    done = [0]

    def on_row(_row):
        done[0] += 1
        if target is not None and int(target) == rank and done[0] >= after:
            sys.stdout.flush()
            os._exit(3)
    return on_row


def topology_name(backend: str, world: int, hosts: list[str]) -> str:
    """``local:gloo:2`` on one host; ``cluster:nccl:16:hosts=2`` across hosts."""
    nhosts = len(set(hosts))
    return f"local:{backend}:{world}" if nhosts <= 1 else f"cluster:{backend}:{world}:hosts={nhosts}"


def join(opts: BenchOptions, job: Job):
    """Set this rank's environment, open the store, pass the token check and join the process group.
    Returns the torch device."""
    os.environ.update(job.torch_env())   # one convention for torch, NCCL and real.measure.backends
    os.environ.update(dict(opts.nccl_env))  # before the communicator exists, which is when NCCL reads them
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch")
    if not os.environ.get("COLLSIM_DEBUG"):   # c10d's C++ log prints every retry with a stack: one line says it
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    import torch
    import torch.distributed as dist

    from . import rendezvous
    addr = opts.listen or job.master_addr
    var = "NCCL_SOCKET_IFNAME" if opts.backend == "nccl" else "GLOO_SOCKET_IFNAME"
    if var not in os.environ and (opts.backend == "gloo" or rendezvous.is_loopback(addr)):
        iface = rendezvous.interface_for(addr)   # the backend's own sockets where the rendezvous is, not all
        if iface:
            os.environ[var] = iface
    device = torch.device("cpu")
    if opts.backend == "nccl":   # srun --gpus-per-task=1 leaves each task one visible GPU: that one, cuda:0
        device = torch.device("cuda", 0 if torch.cuda.device_count() == 1 else job.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    fd = os.environ.get(STORE_FD_VAR) if job.launcher == "local" and job.rank == 0 else None
    store = rendezvous.make_store(job, opts.timeout_s, listen=opts.listen, listen_fd=int(fd) if fd else None)
    rendezvous.handshake(store, job.rank, job.world, socket.gethostname(), rendezvous.read_token(opts.token_file))
    dist.init_process_group(opts.backend, rank=job.rank, world_size=job.world, store=store,
                            timeout=datetime.timedelta(seconds=opts.timeout_s),
                            device_id=device if device.type == "cuda" else None)
    return device


def run_rank(opts: BenchOptions, job: Job | None = None, out=None) -> int:
    """Run this rank's part of the sweep (or of ``--pairs``); rank 0 writes the output to ``out`` (stdout)."""
    out = out or sys.stdout
    job = job or detect()
    if job is None:
        raise RuntimeError("run_rank needs a launcher's variables (RANK/WORLD_SIZE, OMPI_*, PMI_*, SLURM_*)")
    rank, world = job.rank, job.world
    device = join(opts, job)
    import torch
    import torch.distributed as dist

    from . import envinfo, harness
    try:
        me = (socket.gethostname(), torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu", os.getpid(),
              job.local_rank, str(device))
        everyone: list = [None] * world
        dist.all_gather_object(everyone, me)
        ranks = [{"rank": r, "host": h, "local_rank": lr, "device": dev, "device_name": d, "pid": pid}
                 for r, (h, d, pid, lr, dev) in enumerate(everyone)]
        hosts = [h for h, *_ in everyone]
        if opts.pairs:
            from .pairs_run import run_pairs
            return run_pairs(opts, job, device, ranks, out)
        calls, steps, notes = None, None, notes_for(opts.backend, opts.collective, opts.impl)
        if opts.impl.startswith("program:"):
            from . import executor
            program = executor.load_program(opts.impl, opts.collective, world, opts.root)
            calls, steps = executor.program_calls(program, opts, rank), executor.num_steps(program)
        from sim.collectives import get_collective
        notes += type_plan(opts, get_collective(opts.collective).reduces)[1]
        topology = topology_name(opts.backend, world, hosts)
        on_row = _kill_hook(rank)
        p2p = harness.p2p_latency(rank, world, device)  # before the sweep: the transport's message latency
        if rank == 0 and opts.fmt == "table":
            lines = [f"Rank {r:3d} Pid {pid:7d} on {h:>12} device {d}" for r, (h, d, pid, _, _) in enumerate(everyone)]
            settings = (f"minBytes {min(opts.sizes)} maxBytes {max(opts.sizes)} step: "
                        + (f"{opts.stepfactor:g}(factor)" if opts.stepfactor > 1 else f"{opts.stepbytes}(bytes)")
                        + f" warmup iters: {opts.warmup} iters: {opts.iters} agg iters: 1 validation: {opts.check}"
                        + (f" repeat: {opts.repeat}" if opts.repeat > 1 else ""))
            title = (f"collsim bench: {opts.collective} on {topology}, impl {opts.impl}, timer {opts.timer}, "
                     f"-a {opts.average}")
            print(report.table_header(title, settings, lines, notes, p2p), file=out, flush=True)
            on_row = _print_then(on_row, out)
        rows = harness.run_sweep(opts, rank, world, device, calls=calls, on_row=on_row, steps=steps)
        if rank != 0:
            return 0
        env = envinfo.collect(world, hosts=hosts, gpus=sorted({d for _, d, *_ in everyone} - {"cpu"}) or [])
        env.update(report.p2p_fields(p2p))
        warning = report.noise_warning(rows)
        if warning and opts.fmt != "table":  # the table says it in its footer; JSON/CSV keep stdout clean
            notes = notes + [f"warning: {warning}"]
            print(f"collsim bench: warning: {warning}", file=sys.stderr)
        doc = report.document(topology, opts.collective, world, opts.backend, opts.impl, opts.timer,
                              opts.to_json(), env, notes, rows)
        doc.update(world_size=world, launcher=job.launcher, ranks=ranks)
        text = {"table": report.table_footer, "json": lambda _: report.to_json(doc),
                "csv": lambda _: report.to_csv(doc).rstrip("\n")}[opts.fmt](rows)
        print(text, file=out, flush=True)
        wrong = sum((r["wrong"] or 0) + (r["inplace_wrong"] or 0) for r in rows)
        if wrong:
            print(f"collsim: error: {wrong} wrong elements in the results (#wrong columns): the collective "
                  "did not compute what it should", file=sys.stderr)
            return WRONG
        return 0
    finally:
        dist.destroy_process_group()


def _print_then(inner, out):
    def on_row(row):
        print(report.table_row(row), file=out, flush=True)
        inner(row)
    return on_row


def _failed(e: BaseException, job: Job | None = None) -> int:
    """One line per rank on stderr (tracebacks with COLLSIM_DEBUG=1); returns the exit status 1."""
    if isinstance(e, SystemExit):  # a program file (--impl program:FILE.py) called exit(): a failure, not success
        print(f"collsim bench: rank {os.environ.get('RANK')}: the program code called exit({e.code!r}) before "
              "the run finished", file=sys.stderr)
        return 1
    if os.environ.get("COLLSIM_DEBUG"):
        traceback.print_exc()
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    hint = ""
    if job is not None and job.launcher != "local" and type(e).__name__.startswith("Dist"):
        # rank 0 waits on the others' answers (collsim/join/answer/N): a timeout there means they never came
        absent = sorted({int(r) for r in re.findall(r"join/answer/(\d{1,7})", str(e))})
        if os.environ.get("RANK") == "0" and absent:
            shown = ", ".join(map(str, absent[:16])) + (f" and {len(absent) - 16} more" if len(absent) > 16 else "")
            first = "timed out waiting for the other ranks"
            hint = (f" (rank(s) {shown} never joined the rendezvous at {job.master_addr}:{job.master_port}: are they "
                    "running, with the same MASTER_ADDR/MASTER_PORT and token, and can they reach this host?)")
        else:
            hint = (f" (the rendezvous at {job.master_addr}:{job.master_port}: is rank 0 running, are MASTER_ADDR/"
                    "MASTER_PORT the same on every rank, does the firewall let it through?)")
    print(f"collsim bench: rank {os.environ.get('RANK')}: {type(e).__name__}: {first[:300]}{hint}", file=sys.stderr)
    return 1


def run_launched(opts: BenchOptions, job: Job) -> int:
    """One rank of a torchrun/mpirun/srun job: :func:`run_rank`, a CollsimError raised as is (one line,
    exit 2), anything else reported in one line (exit 1)."""
    try:
        return run_rank(opts, job)
    except (KeyboardInterrupt, CollsimError):
        raise
    except (Exception, SystemExit) as e:
        return _failed(e, job)


def main() -> int:
    """Entry point of ``python -m real.measure.worker``."""
    with open(os.environ[OPTIONS_FILE_VAR], encoding="utf-8") as f:
        opts = BenchOptions.from_json(json.load(f))
    try:
        return run_rank(opts)
    except KeyboardInterrupt:
        return 130
    except (Exception, SystemExit) as e:  # one line per rank; the launcher adds which rank failed first
        return _failed(e)


if __name__ == "__main__":
    sys.exit(main())
