"""Grade one submission: its code runs sandboxed (:mod:`sim.grade.sandbox`), the checks run here.

:func:`grade` reads the submission (:mod:`sim.grade.source`), starts the student's process with the code
cells, and runs the assignment's ``check(student)`` in this process: every check asks the student's
process to call a function and gets back plain data (:mod:`sim.grade.wire`), which it rebuilds and
re-verifies itself. So a submission that patches ``sim.verify`` or a check function patches its own
process only, and one that writes a report file writes it into its own empty folder.

>>> sorted(ASSIGNMENTS)
['a1', 'a2', 'a3', 'a4', 'a5']
"""
from __future__ import annotations

import importlib
import os
import tempfile
import time

from ..errors import CollsimError
from .checks import Check, GradeReport
from .sandbox import Limits, Session, StudentGone
from .source import detect_assignment, read_submission
from .student import execute_cells

ASSIGNMENTS = {
    "a1": "sim.grade.a1_ring_reduce_scatter",
    "a2": "sim.grade.a2_torus_all_reduce",
    "a3": "sim.grade.a3_ring_tree_sharp",
    "a4": "sim.grade.a4_nvls_all_reduce",
    "a5": "sim.grade.a5_debug_hang",
}
DEFAULT_TIMEOUT_S = 120.0
OUTPUT_TAIL = 4000


def assignment_module(key: str):
    if key not in ASSIGNMENTS:
        raise CollsimError(f"unknown assignment {key!r}: choose one of {', '.join(ASSIGNMENTS)}")
    return importlib.import_module(ASSIGNMENTS[key])


def grade(path: str, assignment: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
          limits: Limits | None = None, hidden: tuple[str, ...] = ()) -> GradeReport:
    """Grade ``path`` (.ipynb or .py) for ``assignment`` (default: detected from the file). ``hidden``: folders
    never mounted in the sandbox besides the project and the submission's own folder (the other submissions)."""
    cells, meta = read_submission(path)
    key = assignment or detect_assignment(path, cells, meta, ASSIGNMENTS)
    mod = assignment_module(key)
    said = (meta.get("collsim") or {}).get("assignment") if isinstance(meta, dict) else None
    if assignment and isinstance(said, str) and said in ASSIGNMENTS and said != assignment:
        # a notebook released for one assignment graded as another scores 0 for no reason a student could see
        raise CollsimError(f"{path} is the {said} notebook (its metadata says so) but --assignment {assignment} was given: "
                           f"grade it as {said} (drop --assignment), or pass the {assignment} notebook")
    if not cells:
        raise CollsimError(f"{path} has no code to grade")
    limits = limits or Limits(wall_s=timeout_s)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="collsim-grade-") as tmp:
        session = None
        try:
            session = Session([[c.label, c.code] for c in cells], tmp, limits,
                              hidden=(os.path.dirname(os.path.abspath(path)), *hidden))
            checks, error = tuple(mod.check(session)), None
            notes = tuple(session.notes)
        except StudentGone as e:
            checks, error, notes = _all_failed(mod, str(e)), str(e), ()
        finally:
            if session is not None:
                session.close()
        output = _tail(os.path.join(tmp, "output.txt"))
        gone = next((c.message for c in checks if c.got == "stopped"), None)
    return clean_report(GradeReport(key, mod.TITLE, path, checks, error or gone, notes, output, time.monotonic() - start))


def clean_report(r: GradeReport) -> GradeReport:
    """Every text field on one line (:func:`sim.grade.quote.one_line`): student text cannot forge a report line."""
    from dataclasses import replace

    from .quote import one_line

    def opt(s):
        return None if s is None else one_line(s)
    checks = tuple(replace(c, name=one_line(c.name, 200), message=one_line(c.message), expected=opt(c.expected), got=opt(c.got))
                   for c in r.checks)
    output = "\n".join(one_line(line, 500) for line in r.output.splitlines())
    return replace(r, path=one_line(r.path, 500), checks=checks, error=opt(r.error),
                   warnings=tuple(one_line(w) for w in r.warnings), output=output)


def _all_failed(mod, why: str) -> tuple[Check, ...]:
    """Every check of ``mod``, failed because the student's code never finished running its cells."""
    return tuple(Check(c.name, False, "not run: your code did not finish", skipped=True, points=c.points)
                 for c in mod.check({}))


def _tail(file: str) -> str:
    """The last OUTPUT_TAIL characters written to ``file`` (decoded leniently: student output is arbitrary)."""
    if not os.path.exists(file):
        return ""
    with open(file, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 4 * OUTPUT_TAIL))
        return f.read().decode(errors="replace")[-OUTPUT_TAIL:]


__all__ = ["grade", "clean_report", "ASSIGNMENTS", "assignment_module", "execute_cells"]
