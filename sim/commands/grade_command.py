"""``collsim grade FILE_OR_DIR...``: run a course assignment's autograder on students' notebooks or .py files.

Each student's code runs in a sandboxed process (limits on time, memory, output and processes; every
process it starts is killed at the end); the checks run in the grader and print one line each, PASS or
FAIL with what was expected and what the code did. One file: exit 0 when every check passes, 1 when
some fail, 2 when the file cannot be graded. Several files or a folder (a batch): every file is graded
(in parallel, a progress bar on stderr), ``--csv`` writes the grade sheet, ``--feedback DIR`` one
Markdown file per submission; exit 0 when every file could be graded, 1 otherwise.

Every output place (``--output``, ``--csv``, ``--feedback`` and the files it will hold) is checked before
any grading, so a typo costs one line, not a batch. Should a write still fail at the end (the disk filled
up meanwhile), the report is printed all the same and the failure named in one line (exit 2).
"""
from __future__ import annotations

import json
import os
import sys


def register(sub) -> None:
    p = sub.add_parser("grade", help="run an assignment's autograder on notebooks or .py files (one, many, or folders)",
                       description="Grade course assignments: e.g. `collsim grade notebooks/assignments/a1_ring_reduce_scatter.ipynb`, "
                                   "or a folder of submissions: `collsim grade submissions/ --assignment a1 --csv grades.csv`. "
                                   "Student code runs under bubblewrap where available: its own PID, user and network "
                                   "namespaces (everything it starts dies with it; no network), a read-only filesystem "
                                   "without the solutions or other submissions (writable: a private 256 MB /tmp and a "
                                   "16 MB /dev/shm, both memory), plus limits on time, memory, output and processes. "
                                   "Output places (--output, --csv, --feedback) are checked before any grading. Without bubblewrap it runs with those limits only, as you, and a one-line "
                                   "'not contained' notice says so (docs/teaching.md).")
    p.add_argument("file", nargs="+", metavar="FILE_OR_DIR",
                   help="a .ipynb or .py file (its name, e.g. a1_..., says which assignment), or a folder of them")
    p.add_argument("--assignment", "-a", default=None, help="a1 .. a5 (default: from each file's notebook metadata or name)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds each submission's code may run (default 120)")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space limit of the student's process (default 4096)")
    p.add_argument("--format", default="text", choices=("text", "json", "gradescope"),
                   help="text; json (the report, with score and max_score); gradescope (Gradescope's results.json)")
    p.add_argument("--output", "-o", default=None, help="write the report there instead of stdout "
                   "(e.g. /autograder/results/results.json)")
    p.add_argument("--csv", default=None, help="write a grade sheet: one row per file, one column per check")
    p.add_argument("--feedback", default=None, metavar="DIR", help="write one Markdown feedback file per submission into DIR")
    p.add_argument("--jobs", "-j", type=int, default=None, help="submissions graded at once (default: the number of CPUs)")
    p.add_argument("--verbose", "-v", action="store_true", help="also show what the code printed")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import CollsimError
    from ..grade.batch import ProgressBar, collect, grade_many, gradescope, refused
    from ..grade.runner import assignment_module, grade
    from ..grade.sandbox import Limits
    if not args.timeout > 0 or args.timeout > 86400:
        raise CollsimError(f"--timeout {args.timeout} must be a number of seconds in (0, 86400]")
    if not 256 <= args.memory_mb <= 1 << 20:
        raise CollsimError(f"--memory-mb {args.memory_mb} must be between 256 and 1048576")
    if args.jobs is not None and not 1 <= args.jobs <= 256:
        raise CollsimError(f"--jobs {args.jobs} must be between 1 and 256")
    if args.assignment:
        assignment_module(args.assignment)   # an unknown key is refused before any grading
    if args.feedback and os.path.exists(args.feedback) and not os.path.isdir(args.feedback):
        raise CollsimError(f"--feedback {args.feedback} is a file: give a folder (it is created if missing)")
    limits = Limits(wall_s=args.timeout, memory_mb=args.memory_mb)
    files = collect(args.file)
    batch = len(files) > 1 or any(os.path.isdir(f) for f in args.file) or args.csv or args.feedback
    if args.format == "gradescope" and len(files) != 1:
        raise CollsimError(f"--format gradescope grades one submission (Gradescope runs the grader once per student); "
                           f"{len(files)} files were given")
    if not batch:
        why = refused(files[0][0])
        if why:
            raise CollsimError(f"{files[0][0]}: {why}")
    names = _check_outputs(args, files)
    if not batch:
        reports = [grade(files[0][0], args.assignment, limits=limits)]
    else:
        reports = grade_many(files, args.assignment, limits, args.jobs or os.cpu_count() or 1, ProgressBar())
    problems: list[str] = []   # a write that fails now loses nothing: the report is printed all the same
    sheet = _write_sheets(args, reports, names, problems)
    if args.format == "gradescope":
        text = json.dumps(gradescope(reports[0]), indent=1)
    elif args.format == "json":
        text = json.dumps(reports[0].to_dict() if not batch else [r.to_dict() for r in reports], indent=1)
    elif not batch:
        text = reports[0].text(args.verbose)
    else:
        text = "\n".join(f"{r.path}: {'ERROR ' + r.error if r.error and not r.checks else '%g/%g' % r.score}"
                         for r in reports) + f"\n{len(reports)} submission(s) graded" + (f"; grade sheet {sheet}" if sheet else "")
    _emit(args, text, problems)
    if problems:
        sys.stdout.flush()
        for p in problems:
            print(f"collsim: error: {p}", file=sys.stderr)
        return 2
    if batch:
        return 1 if any(r.error and not r.checks for r in reports) else 0
    return 0 if reports[0].passed else 1


def _check_outputs(args, files: list[tuple[str, str]]) -> list[str]:
    """Every output place, before any grading: a typo must not cost the batch. Returns the feedback file
    names (from the names shown, made one line as :func:`sim.grade.runner.clean_report` makes every
    report's path), so the files written at the end are the ones checked here."""
    from ..errors import CollsimError
    from ..grade.batch import check_destination, feedback_names, prepare_feedback
    from ..grade.quote import one_line
    outputs = [(flag, path) for flag, path in (("--output", args.output), ("--csv", args.csv)) if path is not None]
    for flag, path in outputs:
        check_destination(path, args.file, flag)
    if len(outputs) == 2 and os.path.abspath(args.output) == os.path.abspath(args.csv):
        raise CollsimError(f"--output and --csv are the same file {args.csv}: give each its own")
    names = feedback_names([one_line(shown, 500) for _, shown in files])
    if args.feedback is not None:
        taken = {os.path.abspath(os.path.join(args.feedback, n)) for n in names}
        for flag, path in outputs:
            if os.path.abspath(path) in taken:
                raise CollsimError(f"{flag} {path} is also a feedback file of --feedback {args.feedback}: write it elsewhere")
        prepare_feedback(args.feedback, names, args.file)
    return names


def _write_sheets(args, reports, names: list[str], problems: list[str]) -> str | None:
    """The grade sheet and the feedback files; a failure is added to ``problems`` (never raised: the grades
    are printed all the same). Returns the sheet's path where it was written."""
    from ..errors import CollsimError
    from ..grade.batch import csv_text, feedback_markdown, write_atomic
    sheet = None
    if args.csv:
        try:
            write_atomic(args.csv, csv_text(reports), args.file, "--csv")
            sheet = args.csv
        except CollsimError as e:
            problems.append(f"{e} (the grade sheet was not written; the grades are in the report)")
    if args.feedback:
        for k, (r, name) in enumerate(zip(reports, names)):
            try:
                write_atomic(os.path.join(args.feedback, name), feedback_markdown(r), args.file, "--feedback")
            except CollsimError as e:
                problems.append(f"{e} ({len(reports) - k} feedback file(s) not written; the grades are in the report)")
                break
    return sheet


def _emit(args, text: str, problems: list[str]) -> None:
    """The report to ``--output``, or stdout (also where writing ``--output`` fails: the grades are not lost)."""
    from ..errors import CollsimError
    from ..grade.batch import write_atomic
    if args.output:
        try:
            write_atomic(args.output, text + "\n", args.file, "--output")
            return
        except CollsimError as e:
            problems.append(f"{e} (the report is printed on stdout instead)")
    print(text)


__all__ = ["register", "run"]
