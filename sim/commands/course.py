"""``collsim course release SOLUTIONS --out ASSIGNMENTS``: write the student notebooks from the instructor's.

The instructor notebooks mark solution code with nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION``;
the release replaces it by ``raise NotImplementedError()``, clears outputs and keeps the metadata the
grader reads (see :mod:`sim.grade.release` and docs/teaching.md).
"""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("course", help="course tools: release student notebooks from the instructor notebooks",
                       description="Course tools. `collsim course release notebooks/solutions --out notebooks/assignments`.")
    csub = p.add_subparsers(dest="course_command", metavar="ACTION")
    r = csub.add_parser("release", help="write student notebooks (solutions stripped, outputs cleared)",
                        description="Release: every instructor notebook in SOURCE (a folder or .ipynb files) is written to "
                                    "--out with its marked solution code replaced by `raise NotImplementedError()`.")
    r.add_argument("source", nargs="+", help="instructor notebooks, or a folder of them (e.g. notebooks/solutions)")
    r.add_argument("--out", required=True, help="folder for the student notebooks (e.g. notebooks/assignments)")
    r.set_defaults(func=run_release)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_release(args) -> int:
    from ..grade.release import release
    written = release(args.source, args.out)
    for path in written:
        print(f"released {path}")
    print(f"{len(written)} notebook(s) released into {args.out}")
    return 0


__all__ = ["register"]
