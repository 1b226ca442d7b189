"""``collsim grade FILE``: run a course assignment's autograder on a student's notebook or .py file.

The student's code runs in a fresh Python process (their own code, run on purpose) with a time limit;
the checks print one line each, PASS or FAIL with what is wrong. Exit status: 0 when every check
passes, 1 when some fail, 2 when the file cannot be graded (missing, unreadable, unknown assignment).
"""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("grade", help="run an assignment's autograder on your notebook or .py file",
                       description="Grade a course assignment: e.g. `collsim grade notebooks/assignments/a1_ring_reduce_scatter.ipynb`.")
    p.add_argument("file", help="your .ipynb or .py file (its name, e.g. a1_..., says which assignment)")
    p.add_argument("--assignment", "-a", default=None, help="a1, a2 or a3 (default: from the file name or notebook metadata)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds your code may run (default 120)")
    p.add_argument("--format", default="text", choices=("text", "json"))
    p.add_argument("--verbose", "-v", action="store_true", help="also show what your code printed")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import CollsimError
    from ..grade import grade
    if not args.timeout > 0:
        raise CollsimError(f"--timeout {args.timeout} must be a positive number of seconds")
    report = grade(args.file, args.assignment, timeout_s=args.timeout)
    print(json.dumps(json.loads(report.to_json()), indent=1) if args.format == "json" else report.text(args.verbose))
    return 0 if report.passed else 1
