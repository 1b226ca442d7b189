"""One submission, graded in its own process: ``python -m sim.grade.submission_worker JOB.json REPORT.json``.

:func:`sim.grade.batch.grade_many` starts one of these per submission (at most ``--jobs`` at once), each in
its own session, so a submission that kills its checker, or a checker that runs out of memory, ends that
row only: the batch reads the report file this process writes last and, where there is none, says in the
row how the process ended (:func:`start`, :func:`finish`).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict

from ..errors import CollsimError
from .checks import GradeReport
from .sandbox import Limits


def start(job: dict, folder: str, index: int, env: dict) -> tuple[subprocess.Popen, str]:
    """Start the worker for ``job`` (path, shown, assignment, limits, hidden); returns it and its report file."""
    job_file, report_file = os.path.join(folder, f"job{index}.json"), os.path.join(folder, f"report{index}.json")
    with open(job_file, "w") as f:
        json.dump(job, f)
    with open(os.path.join(folder, f"log{index}.txt"), "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "sim.grade.submission_worker", job_file, report_file], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    return proc, report_file


def finish(proc: subprocess.Popen, report_file: str, job: dict, timed_out: bool) -> GradeReport:
    """The worker's report, or a row that says what happened to it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # whatever it left in its session (it is done or out of time)
    except OSError:
        pass
    proc.wait()
    try:
        with open(report_file) as f:
            return GradeReport.from_json(f.read())
    except (OSError, ValueError, TypeError):
        pass
    if timed_out:
        why = f"grading took longer than {job['budget_s']:.0f} s and was stopped"
    elif proc.returncode is not None and proc.returncode < 0:
        why = f"its grading process was killed (signal {-proc.returncode}: its code killed the grader, or it ran out of memory)"
    else:
        why = f"its grading process ended with status {proc.returncode} before reporting"
    from .runner import clean_report
    return clean_report(GradeReport(job["assignment"] or "?", "", job["shown"], (), why))


def main(job_file: str, report_file: str) -> int:
    with open(job_file) as f:
        job = json.load(f)
    report = grade_one(job["path"], job["shown"], job["assignment"], Limits(**job["limits"]), tuple(job["hidden"]))
    tmp = report_file + ".part"
    with open(tmp, "w") as f:
        f.write(report.to_json())
    os.replace(tmp, report_file)   # all or nothing: a half-written report is no report
    return 0


def refused(path: str) -> str | None:
    """Why ``path`` is not graded (a link, a special file), or None for a regular file."""
    import stat
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link, not graded (a link can point at any file, the solutions included): submit the file itself"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file (a FIFO, device or socket), not graded: submit a .ipynb or .py file"
    return None


def grade_one(path: str, shown: str, assignment: str | None, limits: Limits, hidden: tuple[str, ...] = ()) -> GradeReport:
    """Grade one file; any failure to grade becomes a report with ``error`` set, never an exception."""
    from .runner import clean_report, grade
    why = refused(path)
    if why:
        return clean_report(GradeReport(assignment or "?", "", shown, (), why))
    try:
        report = grade(path, assignment, limits=limits, hidden=hidden)
    except CollsimError as e:
        return clean_report(GradeReport(assignment or "?", "", shown, (), str(e)))
    except Exception as e:  # a grader bug must not stop the batch; the row says what happened
        return clean_report(GradeReport(assignment or "?", "", shown, (), f"the grader failed on this file ({type(e).__name__}: {e}); please report it"))
    return clean_report(GradeReport(report.assignment, report.title, shown, report.checks, report.error, report.warnings,
                                    report.output, report.seconds, report.extra))


def job_for(path: str, shown: str, assignment: str | None, limits: Limits, hidden: list[str]) -> dict:
    return {"path": os.path.abspath(path), "shown": shown, "assignment": assignment, "limits": asdict(limits),
            "hidden": hidden, "budget_s": limits.wall_s * 2 + 120}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
