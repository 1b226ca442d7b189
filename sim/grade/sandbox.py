"""Run a student's code in a sandboxed process and talk to it; kill everything it started afterwards.

Three processes per submission::

    checker (collsim grade) --pipes-- student (python -m sim.grade.student)
        `-- supervisor (python -m sim.grade.sandbox) --parent of--'

* The **checker** runs the checks; it never runs student code and trusts nothing the student's process
  sends: replies are JSON lines, bounded in size, re-validated by :mod:`sim.grade.wire`.
* The **supervisor** is ours and starts before any student code exists. It makes itself a *child
  subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the student starts stays its
  descendant even after ``setsid()`` or a double fork, and asks to be told (``PR_SET_PDEATHSIG``) if
  the checker dies. When the student process ends, or the checker sends SIGTERM (time is up, checks
  done), it SIGKILLs every descendant, reaps them, and exits.
* The **student** process runs in its own session and process group, in a fresh empty folder, with
  limits (:class:`Limits`): CPU seconds, address space, size of any file it writes (its stdout/stderr
  go to one capped file; SIGXFSZ is ignored so a flood gets ``OSError: File too large``), open files,
  and processes (``RLIMIT_NPROC``; the kernel does not apply it to root: grade as an unprivileged user).

Where bubblewrap works (:mod:`sim.io.containment`, bounded by :mod:`sim.grade.jail`), the supervisor starts
the student's process inside it: a new PID, user (uid 65534), network, IPC and UTS namespace, a read-only
filesystem of Python and ``sim`` only, a private 256 MB tmpfs at ``/tmp`` and a 16 MB one at ``/dev/shm``
(every other place read-only), no nested user namespaces, no System V IPC or memfd; so it cannot signal
the supervisor or the checker, read the solutions or other submissions, use the network, leave a process
behind, or hold memory its limits do not count, and ``RLIMIT_NPROC`` applies (it is counted in its own
user namespace). Elsewhere it runs as the grading user with the limits above, and a one-line notice says
what is not contained (docs/teaching.md).

The same machinery runs ``collsim verify FILE.py`` (:mod:`sim.grade.user_file`): ``module`` names the
student-side program, ``output`` where its prints go.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
MAX_REPLY_BYTES = 64 << 20


@dataclass(frozen=True)
class Limits:
    """Resource limits of the student's process (and everything it starts)."""
    wall_s: float = 120.0           # total time the student's code may take, cells and calls together
    memory_mb: int = 4096           # address space (RLIMIT_AS)
    output_mb: int = 16             # any one file written, its stdout/stderr included (RLIMIT_FSIZE)
    processes: int = 64             # processes (RLIMIT_NPROC: in the sandbox's user namespace; without
                                    # bubblewrap, more than the grading user runs, and not for root)
    open_files: int = 256


def _prctl(option: int, arg: int) -> bool:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):   # not Linux: the process-group kill is what is left
        return False


def _user_processes() -> int:
    uid, count = os.getuid(), 0
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                count += 1
        except OSError:
            pass
    return count


def _apply_limits(limits: dict, nproc: int | None) -> None:
    """In the student's process before it starts (preexec): the rlimits and SIGXFSZ ignored."""
    import resource
    cpu = int(limits["wall_s"]) + 2
    settings = [(resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, limits["memory_mb"] << 20),
                (resource.RLIMIT_FSIZE, limits["output_mb"] << 20), (resource.RLIMIT_NOFILE, limits["open_files"]),
                (resource.RLIMIT_CORE, 0)]
    if nproc is not None:
        settings.append((resource.RLIMIT_NPROC, nproc))
    for what, value in settings:
        try:
            soft, hard = resource.getrlimit(what)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(what, (value, value))
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def kill_descendants(student_pid: int | None = None, rounds: int = 200) -> int:
    """SIGKILL and reap every descendant of this process (the supervisor); returns how many were killed."""
    killed = 0
    if student_pid:
        try:
            os.killpg(student_pid, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(rounds):
        pids = _descendants(os.getpid()) if os.path.isdir("/proc") else []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        while True:   # reap: the subreaper inherits every orphan
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = -1
            if pid <= 0:
                break
        if not pids:
            break
        time.sleep(0.01)
    return killed


def supervise(cfg: dict) -> int:
    """The supervisor: start the student's process, wait, then kill all it left behind. Returns the student's
    exit status (128 + the signal where a signal ended it), or 0 when the checker stopped it."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    state = {"cleaning": False}

    def on_term(*_):
        if not state["cleaning"]:   # never interrupt the clean-up itself
            raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    if os.getppid() != cfg["checker_pid"]:   # the checker died before we could ask to be told
        return 1
    limits = cfg["limits"]
    module = cfg.get("module", "sim.grade.student")
    seccomp = None
    if cfg.get("contain"):   # bwrap: a new user namespace counts processes afresh, root outside or not
        from ..io.containment import CONFIG_MOUNT
        from .jail import command, seccomp_fd
        force = cfg.get("jail") or {}
        seccomp = seccomp_fd() if force.get("seccomp") else None
        cmd = command(["-m", module, CONFIG_MOUNT], cfg["student_config"], cfg.get("hidden", []),
                      share=cfg.get("share"), seccomp=seccomp, force=force)
        nproc = limits["processes"]
    else:
        cmd = [sys.executable, "-m", module, cfg["student_config"]]
        nproc = None if os.getuid() == 0 else _user_processes() + limits["processes"]
    proc, status = None, 0
    try:
        proc = subprocess.Popen(cmd, cwd=cfg["workdir"],
                                env=cfg["env"], stdin=subprocess.DEVNULL, stdout=sys.stdout, stderr=sys.stdout,
                                pass_fds=(cfg["request_fd"], cfg["reply_fd"], *([seccomp] if seccomp is not None else [])),
                                start_new_session=True, preexec_fn=lambda: _apply_limits(limits, nproc))
        os.close(cfg["request_fd"])
        os.close(cfg["reply_fd"])
        rc = proc.wait()
        status = rc if rc >= 0 else 128 - rc
    except KeyboardInterrupt:
        pass
    finally:
        state["cleaning"] = True
        if seccomp is not None:
            os.close(seccomp)
        kill_descendants(proc.pid if proc else None)
    return status


class StudentGone(Exception):
    """The student's process stopped answering: time is up (``timed_out``), or it exited or crashed.
    ``status``: its exit status where :class:`Session` knows it (after it closed), else None."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out
        self.status: int | None = None


class Session:
    """The checker's handle on one sandboxed student process (use as a context manager)."""

    def __init__(self, cells: list[tuple[str, str]], tmpdir: str, limits: Limits = Limits(), hidden: tuple[str, ...] = (),
                 module: str = "sim.grade.student", output: int | None = None, what: str = "the student's code"):
        """``module``: the student-side program (``python -m MODULE CONFIG``); ``output``: a file descriptor
        its prints go to (default: a file in ``tmpdir``, :attr:`output_file`); ``what``: the code, as the
        one-line notice names it where it is not contained."""
        self.limits, self.remaining_s = limits, limits.wall_s   # spent only while the student's code runs
        self.output_file = os.path.join(tmpdir, "output.txt")
        workdir = os.path.join(tmpdir, "work")
        os.makedirs(workdir)
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        # the grader's own import path (a user site-packages under the real HOME included), this sim first
        path = [root] + [p for p in sys.path if p and p != root and os.path.isdir(p)]
        env.update(PYTHONPATH=os.pathsep.join(path), MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", HOME=workdir, TMPDIR=workdir,
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
        student_config = os.path.join(tmpdir, "student.json")
        with open(student_config, "w") as f:
            json.dump({"cells": cells, "request_fd": req_r, "reply_fd": rep_w}, f)
        from ..io.containment import not_contained_notice
        from .jail import available, in_force, weaker_notice
        self.contained = available()
        # files the checks hand the student's code to read (a5's dumps): read-only inside the sandbox
        self.share_dir = os.path.join(tmpdir, "share")
        os.makedirs(self.share_dir)
        os.chmod(self.share_dir, 0o755)
        if not self.contained:
            not_contained_notice(what)
        weaker_notice()
        cfg = {"limits": asdict(limits), "workdir": workdir, "env": env, "student_config": student_config, "module": module,
               "request_fd": req_r, "reply_fd": rep_w, "checker_pid": os.getpid(), "contain": self.contained, "share": self.share_dir,
               "jail": in_force(),
               "hidden": [os.path.abspath(h) for h in hidden]}
        config_file = os.path.join(tmpdir, "supervisor.json")
        with open(config_file, "w") as f:
            json.dump(cfg, f)
        with open(self.output_file, "wb") as out:
            sink = out.fileno() if output is None else output
            self.supervisor = subprocess.Popen([sys.executable, "-m", "sim.grade.sandbox", config_file], cwd=workdir,
                                               env=dict(env, HOME=os.environ.get("HOME", workdir)),
                                               stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                                               pass_fds=(req_r, rep_w))
        os.close(req_r)
        os.close(rep_w)
        self._buffer, self._stopped, self._ended = b"", False, False
        self._cache: dict[str, dict] = {}
        try:
            self.ready = self._read()   # the cells have run: {"ready", "notes", "names"}
        except StudentGone as e:
            self.close()
            e.status = self.status
            raise
        self.names = self.ready.get("names") if isinstance(self.ready.get("names"), dict) else {}
        self.notes = [str(n)[:2000] for n in self.ready.get("notes", [])][:200] if isinstance(self.ready.get("notes"), list) else []

    def seen_as(self, path: str) -> str:
        """Where the student's process sees ``path`` (a file or folder under :attr:`share_dir`)."""
        if not self.contained:
            return path
        from ..io.containment import SHARE_MOUNT
        return os.path.join(SHARE_MOUNT, os.path.relpath(path, self.share_dir))

    def _read(self) -> dict:
        started = time.monotonic()
        try:
            return self._read_line(started + self.remaining_s)
        finally:
            self.remaining_s -= time.monotonic() - started

    def _read_line(self, deadline: float) -> dict:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StudentGone(f"your code ran for more than {self.limits.wall_s:.0f} s and was stopped: look for an "
                                  "endless loop, or a size far larger than the assignment asks for", timed_out=True)
            ready, _, _ = select.select([self._rep_r], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._rep_r, 1 << 20)
            if not chunk:
                self._ended = True
                raise StudentGone("your code's process ended before the grader was done (it called os._exit, crashed, "
                                  f"or went over a limit: {self.limits.memory_mb} MB of memory, "
                                  f"{self.limits.wall_s:.0f} s of CPU)")
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise StudentGone(f"your code's process sent more than {MAX_REPLY_BYTES >> 20} MB in one answer")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            raise StudentGone("your code's process sent the grader something that is not an answer "
                              "(did it write to the grader's pipe?)") from None
        if not isinstance(reply, dict):
            raise StudentGone("your code's process sent the grader a malformed answer")
        return reply

    def _request(self, request: dict) -> dict:
        try:
            os.write(self._req_w, json.dumps(request).encode() + b"\n")
        except OSError:
            raise StudentGone("your code's process ended before the grader was done") from None
        return self._read()

    def call(self, name: str, args: tuple = (), forbid=()) -> dict:
        key = json.dumps([name, list(args), list(forbid)])
        if key not in self._cache:   # checks ask for the same Program again; the student's code runs once
            self._cache[key] = self._request({"call": name, "args": list(args), "forbid": list(forbid)})
        return self._cache[key]

    def get(self, name: str) -> dict:
        return self._request({"get": name})

    @property
    def status(self) -> int | None:
        """The student's process's exit status (128 + signal), once :meth:`close` has run; None before, or
        when the checker stopped it (time up)."""
        rc = self.supervisor.returncode
        return None if rc is None or self._stopped else rc

    def close(self) -> None:
        """End the student's process and everything it started (the supervisor does the killing)."""
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            # it usually exits as soon as its pipe closes; where the student's process has ended, it is only
            # cleaning up: wait longer, so its exit status (the student's) is not lost to a SIGTERM
            self.supervisor.wait(timeout=5 if self._ended else 0.5)
        except subprocess.TimeoutExpired:
            self._stopped = True
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.supervisor.kill()
                self.supervisor.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sys.exit(supervise(json.load(f)))


__all__ = ["Limits", "Session", "StudentGone", "kill_descendants"]
