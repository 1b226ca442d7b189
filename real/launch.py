"""Start N local ranks of ``collsim bench`` and always clean them up; or join a torchrun job.

``--nprocs N`` starts N processes (``python -m real.worker``) on a free loopback port
(``MASTER_ADDR=127.0.0.1``), each in its own session so that one signal reaches a rank and anything it
started. The launcher watches them and stops *all* of them (SIGTERM, then SIGKILL after a grace period)
when they finish, when one fails (a rank that dies leaves the others blocked in a collective), when
``--timeout`` seconds pass, on Ctrl-C and on SIGTERM. Ranks also die with the launcher if it is killed
outright (Linux ``PR_SET_PDEATHSIG``).

Rank 0 writes the results to the launcher's stdout; the other ranks' output goes to stderr.

>>> in_torchrun({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "LOCAL_RANK": "0"})
True
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time

from .options import BenchOptions

WRONG = 4  # real.worker's exit status for "finished, but with wrong elements"
OPTIONS_VAR = "COLLSIM_BENCH_OPTIONS"  # the options travel to the ranks as JSON in this variable
GRACE_S = 3.0  # from SIGTERM to SIGKILL
_POLL_S = 0.05


def in_torchrun(environ=None) -> bool:
    """True inside a torchrun (torch.distributed.run) job: its rank variables are set."""
    environ = os.environ if environ is None else environ
    return all(k in environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK"))


def free_port() -> int:
    """A TCP port free on the loopback interface now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent(parent: int):
    def hook():  # runs in the child between fork and exec
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # not Linux: the launcher's own cleanup still applies
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)
    return hook


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every rank's process group, wait, then SIGKILL whatever is left; reap them all."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + GRACE_S
        while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # a rank's own children, if it left any behind
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt  # same cleanup path as Ctrl-C


def launch_local(opts: BenchOptions) -> int:
    """Run ``opts.nprocs`` local ranks to completion; returns the exit status for ``collsim bench``."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # so ranks import this checkout
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(opts.nprocs),
                "LOCAL_WORLD_SIZE": str(opts.nprocs), OPTIONS_VAR: json.dumps(opts.to_json()),
                "PYTHONUNBUFFERED": "1"})
    env.update(dict(opts.nccl_env))
    try:
        others = sys.stderr.fileno()  # ranks 1.. print nothing useful on stdout: keep ours clean for JSON
    except (AttributeError, OSError, ValueError):  # stderr replaced by an in-memory stream (tests, notebooks)
        others = subprocess.DEVNULL
    procs: list[subprocess.Popen] = []
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        sys.stdout.flush()
        for rank in range(opts.nprocs):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "real.worker"], env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                stdout=None if rank == 0 else others, start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid())))
        return _watch(procs, opts.timeout_s)
    finally:
        _stop(procs)
        signal.signal(signal.SIGTERM, old)


def _watch(procs: list[subprocess.Popen], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed == [(0, WRONG)] and all(c is not None for c in codes):
            return 1  # the run finished; rank 0 has reported the wrong elements
        if failed and failed != [(0, WRONG)]:
            rank, code = failed[0]
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            others = sum(c is None for c in codes)
            print(f"collsim: error: rank {rank} {how} before the run finished; stopped the other {others} running "
                  f"rank(s). Its messages above say why (COLLSIM_DEBUG=1 shows tracebacks).", file=sys.stderr)
            return 1
        if all(c == 0 for c in codes):
            return 0
        if time.monotonic() > deadline:
            print(f"collsim: error: the run did not finish within --timeout {timeout_s:g} s; stopped all "
                  f"{len(procs)} ranks. Give a longer --timeout, or fewer sizes (-b/-e/-f) or iterations (-n).",
                  file=sys.stderr)
            return 1
        time.sleep(_POLL_S)
