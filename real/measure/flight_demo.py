"""A small real gloo job with one faulty rank, dumped by PyTorch's own flight recorder.

Every rank runs ``all_reduce`` three times on 1024 floats; the last rank gets one fault at the second
call: ``skip`` (it does not call it), ``size`` (512 elements), ``dtype`` (float64) or ``type`` (it calls
``broadcast``). Ranks give up after ``timeout_s`` (gloo's timeout), then each writes the dump that
``torch._C._distributed_c10d._dump_fr_trace`` (pickle) or ``_dump_fr_trace_json`` returns to
``DIR/rank_<r>`` (``.json`` for JSON). torch 2.13 records gloo collectives by default (the buffer,
``TORCH_FR_BUFFER_SIZE``, defaults to 2000 entries). A ``DIR`` already holding dumps is refused before any
rank starts (:func:`sim.flight.records.check_dump_dir`), and so are more ranks than the machine sensibly
runs (:func:`nprocs_limit`).

>>> info = run_demo("/tmp/fr-demo", nprocs=3, fault="skip")   # doctest: +SKIP
>>> info["injected"]                                           # doctest: +SKIP
'rank 2 skips the 2nd all_reduce'
"""
from __future__ import annotations

import datetime
import multiprocessing
import os
import socket

FAULTS = ("skip", "size", "dtype", "type")
# Each rank is a process that imports torch (~2 s of CPU and a few hundred MB each): 8 ranks on 2 cores
# took 6 s; 500 ranks printed nothing in 100 s. A fault shows with 3 ranks.
PROCS_PER_CPU = 4
MAX_NPROCS = 64


def usable_cpus() -> int:
    """CPU cores this process may run on (a container's or taskset's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def nprocs_limit() -> int:
    """The most ranks the demo starts here: :data:`PROCS_PER_CPU` per usable core, at most
    :data:`MAX_NPROCS`, and never fewer than the 3 that name a culprit."""
    return max(3, min(MAX_NPROCS, PROCS_PER_CPU * usable_cpus()))


def check_nprocs(nprocs: int) -> None:
    """Refuse a rank count the demo cannot use (under 2) or this machine cannot sensibly run (see
    :func:`nprocs_limit`), before any process starts."""
    from sim.errors import CollsimError

    if nprocs < 2:
        raise CollsimError(f"--nprocs {nprocs}: a collective fault needs at least 2 ranks (3 to name a culprit)")
    limit = nprocs_limit()
    if nprocs > limit:
        raise CollsimError(f"--nprocs {nprocs}: over this machine's limit of {limit} ranks ({PROCS_PER_CPU} per usable "
                           f"CPU core, {usable_cpus()} here, at most {MAX_NPROCS}), as each rank is a process that "
                           f"imports torch: use --nprocs {limit} or fewer (3 names a culprit)")


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _worker(rank: int, world: int, directory: str, port: int, fault: str, timeout_s: float, form: str) -> None:
    import torch
    import torch.distributed as dist

    from sim.io.safe_io import write_output

    from .launch import loopback_interface
    if loopback_interface():
        os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())
    # the rendezvous listens on loopback only (torch's own store would listen on every interface)
    listener = None
    if rank == 0:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, datetime.timedelta(seconds=timeout_s),
                          wait_for_workers=False, master_listen_fd=listener.fileno() if listener else None)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    x = torch.ones(1024)
    faulty = rank == world - 1
    try:
        dist.all_reduce(x)
        if not faulty:
            dist.all_reduce(x)
        elif fault == "size":
            dist.all_reduce(torch.ones(512))
        elif fault == "dtype":
            dist.all_reduce(torch.ones(1024, dtype=torch.float64))
        elif fault == "type":
            dist.broadcast(x, src=0)
        dist.all_reduce(x)
    except Exception:  # the fault makes some rank fail or time out: that is the point; dump anyway
        pass
    c10d = torch._C._distributed_c10d
    name = os.path.join(directory, f"rank_{rank}")
    if form == "json":
        write_output(name + ".json", c10d._dump_fr_trace_json(True, False), "--dump")
    else:
        write_output(name, c10d._dump_fr_trace(True, False, False), "--dump")
    os._exit(0)  # skip process-group teardown: a desynchronised group can block in it


def run_demo(directory: str, nprocs: int = 3, fault: str = "skip", timeout_s: float = 5.0,
             form: str = "pickle") -> dict:
    """Run the job (``nprocs`` processes on this machine), write the dumps to ``directory``.

    Returns ``{"injected", "faulty_rank", "exitcodes", "files"}``. Takes about ``timeout_s`` plus a few
    seconds of start-up."""
    from sim.errors import CollsimError
    from sim.flight.records import check_dump_dir

    if fault not in FAULTS:
        raise CollsimError(f"unknown fault {fault!r}: use one of {', '.join(FAULTS)}")
    check_nprocs(nprocs)
    if form not in ("pickle", "json"):
        raise CollsimError(f"form {form!r}: use pickle or json")
    # before any rank starts: the ranks write rank_<r> straight into the folder, over a real incident's dumps
    check_dump_dir(directory, keep_simulated=False)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise CollsimError(f"--dump {directory}: cannot create it ({e.strerror}): pick a writable path") from None
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per rank, as torchrun gives
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, nprocs, directory, port, fault, timeout_s, form))
             for r in range(nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=timeout_s * 4 + 60)
    for p in procs:
        if p.is_alive():  # only our own children, by handle
            p.kill()
            p.join()
    what = {"skip": "skips", "size": "passes 512 elements to", "dtype": "passes float64 to",
            "type": "calls broadcast instead of"}[fault]
    return {"injected": f"rank {nprocs - 1} {what} the 2nd all_reduce", "faulty_rank": nprocs - 1,
            "exitcodes": [p.exitcode for p in procs], "files": sorted(os.listdir(directory))}
