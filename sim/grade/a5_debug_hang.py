"""Assignment a5: debug a hung job from its flight-recorder dumps.

Every student has a ``SEED``; :func:`sim.grade.hung_job.write_job` writes the dumps of a DDP job that
hangs because one rank's program went wrong (it skipped a collective, or called another collective,
size or dtype). The student writes ``diagnose(dump_dir) -> {"rank", "seq", "collective", "kind"}``: the
culprit rank, the collective sequence number the job hangs at, the collective the other ranks wait in,
and the kind (``missing_rank``, ``collective_type_mismatch``, ``size_mismatch``, ``dtype_mismatch``).

The checks run ``diagnose`` on the dumps of the student's own job, then on four jobs it has never seen
(fresh random seeds, one per kind of fault), and compare with the ground truth of each job: the fault
that was injected and the simulator's record of which collective never completed. While ``diagnose``
runs, collsim's own analyzer refuses to (write the diagnosis, do not call it).

>>> TITLE
'debug a hung job from its flight-recorder dumps'
"""
from __future__ import annotations

import os
import secrets
import shutil
import tempfile

from .checks import Fail, call, need, run_checks
from .hung_job import KINDS, ground_truth, write_job

TITLE = "debug a hung job from its flight-recorder dumps"
NOTEBOOK = "a5_debug_hang.ipynb"
FIELDS = ("rank", "seq", "collective", "kind")


def _seed(student) -> int:
    reply = student.get("SEED")
    value = reply.get("value") if isinstance(reply, dict) else None
    if type(value) is not int or not 0 <= value < 1 << 62:
        raise Fail("set `SEED = <your student number>` (a whole number) in the first code cell: it picks your job",
                   expected="SEED = a whole number", got="missing" if reply.get("missing") else repr(value)[:60])
    return value


def _diagnosis(student, seed: int, kind: str | None = None) -> tuple[dict, dict]:
    """(the student's diagnosis, the truth) for the job of ``seed``."""
    share = getattr(student, "share_dir", None)   # a sandboxed student sees only the session's share folder
    folder = tempfile.mkdtemp(prefix="collsim-a5-", dir=share)
    try:
        write_job(folder, seed, kind)
        os.chmod(folder, 0o755)
        got = call(student, "diagnose", student.seen_as(folder) if share else folder, forbid=("analyzer",))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not isinstance(got, dict) or not all(k in got for k in FIELDS):
        raise Fail(f"`diagnose(dump_dir)` returned {got!r:.120}; return a dict with keys {', '.join(FIELDS)}",
                   expected="{'rank': ..., 'seq': ..., 'collective': ..., 'kind': ...}", got=repr(got)[:120])
    return got, ground_truth(seed, kind)


def _compare(got: dict, truth: dict, fields, what: str) -> None:
    wrong = [f for f in fields if got.get(f) != truth[f]]
    if wrong:
        shown = ", ".join(f"{f} {got.get(f)!r} (the dumps say {truth[f]!r})" for f in wrong)
        raise Fail(f"{what}: {shown}", expected=", ".join(f"{f}={truth[f]!r}" for f in fields),
                   got=", ".join(f"{f}={got.get(f)!r}" for f in fields))


def defines(student):
    need(student, "diagnose")
    return f"found `diagnose` and SEED = {_seed(student)}"


def own_rank(student):
    got, truth = _diagnosis(student, _seed(student))
    _compare(got, truth, ("rank",), "your job")
    return f"your job: rank {truth['rank']} is the culprit"


def own_seq(student):
    got, truth = _diagnosis(student, _seed(student))
    _compare(got, truth, ("seq", "collective"), "your job")
    return f"your job hangs at seq {truth['seq']} ({truth['collective']})"


def own_kind(student):
    got, truth = _diagnosis(student, _seed(student))
    _compare(got, truth, ("kind",), "your job")
    return f"your job: {truth['kind']}"


def unseen(kind: str):
    def check(student):
        seed = secrets.randbits(48)   # a job nobody has seen: the answer must come from reading the dumps
        got, truth = _diagnosis(student, seed, kind)
        _compare(got, truth, FIELDS, f"an unseen job (seed {seed}, a rank whose program has a {kind} fault)")
        return f"seed {seed}: rank {truth['rank']}, seq {truth['seq']}, {truth['kind']}"
    return check


def check(ns: dict):
    gate = ["defines diagnose and SEED"]
    return run_checks(ns, [
        ("defines diagnose and SEED", defines, [], 0),
        ("your job: the culprit rank", own_rank, gate),
        ("your job: the collective it hangs at", own_seq, gate),
        ("your job: the kind of fault", own_kind, gate),
        *[(f"unseen job: {kind}", unseen(kind), gate) for kind in sorted(KINDS)],
    ])


__all__ = ["check", "TITLE", "NOTEBOOK"]
