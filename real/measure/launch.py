"""Start N local ranks of ``collsim bench`` and always clean them up; or join a torchrun job.

``--nprocs N`` starts N processes (``python -m real.measure.worker``), each in its own session so that one signal
reaches a rank and anything it started. Nothing listens on the network: the launcher binds the
rendezvous socket (rank 0's TCPStore) to 127.0.0.1 itself (or to ``--listen ADDR``) and hands it to
rank 0 (``master_listen_fd``; torch's own store would listen on every interface, unauthenticated), and
gloo/NCCL are told to use the loopback interface (``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME``, unless
you set them). The ranks share a random token (``COLLSIM_TOKEN``, unless you give one) that each must
present before joining (:mod:`real.measure.rendezvous`). The options
travel in a private file (``COLLSIM_BENCH_OPTIONS_FILE``, mode 0600), not in the environment, whose size
the kernel limits. The launcher watches them and stops *all* of them (SIGTERM, then SIGKILL after a grace period)
when they finish, when one fails (a rank that dies leaves the others blocked in a collective), when
``--timeout`` seconds pass (naming any rank found stopped, e.g. by SIGSTOP or Ctrl-Z), on Ctrl-C and on
SIGTERM. Ranks also die with the launcher if it is killed
outright (Linux ``PR_SET_PDEATHSIG``).

Rank 0 writes the results to the launcher's stdout; the other ranks' output goes to stderr.

>>> in_torchrun({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "LOCAL_RANK": "0"})
True
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .launchers import TORCHRUN_VARS, detect
from .options import BenchOptions

WRONG = 4  # real.measure.worker's exit status for "finished, but with wrong elements"
OPTIONS_FILE_VAR = "COLLSIM_BENCH_OPTIONS_FILE"  # path of the JSON options file each rank reads
STORE_FD_VAR = "COLLSIM_STORE_FD"  # rank 0 only: the launcher's loopback listening socket for the TCPStore
GRACE_S = 3.0  # from SIGTERM to SIGKILL
MAX_LOCAL_RANKS = 1024  # local processes one `collsim bench --nprocs` may start
_POLL_S = 0.05


def in_torchrun(environ=None) -> bool:
    """True inside a torchrun (torch.distributed.run) job: its rank variables are set."""
    environ = os.environ if environ is None else environ
    return all(k in environ for k in TORCHRUN_VARS)


def check_torchrun_env(environ=None) -> None:
    """Refuse stale or partial launcher variables (``RANK=5 WORLD_SIZE=2`` left in a shell) clearly,
    instead of a rank joining a job that does not exist (:func:`real.measure.launchers.detect`)."""
    detect(environ)


def loopback_listener() -> socket.socket:
    """A TCP socket listening on 127.0.0.1 at a port the OS picks: the rendezvous of a local run."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s


def loopback_interface() -> str | None:
    """Name of the loopback interface (``lo`` on Linux, ``lo0`` on macOS), or None if none is found."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in names if n == "lo"), next((n for n in names if n.startswith("lo")), None))


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


def _is_stopped(pid: int) -> bool:
    """True if process ``pid`` is stopped by a signal (state T in /proc; False where /proc is absent)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] in ("T", "t")


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt  # same cleanup path as Ctrl-C


def launch_local(opts: BenchOptions) -> int:
    """Run ``opts.nprocs`` local ranks to completion; returns the exit status for ``collsim bench``."""
    if opts.nprocs > MAX_LOCAL_RANKS:
        from sim.errors import CollsimError
        raise CollsimError(f"--nprocs {opts.nprocs} is over {MAX_LOCAL_RANKS} local ranks: each is a Python process "
                           "with torch loaded (~300 MB); run across hosts with torchrun for larger jobs")
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # so ranks import this checkout
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    private = tempfile.mkdtemp(prefix="collsim-bench-")  # mode 0700: only this user reads the options
    options_file = os.path.join(private, "options.json")
    with open(os.open(options_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump(opts.to_json(), f)
    from . import rendezvous
    listener = rendezvous.listener(opts.listen, 0, spans_hosts=False) if opts.listen else loopback_listener()
    if not opts.token_file and not env.get(rendezvous.TOKEN_VAR):
        env[rendezvous.TOKEN_VAR] = rendezvous.new_token()   # so no other local user's process can join
    env.update({"MASTER_ADDR": opts.listen or "127.0.0.1", "MASTER_PORT": str(listener.getsockname()[1]),
                "WORLD_SIZE": str(opts.nprocs), "LOCAL_WORLD_SIZE": str(opts.nprocs), OPTIONS_FILE_VAR: options_file,
                "COLLSIM_LOCAL_RUN": "1", "PYTHONUNBUFFERED": "1"})
    lo = loopback_interface()
    if lo and not opts.listen:  # the backend's own sockets on loopback too; the user's own choice (e.g. a NIC for a test) wins
        env.setdefault("NCCL_SOCKET_IFNAME" if opts.backend == "nccl" else "GLOO_SOCKET_IFNAME", lo)
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
            extra = {STORE_FD_VAR: str(listener.fileno())} if rank == 0 else {}
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "real.measure.worker"], env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank), **extra},
                stdout=None if rank == 0 else others, start_new_session=True,
                pass_fds=(listener.fileno(),) if rank == 0 else (), preexec_fn=_die_with_parent(os.getpid())))
            if rank == 0:
                listener.close()  # rank 0 holds it now
        return _watch(procs, opts.timeout_s)
    finally:
        listener.close()
        _stop(procs)
        shutil.rmtree(private, ignore_errors=True)
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
            stopped = [r for r, p in enumerate(procs) if _is_stopped(p.pid)]
            why = (f" Rank(s) {', '.join(map(str, stopped))} (pid {', '.join(str(procs[r].pid) for r in stopped)}) "
                   "were stopped (SIGSTOP or Ctrl-Z), so the others waited for them." if stopped else "")
            print(f"collsim: error: the run did not finish within --timeout {timeout_s:g} s; stopped all "
                  f"{len(procs)} ranks.{why} Give a longer --timeout, or fewer sizes (-b/-e/-f) or iterations (-n).",
                  file=sys.stderr)
            return 1
        time.sleep(_POLL_S)
