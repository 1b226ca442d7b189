"""Helpers for the real/ tests: run ``collsim bench`` as a user would, find processes it left behind,
and run a function on N local gloo ranks."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid

TOKEN_VAR = "COLLSIM_TEST_TOKEN"


def new_env(**extra) -> dict:
    """A copy of os.environ with a unique token that every process started from it inherits."""
    env = dict(os.environ)
    env[TOKEN_VAR] = uuid.uuid4().hex
    env.update({k: str(v) for k, v in extra.items()})
    return env


def bench_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "sim", "bench", *[str(a) for a in args]]


def run_bench(*args, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``collsim bench ARGS`` in a subprocess; returns the finished process (stdout/stderr as text)."""
    return subprocess.run(bench_cmd(*args), env=env or new_env(), capture_output=True, text=True, timeout=timeout)


def processes_with(token: str) -> list[int]:
    """PIDs of live processes (not zombies) whose environment carries ``token`` (found through /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in environ and state != "Z":
            found.append(int(name))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, fn, nprocs, port, queue, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(nprocs))
    import torch.distributed as dist
    dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    try:
        queue.put((rank, fn(rank, nprocs, *args)))
    finally:
        dist.destroy_process_group()


def spawn_gloo(fn, nprocs: int, *args) -> list:
    """Run ``fn(rank, nprocs, *args)`` on ``nprocs`` gloo ranks; returns the results in rank order.
    ``fn`` must be importable (a module-level function)."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_entry, args=(fn, nprocs, free_port(), queue, args), nprocs=nprocs, start_method="spawn")
    results = dict(queue.get() for _ in range(nprocs))
    return [results[r] for r in range(nprocs)]
