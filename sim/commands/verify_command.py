"""``collsim verify``: prove that an algorithm computes its collective, for a range of world sizes.

``collsim verify ring`` checks a built-in algorithm; ``collsim verify my_algo.py`` checks a user's file
that defines ``build(collective, nranks)`` returning a :class:`sim.Program` (optionally
``COLLECTIVES = [...]``): the basis of the course assignments. Every program must be the collective and
world size it was asked for. A user's file runs in a child process with ``--timeout``, under bubblewrap
where available (the grader's sandbox, :mod:`sim.grade.user_file`); without it, as you, with a one-line
"not contained" notice. The child only builds: each Program comes back as plain op columns and is
verified in this process, so nothing the file does can report a program as verified.
"""
from __future__ import annotations

import os

from ..algorithms import algorithms, build_program, why_not
from ..collectives import COLLECTIVES, get_collective
from ..errors import CollsimError
from ..grade.user_file import run_user_file
from ..io.user_algorithm import load_user_builder, program_mismatch  # noqa: F401 (load_user_builder: API)
from ..io.validation import number
from ..verify import VerificationError, verify


def register(sub) -> None:
    p = sub.add_parser("verify", help="check that an algorithm computes its collective",
                       description="Symbolically run an algorithm's Program and check the collective's postcondition. "
                                   "A FILE.py runs in a child process stopped after --timeout seconds, under bubblewrap "
                                   "where available (own PID, user and network namespaces, read-only filesystem but a "
                                   "256 MB /tmp and a 16 MB /dev/shm, the grader's limits on memory and processes); "
                                   "without it, as you, with a one-line 'not contained' notice. The child only builds "
                                   "the programs; collsim verifies them in its own process.")
    p.add_argument("algorithm", nargs="?", default="all", help="built-in algorithm name, 'all', or a Python file defining "
                   "build(collective, nranks) (run in a child process, sandboxed by bubblewrap where available)")
    p.add_argument("--collective", "-c", default="all", help="a collective, or all (default)")
    p.add_argument("--ranks", default="2-16", help="world sizes: 8, 2-16, or 2,4,8 (default 2-16)")
    p.add_argument("--nchannels", type=int, default=1)
    p.add_argument("--pipeline", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a FILE.py may take to import and build every program (default 60)")
    p.add_argument("--topology", "-t", help="verify on this topology (its GPU count is the world size; needed by "
                   "collnet/nvls, which reduce in its switches)")
    p.set_defaults(func=run)


MAX_TIMEOUT_S = 7 * 24 * 3600  # a week: longer is a typo, and larger values overflow the OS's timers
MAX_VERIFY_RANKS = 1024  # symbolic verification holds n x chunks rank sets: past ~1e3 ranks it takes minutes
MAX_WORLD_SIZES = 256


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
        if b > MAX_VERIFY_RANKS:
            raise CollsimError(f"--ranks {text!r}: {b} ranks is over the verify limit of {MAX_VERIFY_RANKS} "
                               f"(symbolic verification grows as ranks squared): use e.g. 2-64")
        out.extend(range(a, b + 1))
        if len(out) > MAX_WORLD_SIZES:
            raise CollsimError(f"--ranks {text!r} lists more than {MAX_WORLD_SIZES} world sizes: use fewer, e.g. 2-16 or 2,4,8,64")
    return out


def run(args) -> int:
    ranks = parse_ranks(args.ranks)
    topo = None
    if getattr(args, "topology", None):
        from ..presets import load_topology
        topo = load_topology(args.topology)
        ranks = [topo.nranks]
    colls = list(COLLECTIVES) if args.collective == "all" else [get_collective(args.collective).name]
    if args.algorithm.endswith(".py"):
        return _run_user_file(args, colls, ranks)
    jobs = []  # (label, collective, n, thunk)
    names = sorted(algorithms()) if args.algorithm == "all" else [args.algorithm]
    for name in names:
        for c in colls:
            for n in ranks:
                if why_not(name, c, n, topo) is None:
                    jobs.append((name, c, n, lambda name=name, c=c, n=n: build_program(
                        name, c, n, topology=topo, nchannels=args.nchannels, pipeline=args.pipeline, root=n // 2)))
    if not jobs:
        raise CollsimError(f"nothing to verify for {args.algorithm} / {args.collective}: check the names")
    from ..prediction.budget import check_verify  # memory budget (issue 14): refuse huge worlds before building any
    for label, c, n, _ in jobs:
        check_verify(c, n, label, args.nchannels, args.pipeline)
    failures, summary = 0, {}
    for label, c, n, thunk in jobs:
        try:
            prog = thunk()
            why = program_mismatch(prog, c, n)
            if why:
                raise VerificationError(why)
            verify(prog)
            summary.setdefault((label, c), []).append(n)
        except VerificationError as e:
            failures += 1
            print(f"FAIL {label} {c} n={n}: {e}")
        except CollsimError as e:
            failures += 1
            print(f"FAIL {label} {c} n={n}: cannot build: {e}")
    for (label, c), ns in summary.items():
        print(f"ok   {label:18s} {c:15s} n={_ranges(ns)}")
    print(f"{len(jobs) - failures} of {len(jobs)} programs verified" + (f", {failures} failed" if failures else ""))
    return 1 if failures else 0


def _run_user_file(args, colls: list[str], ranks: list[int]) -> int:
    """A user's file: every (collective, world size) built and verified in a child process."""
    path = args.algorithm
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give a built-in algorithm name or a .py file")
    number(args.timeout, "--timeout", low=0, low_open=True, high=MAX_TIMEOUT_S, example="60")
    results, fatal = run_user_file(path, [(c, n) for c in colls for n in ranks], args.timeout)
    label = os.path.basename(path)
    failures, summary = 0, {}
    for r in results:
        if r["ok"]:
            summary.setdefault((label, r["collective"]), []).append(r["nranks"])
        else:
            failures += 1
            print(f"FAIL {label} {r['collective']} n={r['nranks']}: {r['message']}")
    for (lab, c), ns in summary.items():
        print(f"ok   {lab:18s} {c:15s} n={_ranges(ns)}")
    if fatal:
        print(f"FAIL {label}: {fatal}")
        print(f"{len(results) - failures} programs verified before the failure, {failures} failed; the run did not finish")
        return 1
    if not results:
        raise CollsimError(f"nothing to verify in {path} for {args.collective}: its COLLECTIVES list none of them")
    print(f"{len(results) - failures} of {len(results)} programs verified" + (f", {failures} failed" if failures else ""))
    return 1 if failures else 0


def _ranges(ns: list[int]) -> str:
    ns = sorted(ns)
    return f"{ns[0]}..{ns[-1]}" if ns == list(range(ns[0], ns[-1] + 1)) and len(ns) > 1 else ",".join(map(str, ns))
