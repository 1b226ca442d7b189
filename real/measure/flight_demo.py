"""A small real gloo job with one faulty rank, dumped by PyTorch's own flight recorder.

Every rank runs ``all_reduce`` three times on 1024 floats; the last rank gets one fault at the second
call: ``skip`` (it does not call it), ``size`` (512 elements), ``dtype`` (float64) or ``type`` (it calls
``broadcast``). Ranks give up after ``timeout_s`` (gloo's timeout), then each writes the dump that
``torch._C._distributed_c10d._dump_fr_trace`` (pickle) or ``_dump_fr_trace_json`` returns to
``DIR/rank_<r>`` (``.json`` for JSON). torch 2.13 records gloo collectives by default (the buffer,
``TORCH_FR_BUFFER_SIZE``, defaults to 2000 entries).

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

    if fault not in FAULTS:
        raise CollsimError(f"unknown fault {fault!r}: use one of {', '.join(FAULTS)}")
    if nprocs < 2:
        raise CollsimError(f"--nprocs {nprocs}: a collective fault needs at least 2 ranks (3 to name a culprit)")
    if form not in ("pickle", "json"):
        raise CollsimError(f"form {form!r}: use pickle or json")
    os.makedirs(directory, exist_ok=True)
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
