"""``collsim verify``: prove that an algorithm computes its collective, for a range of world sizes.

``collsim verify ring`` checks a built-in algorithm; ``collsim verify my_algo.py`` checks a user's file
that defines ``build(collective, nranks)`` returning a :class:`sim.Program` (optionally
``COLLECTIVES = [...]``): the basis of the course assignments.
"""
from __future__ import annotations

import importlib.util
import os

from ..algorithms import algorithms, build_program, why_not
from ..collectives import COLLECTIVES, get_collective
from ..errors import CollsimError
from ..verify import VerificationError, verify


def register(sub) -> None:
    p = sub.add_parser("verify", help="check that an algorithm computes its collective",
                       description="Symbolically run an algorithm's Program and check the collective's postcondition.")
    p.add_argument("algorithm", nargs="?", default="all", help="built-in algorithm name, 'all', or a Python file defining build(collective, nranks)")
    p.add_argument("--collective", "-c", default="all", help="a collective, or all (default)")
    p.add_argument("--ranks", default="2-16", help="world sizes: 8, 2-16, or 2,4,8 (default 2-16)")
    p.add_argument("--nchannels", type=int, default=1)
    p.add_argument("--pipeline", type=int, default=1)
    p.add_argument("--topology", "-t", help="verify on this topology (its GPU count is the world size; needed by "
                   "collnet/nvls, which reduce in its switches)")
    p.set_defaults(func=run)


def parse_ranks(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise CollsimError(f"cannot read --ranks {text!r}: use 8, 2-16 or 2,4,8") from None
        if a < 2 or b < a:
            raise CollsimError(f"--ranks {text!r}: world sizes start at 2 and ranges go up")
        out.extend(range(a, b + 1))
    return out


def load_user_builder(path: str):
    """Import a user's algorithm file (their own code, run on purpose) and return (build, collectives)."""
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give a built-in algorithm name or a .py file")
    spec = importlib.util.spec_from_file_location("collsim_user_algorithm", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the student's code: report its error in one line
        raise CollsimError(f"{path} failed to import: {type(e).__name__}: {e}") from None
    build = getattr(module, "build", None)
    if not callable(build):
        raise CollsimError(f"{path} defines no function build(collective, nranks) returning a sim.Program")
    return build, list(getattr(module, "COLLECTIVES", COLLECTIVES))


def run(args) -> int:
    ranks = parse_ranks(args.ranks)
    topo = None
    if getattr(args, "topology", None):
        from ..presets import load_topology
        topo = load_topology(args.topology)
        ranks = [topo.nranks]
    colls = list(COLLECTIVES) if args.collective == "all" else [get_collective(args.collective).name]
    jobs = []  # (label, collective, n, thunk)
    if args.algorithm.endswith(".py"):
        build, supported = load_user_builder(args.algorithm)
        for c in colls:
            if c in supported:
                for n in ranks:
                    jobs.append((os.path.basename(args.algorithm), c, n, lambda c=c, n=n: build(c, n)))
    else:
        names = sorted(algorithms()) if args.algorithm == "all" else [args.algorithm]
        for name in names:
            for c in colls:
                for n in ranks:
                    if why_not(name, c, n, topo) is None:
                        jobs.append((name, c, n, lambda name=name, c=c, n=n: build_program(
                            name, c, n, topology=topo, nchannels=args.nchannels, pipeline=args.pipeline, root=n // 2)))
    if not jobs:
        raise CollsimError(f"nothing to verify for {args.algorithm} / {args.collective}: check the names")
    from ..budget import check_verify   # memory budget (issue 14): refuse huge worlds before building any
    user = args.algorithm.endswith(".py")
    for label, c, n, _ in jobs:
        check_verify(c, n, None if user else label, args.nchannels, args.pipeline)
    failures, summary = 0, {}
    for label, c, n, thunk in jobs:
        try:
            prog = thunk()
            verify(prog)
            summary.setdefault((label, c), []).append(n)
        except VerificationError as e:
            failures += 1
            print(f"FAIL {label} {c} n={n}: {e}")
        except CollsimError as e:
            failures += 1
            print(f"FAIL {label} {c} n={n}: cannot build: {e}")
        except Exception as e:  # a user's build() may raise anything; one line, no traceback
            failures += 1
            print(f"FAIL {label} {c} n={n}: build raised {type(e).__name__}: {e}")
    for (label, c), ns in summary.items():
        print(f"ok   {label:18s} {c:15s} n={_ranges(ns)}")
    print(f"{len(jobs) - failures} of {len(jobs)} programs verified" + (f", {failures} failed" if failures else ""))
    return 1 if failures else 0


def _ranges(ns: list[int]) -> str:
    ns = sorted(ns)
    return f"{ns[0]}..{ns[-1]}" if ns == list(range(ns[0], ns[-1] + 1)) and len(ns) > 1 else ",".join(map(str, ns))
