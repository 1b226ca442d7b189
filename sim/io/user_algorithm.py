"""Verify a user's algorithm file in a child process, with a time limit.

``collsim verify my_algo.py`` runs the file under bubblewrap where it is available
(:mod:`sim.io.containment`: own PID, user and network namespaces, read-only Python and ``sim``, only
this one file mounted, so it cannot import modules beside it); elsewhere it runs as you, with a one-line
notice. What this module adds besides is containment of mistakes: the file is imported and its
``build(collective, nranks)`` called in a separate Python process (``python -m
sim.io.user_algorithm FILE ...``), so an ``exit()``, a crash or an endless loop ends as a reported
failure of that program instead of a silent "ok" or a hang. The parent stops the child's whole process
group when ``--timeout`` seconds pass.

The child reports one JSON line per program on its original stdout (the user's own prints go to
stderr): ``{"collective", "nranks", "ok", "message"}``, and ``{"done": true}`` at the end; a program
the parent never hears about failed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

from ..collectives import COLLECTIVES
from ..errors import CollsimError


def load_user_builder(path: str):
    """Import a user's algorithm file (their own code, run on purpose) and return (build, collectives)."""
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give a built-in algorithm name or a .py file")
    spec = importlib.util.spec_from_file_location("collsim_user_algorithm", path)
    if spec is None or spec.loader is None:
        raise CollsimError(f"{path} is not a Python file Python can import: give a .py file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the student's code: report its error in one line
        raise CollsimError(f"{path} failed to import: {type(e).__name__}: {e}") from None
    build = getattr(module, "build", None)
    if not callable(build):
        raise CollsimError(f"{path} defines no function build(collective, nranks) returning a sim.Program")
    return build, list(getattr(module, "COLLECTIVES", COLLECTIVES))


def program_mismatch(program, collective: str, nranks: int) -> str | None:
    """Why ``program`` is not an answer to "build ``collective`` on ``nranks`` ranks" (None when it is)."""
    from ..program import Program
    if not isinstance(program, Program):
        return f"build() returned {type(program).__name__}, not a sim.Program"
    if program.collective.name != collective:
        return f"build({collective!r}, {nranks}) returned a {program.collective.name} program, not {collective}"
    if program.nranks != nranks:
        return f"build({collective!r}, {nranks}) returned a program for {program.nranks} ranks, not {nranks}"
    return None


def _child(path: str, jobs: list[tuple[str, int]], shown: str | None = None) -> int:
    """In the child: import ``path``, build and verify each job, report JSON lines on the real stdout
    (``shown``: the file's name as the user gave it, for messages, where ``path`` is where it is mounted)."""
    report = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the user's prints go to stderr, so they cannot forge a report line by accident
    sys.stdout = sys.stderr

    def say(**kw):
        report.write(json.dumps(kw) + "\n")

    from ..verify import verify
    try:
        build, supported = load_user_builder(path)
    except CollsimError as e:
        say(fatal=str(e).replace(path, shown or path))
        return 0
    say(supported=list(supported))
    for collective, n in jobs:
        if collective not in supported:
            continue
        say(start=[collective, n])
        try:
            program = build(collective, n)
            why = program_mismatch(program, collective, n)
            if why:
                raise CollsimError(why)
            verify(program)
            say(collective=collective, nranks=n, ok=True, message="")
        except CollsimError as e:
            say(collective=collective, nranks=n, ok=False, message=str(e))
        except Exception as e:  # the user's build() may raise anything: one line
            say(collective=collective, nranks=n, ok=False, message=f"build raised {type(e).__name__}: {e}")
    say(done=True)
    report.flush()
    return 0


def run_user_file(path: str, jobs: list[tuple[str, int]], timeout_s: float) -> tuple[list[dict], str | None]:
    """Run the child for ``jobs``; returns (per-program results, a failure of the whole run or None)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # the child imports what this process would (its sys.path), so the file behaves as it would in-process
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([root, *(p for p in sys.path if p)]))
    from .containment import USER_FILE_MOUNT, available, not_contained_notice, wrap
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give a built-in algorithm name or a .py file")
    if available():
        cmd = wrap(["-m", "sim.io.user_algorithm", USER_FILE_MOUNT, json.dumps(jobs), path], os.path.abspath(path),
                   [os.path.dirname(os.path.abspath(path))], mount=USER_FILE_MOUNT)
    else:
        not_contained_notice(f"{path}")
        cmd = [sys.executable, "-m", "sim.io.user_algorithm", path, json.dumps(jobs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True, text=True)
    timed_out, out = False, ""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:  # what it reported before the limit (a grandchild holding the pipe cannot keep us here)
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out = ""
    finally:
        _kill_group(proc)
    lines = []
    for line in (out or "").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    results = [d for d in lines if "ok" in d]
    fatal = next((d["fatal"] for d in lines if "fatal" in d), None)
    if fatal:  # the file does not import, or defines no build(): bad input, one line
        raise CollsimError(fatal)
    started = [d["start"] for d in lines if "start" in d]
    if timed_out:
        where = f" (in build{tuple(started[-1])})" if started else " (while importing the file)"
        return results, f"{path} did not finish within --timeout {timeout_s:g} s{where}: an endless loop? Give a longer --timeout if it is just slow"
    if not any(d.get("done") for d in lines):
        where = f"in build{tuple(started[-1])}" if started else "while importing the file"
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with status {proc.returncode}"
        return results, f"{path} {how} {where}, before every program was verified: a program that exits verifies nothing"
    return results, None


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop the child and anything it started in its session; reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # also the leftovers of a child that has exited
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 5
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], [tuple(j) for j in json.loads(sys.argv[2])], sys.argv[3] if len(sys.argv) > 3 else None))
