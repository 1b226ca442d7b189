"""Grade many submissions at once, and write what courses read: a CSV grade sheet, Gradescope's
``results.json``, one feedback file per student.

Each submission is graded by :func:`sim.grade.runner.grade` in its own worker process
(:mod:`sim.grade.submission_worker`; ``--jobs`` of them at once); a submission that cannot be graded (unreadable, a
link or special file, unknown assignment, a worker that died) becomes a row with its error and never
stops the others. Student text is made one line (and Markdown-quoted) in every format (:mod:`sim.grade.quote`).

>>> r = GradeReport("a1", "t", "alice.ipynb", (Check("defines f", True, points=0), Check("correct", False, "n=4: wrong", points=2)))
>>> gradescope(r)["score"], [(t["name"], t["score"], t["max_score"]) for t in gradescope(r)["tests"]]
(0.0, [('defines f', 0.0, 0), ('correct', 0.0, 2)])
"""
from __future__ import annotations

import csv
import io
import os
import re
import sys

from ..errors import CollsimError
from .checks import Check, GradeReport
from .quote import md, one_line
from .sandbox import Limits
from .submission_worker import grade_one, refused  # noqa: F401  (one submission, graded or refused: API)

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


def grade_many(files: list[tuple[str, str]], assignment: str | None, limits: Limits, jobs: int,
               progress=None) -> list[GradeReport]:
    """Grade ``files``, each in its own worker process (:mod:`sim.grade.submission_worker`), ``jobs`` of them at once;
    reports in the order of ``files``. A worker that dies or runs out of time ends its own row only."""
    import tempfile
    import time

    from ..io.containment import not_contained_notice, project_root
    from .jail import available, weaker_notice
    from .runner import clean_report
    from .submission_worker import finish, job_for, start
    if not available():
        not_contained_notice("the students' code")
    weaker_notice()
    # every submission's folder is hidden from every sandbox (besides the project's own)
    hidden = sorted({os.path.dirname(os.path.abspath(p)) for p, _ in files})
    root = project_root()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys([root, *(p for p in sys.path if p)])))
    reports: list[GradeReport | None] = [None] * len(files)
    todo, done = list(range(len(files))), 0
    running: dict[int, tuple] = {}
    with tempfile.TemporaryDirectory(prefix="collsim-batch-") as tmp:
        while todo or running:
            while todo and len(running) < max(1, jobs):
                i = todo.pop(0)
                path, shown = files[i]
                why = refused(path)
                if why:   # refused before any process is started
                    reports[i] = clean_report(GradeReport(assignment or "?", "", shown, (), why))
                    done += 1
                    if progress:
                        progress(done, len(files), reports[i])
                    continue
                job = job_for(path, shown, assignment, limits, hidden)
                proc, report_file = start(job, tmp, i, env)
                running[i] = (proc, report_file, job, time.monotonic())
            for i, (proc, report_file, job, t0) in list(running.items()):
                late = time.monotonic() - t0 > job["budget_s"]
                if proc.poll() is None and not late:
                    continue
                del running[i]
                reports[i] = finish(proc, report_file, job, late and proc.poll() is None)
                done += 1
                if progress:
                    progress(done, len(files), reports[i])
            if running:
                time.sleep(0.05)
    return reports  # type: ignore[return-value]


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
    (the points it earned), in the order the checks run. A check worth no points (a gate such as "defines
    f") says pass or fail: its points, 0 either way, read as a failure next to a PASS in the feedback."""
    names: list[str] = []
    for r in reports:
        names += [c.name for c in r.checks if c.name not in names]
    gates = {n for n in names if all(c.points == 0 for r in reports for c in r.checks if c.name == n)}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["file", "assignment", "score", "max_score", "error",
                *[_cell(n + (" (0 points: pass/fail)" if n in gates else "")) for n in names]])
    for r in reports:
        got, most = r.score
        by_name = {c.name: c for c in r.checks}
        w.writerow([_cell(r.path), _cell(r.assignment), f"{got:g}", f"{most:g}", _cell(r.error or ""),
                    *[("" if n not in by_name else ("skipped" if by_name[n].skipped else "pass" if by_name[n].ok else "fail")
                       if n in gates else f"{by_name[n].score:g}") for n in names]])
    return buf.getvalue()


def _cell(text: str) -> str:
    """A CSV cell: one line, and never read as a spreadsheet formula (a leading = + - @ gets a quote)."""
    text = one_line(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _check_output(c: Check) -> str:
    text = one_line(c.message)
    if not c.ok and (c.expected or c.got):
        text += f"\nexpected: {one_line(c.expected or '-')}\ngot: {one_line(c.got or '-')}"
    return text


def gradescope(report: GradeReport) -> dict:
    """Gradescope's autograder ``results.json``: score, and one test per check (name, score, max_score, output)."""
    got, _most = report.score
    tests = [{"name": one_line(c.name, 200), "score": c.score, "max_score": c.points, "status": "passed" if c.ok else "failed",
              "output": _check_output(c)} for c in report.checks]
    lines = [f"note: {one_line(w)}" for w in report.warnings] + ([f"ERROR {one_line(report.error)}"] if report.error else [])
    return {"score": got, "execution_time": round(report.seconds, 2), "output": "\n".join(lines) or "graded by collsim",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def feedback_markdown(report: GradeReport) -> str:
    """The feedback file for one student; every text field one line and Markdown-escaped (:func:`md`)."""
    got, most = report.score
    lines = [f"# {md(report.assignment)}: {md(report.title)}", "", f"File: {md(report.path)}  ", f"**Score: {got:g} / {most:g}**", ""]
    if report.error:
        lines += [f"**Could not finish grading:** {md(report.error)}", ""]
    for w in report.warnings:
        lines.append(f"- note: {md(w)}")
    if report.warnings:
        lines.append("")
    lines += ["| check | points | result |", "|---|---|---|"]
    for c in report.checks:
        tag = "pass" if c.ok else ("skipped" if c.skipped else "**fail**")
        lines.append(f"| {md(c.name, 200)} | {c.score:g}/{c.points:g} | {tag} |")
    lines.append("")
    for c in report.checks:
        if not c.ok and not c.skipped:
            lines += [f"## {md(c.name, 200)}", "", md(c.message), ""]
            if c.expected or c.got:
                lines += [f"- expected: {md(c.expected or '-')}", f"- got: {md(c.got or '-')}", ""]
    return "\n".join(lines)


def feedback_name(shown: str) -> str:
    """A flat file name for a submission's feedback (``group1/alice.ipynb`` -> ``group1__alice.md``)."""
    stem = shown.replace(os.sep, "__").replace("/", "__").lstrip(".")
    # a student names their file: only letters, digits and . _ - reach the feedback file's name
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.splitext(stem)[0])[:150] or "submission"
    return stem + ".md"


def feedback_names(shown: list[str]) -> list[str]:
    """:func:`feedback_name` of each submission, made unique: where two map to the same name (``alice.py``
    and ``alice.ipynb``; ``a/b.py`` and ``a__b.py``), the later ones get ``-2``, ``-3``, ... before ``.md``."""
    out, taken = [], set()
    for s in shown:
        base = feedback_name(s)
        name, k = base, 1
        while name.lower() in taken:   # case-insensitive: the same file on macOS and Windows
            k += 1
            name = f"{base[:-3]}-{k}.md"
        taken.add(name.lower())
        out.append(name)
    return out


def _refuse_submission(path: str, inputs: list[str]) -> None:
    real = os.path.realpath(path)
    for i in inputs:
        if os.path.exists(i) and (os.path.realpath(i) == real or (os.path.isdir(i) and real.startswith(os.path.realpath(i) + os.sep)
                                                                   and real.endswith(SUFFIXES))):
            raise CollsimError(f"{path} is one of the submissions being graded: write the output somewhere else")


def write_atomic(path: str, text: str, inputs: list[str], flag: str = "output") -> None:
    """Write ``text`` to ``path`` through :mod:`sim.io.safe_io` (a temporary file and a rename; never through a
    link, never over a file the command reads); a path among the submissions being graded is refused too."""
    from ..io.safe_io import check_not_input, write_output
    _refuse_submission(path, inputs)
    check_not_input(path, flag, [i for i in inputs if os.path.isfile(i)])
    write_output(path, text, flag)


def _probe_folder(folder: str, path: str, flag: str) -> None:
    """Refuse a folder this process cannot create a file in (``/proc``, a read-only mount, no permission)."""
    import tempfile
    try:
        fd, tmp = tempfile.mkstemp(prefix=".collsim-check.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise CollsimError(f"cannot write {flag} {path}: {e.strerror or e} in {folder}: choose a folder you can write to") from None
    os.close(fd)
    os.unlink(tmp)


def check_destination(path: str, inputs: list[str], flag: str) -> None:
    """Refuse ``path`` as an output file of ``collsim grade`` now, before any grading (one line): a submission,
    an input, a link, a folder, a special file, a missing folder, or a folder no file can be written in.
    :func:`write_atomic` checks again when it writes."""
    from ..io.safe_io import check_not_input, check_output
    if not path:
        raise CollsimError(f"{flag}: give a file name")
    _refuse_submission(path, inputs)
    check_not_input(path, flag, [i for i in inputs if os.path.isfile(i)])
    check_output(path, flag)
    _probe_folder(os.path.dirname(os.path.abspath(path)), path, flag)


def prepare_feedback(folder: str, names: list[str], inputs: list[str]) -> None:
    """Make the ``--feedback`` folder (and the folders above it) if missing, and refuse it now, before any
    grading, where the feedback files cannot be written: the path holds a file, it is ``/proc`` or read-only,
    or a file to be written there is a link, a folder, a special file, or an input."""
    from ..io.safe_io import check_output
    flag = "--feedback"
    if not folder:
        raise CollsimError(f"{flag}: give a folder name")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CollsimError(f"{flag} {folder} is a file: give a folder (it is created if missing)")
    if not os.path.isdir(folder):
        up = os.path.abspath(folder)
        while not os.path.lexists(up) and os.path.dirname(up) != up:
            up = os.path.dirname(up)
        if os.path.lexists(up) and not os.path.isdir(up):
            raise CollsimError(f"{flag} {folder}: {up} is a file, not a folder: give a folder elsewhere")
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise CollsimError(f"cannot create the {flag} folder {folder}: {e.strerror or e}: choose a folder you can "
                               "write to") from None
    for name in names:
        path = os.path.join(folder, name)
        _refuse_submission(path, inputs)
        check_output(path, flag)
    _probe_folder(folder, folder, flag)


__all__ = ["collect", "grade_one", "grade_many", "csv_text", "gradescope", "feedback_markdown", "feedback_name", "feedback_names", "refused", "ProgressBar",
           "write_atomic", "check_destination", "prepare_feedback"]
