"""Grade many submissions at once, and write what courses read: a CSV grade sheet, Gradescope's
``results.json``, one feedback file per student.

Each submission is graded by :func:`sim.grade.runner.grade` in a worker process (several at once where
cores allow); a submission that cannot be graded (unreadable, unknown assignment, a grader failure)
becomes a row with its error and never stops the others.

>>> r = GradeReport("a1", "t", "alice.ipynb", (Check("defines f", True, points=0), Check("correct", False, "n=4: wrong", points=2)))
>>> gradescope(r)["score"], [(t["name"], t["score"], t["max_score"]) for t in gradescope(r)["tests"]]
(0.0, [('defines f', 0.0, 0), ('correct', 0.0, 2)])
"""
from __future__ import annotations

import csv
import io
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

from ..errors import CollsimError
from .checks import Check, GradeReport
from .sandbox import Limits

SUFFIXES = (".ipynb", ".py")


def collect(paths: list[str]) -> list[tuple[str, str]]:
    """``(path, name shown)`` of every submission: files as given, folders searched for .ipynb/.py files
    (hidden files and ``.ipynb_checkpoints`` left out); the name is relative to the folder given."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for d, dirs, files in os.walk(p):
                dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
                found += [os.path.join(d, f) for f in sorted(files) if f.endswith(SUFFIXES) and not f.startswith(".")]
            if not found:
                raise CollsimError(f"{p!r} holds no .ipynb or .py files to grade")
            out += [(f, os.path.relpath(f, p)) for f in found]
        elif os.path.isfile(p):
            out.append((p, p))
        else:
            raise CollsimError(f"no such file or folder {p!r}: give submissions (.ipynb/.py) or folders holding them")
    return out


def grade_one(path: str, shown: str, assignment: str | None, limits: Limits) -> GradeReport:
    """Grade one file; any failure to grade becomes a report with ``error`` set, never an exception."""
    from .runner import grade
    try:
        report = grade(path, assignment, limits=limits)
    except CollsimError as e:
        return GradeReport(assignment or "?", "", shown, (), str(e))
    except Exception as e:  # a grader bug must not stop the batch; the row says what happened
        return GradeReport(assignment or "?", "", shown, (), f"the grader failed on this file ({type(e).__name__}: {e}); please report it")
    return GradeReport(report.assignment, report.title, shown, report.checks, report.error, report.warnings,
                       report.output, report.seconds, report.extra)


def grade_many(files: list[tuple[str, str]], assignment: str | None, limits: Limits, jobs: int,
               progress=None) -> list[GradeReport]:
    """Grade ``files`` with ``jobs`` workers; reports in the order of ``files``."""
    reports: list[GradeReport | None] = [None] * len(files)
    if jobs <= 1 or len(files) == 1:
        for i, (path, shown) in enumerate(files):
            reports[i] = grade_one(path, shown, assignment, limits)
            if progress:
                progress(i + 1, len(files), reports[i])
        return reports
    with ProcessPoolExecutor(max_workers=min(jobs, len(files))) as pool:
        futures = {pool.submit(grade_one, path, shown, assignment, limits): i for i, (path, shown) in enumerate(files)}
        for done, fut in enumerate(as_completed(futures), start=1):
            i = futures[fut]
            try:
                reports[i] = fut.result()
            except Exception as e:  # a worker that died (killed, out of memory): this file's row says so
                reports[i] = GradeReport(assignment or "?", "", files[i][1], (), f"its grading worker died ({type(e).__name__})")
            if progress:
                progress(done, len(files), reports[i])
    return reports


class ProgressBar:
    """``[#####.....] 5/10 graded`` on a terminal's stderr; one line per file otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int, report: GradeReport) -> None:
        got, most = report.score
        what = f"error: {report.error[:60]}" if report.error and not report.checks else f"{got:g}/{most:g}"
        if self.tty:
            bar = "#" * (20 * done // total)
            self.stream.write(f"\r[{bar:<20}] {done}/{total} graded  {report.path[-40:]:<40} {what[:30]:<30}")
            if done == total:
                self.stream.write("\n")
        else:
            self.stream.write(f"graded {done}/{total}: {report.path}: {what}\n")
        self.stream.flush()


def csv_text(reports: list[GradeReport]) -> str:
    """One row per submission: file, assignment, score, max_score, error, then one column per check
    (the points it earned), in the order the checks run."""
    names: list[str] = []
    for r in reports:
        names += [c.name for c in r.checks if c.name not in names]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["file", "assignment", "score", "max_score", "error", *names])
    for r in reports:
        got, most = r.score
        by_name = {c.name: c for c in r.checks}
        w.writerow([r.path, r.assignment, f"{got:g}", f"{most:g}", r.error or "",
                    *[f"{by_name[n].score:g}" if n in by_name else "" for n in names]])
    return buf.getvalue()


def _check_output(c: Check) -> str:
    text = c.message
    if not c.ok and (c.expected or c.got):
        text += f"\nexpected: {c.expected or '-'}\ngot: {c.got or '-'}"
    return text


def gradescope(report: GradeReport) -> dict:
    """Gradescope's autograder ``results.json``: score, and one test per check (name, score, max_score, output)."""
    got, _most = report.score
    tests = [{"name": c.name, "score": c.score, "max_score": c.points, "status": "passed" if c.ok else "failed",
              "output": _check_output(c)} for c in report.checks]
    lines = [f"note: {w}" for w in report.warnings] + ([f"ERROR {report.error}"] if report.error else [])
    return {"score": got, "execution_time": round(report.seconds, 2), "output": "\n".join(lines) or "graded by collsim",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def feedback_markdown(report: GradeReport) -> str:
    """The feedback file for one student."""
    got, most = report.score
    lines = [f"# {report.assignment}: {report.title}", "", f"File: `{report.path}`  ", f"**Score: {got:g} / {most:g}**", ""]
    if report.error:
        lines += [f"**Could not finish grading:** {report.error}", ""]
    for w in report.warnings:
        lines.append(f"- note: {w}")
    if report.warnings:
        lines.append("")
    lines += ["| check | points | result |", "|---|---|---|"]
    for c in report.checks:
        tag = "pass" if c.ok else ("skipped" if c.skipped else "**fail**")
        lines.append(f"| {c.name} | {c.score:g}/{c.points:g} | {tag} |")
    lines.append("")
    for c in report.checks:
        if not c.ok and not c.skipped:
            lines += [f"## {c.name}", "", c.message.replace("\n", "  \n"), ""]
            if c.expected or c.got:
                lines += [f"- expected: {c.expected or '-'}", f"- got: {c.got or '-'}", ""]
    return "\n".join(lines)


def feedback_name(shown: str) -> str:
    """A flat file name for a submission's feedback (``group1/alice.ipynb`` -> ``group1__alice.md``)."""
    stem = shown.replace(os.sep, "__").replace("/", "__").lstrip(".")
    return os.path.splitext(stem)[0] + ".md"


def write_atomic(path: str, text: str, inputs: list[str], flag: str = "output") -> None:
    """Write ``text`` to ``path`` through :mod:`sim.io.safe_io` (a temporary file and a rename; never through a
    link, never over a file the command reads); a path among the submissions being graded is refused too."""
    from ..io.safe_io import check_not_input, write_output
    real = os.path.realpath(path)
    for i in inputs:
        if os.path.exists(i) and (os.path.realpath(i) == real or (os.path.isdir(i) and real.startswith(os.path.realpath(i) + os.sep)
                                                                   and real.endswith(SUFFIXES))):
            raise CollsimError(f"{path} is one of the submissions being graded: write the output somewhere else")
    check_not_input(path, flag, [i for i in inputs if os.path.isfile(i)])
    write_output(path, text, flag)

__all__ = ["collect", "grade_one", "grade_many", "csv_text", "gradescope", "feedback_markdown", "feedback_name", "ProgressBar",
           "write_atomic"]
