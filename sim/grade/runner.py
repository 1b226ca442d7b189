"""Run a student's code in a fresh Python process, with a time limit, and grade it there.

The parent (:func:`grade`) reads the submission, writes its code cells to a temporary JSON file and
starts ``python -m sim.grade ASSIGNMENT CELLS.json REPORT.json PATH`` in the submission's folder.
The child executes the cells one by one in a fresh namespace (a cell that raises is reported and the
next cells still run, like "Run All" that keeps going), runs the assignment's checks on what the cells
defined, and writes a :class:`~sim.grade.checks.GradeReport` as JSON. Executing the code is the point:
it is the student's own; the subprocess and the timeout keep a hang or a crash from taking the grader
with it.

>>> sorted(ASSIGNMENTS)
['a1', 'a2', 'a3']
"""
from __future__ import annotations

import builtins
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from ..errors import CollsimError
from .checks import Check, GradeReport, student_error
from .source import detect_assignment, read_submission

ASSIGNMENTS = {
    "a1": "sim.grade.a1_ring_reduce_scatter",
    "a2": "sim.grade.a2_torus_all_reduce",
    "a3": "sim.grade.a3_ring_tree_sharp",
}
DEFAULT_TIMEOUT_S = 120.0
OUTPUT_TAIL = 4000


def assignment_module(key: str):
    if key not in ASSIGNMENTS:
        raise CollsimError(f"unknown assignment {key!r}: choose one of {', '.join(ASSIGNMENTS)}")
    return importlib.import_module(ASSIGNMENTS[key])


def grade(path: str, assignment: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> GradeReport:
    """Grade ``path`` (.ipynb or .py) for ``assignment`` (default: detected from the file)."""
    cells, meta = read_submission(path)
    key = assignment or detect_assignment(path, cells, meta, ASSIGNMENTS)
    mod = assignment_module(key)
    if not cells:
        raise CollsimError(f"{path} has no code to grade")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="collsim-grade-") as tmp:
        cells_file, report_file = os.path.join(tmp, "cells.json"), os.path.join(tmp, "report.json")
        with open(cells_file, "w") as f:
            json.dump([[c.label, c.code] for c in cells], f)
        env = dict(os.environ, MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
        # the child must import this same sim, wherever the grader is run from
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "sim.grade", key, cells_file, report_file, os.path.abspath(path)]
        out_file, err_file = os.path.join(tmp, "stdout.txt"), os.path.join(tmp, "stderr.txt")
        # Output goes to files, not pipes: a background process the student started would hold a pipe
        # open and make the grader wait for it. Its own session lets us kill the whole process group,
        # grandchildren included (subprocess's timeout kills only the direct child).
        with open(out_file, "wb") as out_f, open(err_file, "wb") as err_f:
            proc = subprocess.Popen(cmd, cwd=os.path.dirname(os.path.abspath(path)), env=env, stdout=out_f,
                                    stderr=err_f, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                timed_out = False
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
        seconds = time.monotonic() - start
        output = _tail(out_file)
        if timed_out:
            return GradeReport(key, mod.TITLE, path, (), f"your code ran for more than {timeout_s:.0f} s and was stopped: "
                               "look for an endless loop, or a size far larger than the assignment asks for",
                               output=output, seconds=seconds)
        stderr = _tail(err_file)
        if not os.path.exists(report_file):
            tail = stderr.strip().splitlines()[-3:]
            return GradeReport(key, mod.TITLE, path, (), f"the grading process stopped (exit {proc.returncode}) before "
                               f"it could report: {' | '.join(tail) or 'no message'}", output=output, seconds=seconds)
        with open(report_file) as f:
            report = GradeReport.from_json(f.read())
    return GradeReport(report.assignment, report.title, path, report.checks, report.error, report.warnings, output,
                       seconds, report.extra)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (it and anything it started), then reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is already gone
        pass
    proc.wait()


def _tail(file: str) -> str:
    """The last OUTPUT_TAIL characters written to ``file`` (decoded leniently: student output is arbitrary)."""
    with open(file, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 4 * OUTPUT_TAIL))
        return f.read().decode(errors="replace")[-OUTPUT_TAIL:]


def execute_cells(cells: list[tuple[str, str]]) -> tuple[dict, list[str]]:
    """Run code cells in order in a fresh namespace; returns (namespace, notes about cells that failed)."""
    ns: dict = {"__name__": "__student__", "__builtins__": builtins, "display": lambda *a, **k: None}
    notes = []
    for label, code in cells:
        try:
            compiled = compile(code, f"<student {label}>", "exec")
        except SyntaxError as e:
            notes.append(f"{label} has a syntax error at line {e.lineno}: {e.msg}; it was skipped")
            continue
        try:
            exec(compiled, ns)  # the student's own code, run on purpose in this throwaway process
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # SystemExit too: a cell calling exit() must not end the grading
            notes.append(f"{label} raised {student_error(e)}; the cells after it still ran")
    return ns, notes


def child_main(argv: list[str]) -> int:
    """The child process: ``python -m sim.grade ASSIGNMENT CELLS.json REPORT.json PATH``."""
    key, cells_file, report_file, path = argv
    mod = assignment_module(key)
    with open(cells_file) as f:
        cells = [tuple(c) for c in json.load(f)]
    ns, notes = execute_cells(cells)
    try:
        checks = tuple(mod.check(ns))
        error = None
    except Exception as e:  # a grader bug must still produce a report
        checks, error = (), f"the grader itself failed ({type(e).__name__}: {e}); please report this"
    report = GradeReport(key, mod.TITLE, path, checks, error, tuple(notes))
    with open(report_file, "w") as f:
        f.write(report.to_json())
    return 0


__all__ = ["grade", "ASSIGNMENTS", "assignment_module", "execute_cells", "Check"]
