"""What an autograder check is, what a grade report holds, and helpers shared by the assignments.

A check is a function of the student's namespace that returns a short success note or raises
:class:`Fail` with a message that says what is wrong and what to try. :func:`run_checks` runs them in
order; a check whose prerequisites failed is skipped with the reason, so the first message a student
reads is the one to fix first.

>>> def defines(ns):
...     need(ns, "f")
...     return "f is defined"
>>> [c.ok for c in run_checks({"f": len}, [("defines f", defines)])]
[True]
>>> run_checks({}, [("defines f", defines)])[0].message
'your code defines no `f`: write `def f(...)` (check the spelling, and that its cell ran without an error)'
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..errors import CollsimError
from .where import student_error


class Fail(Exception):
    """Raised by a check: the message is shown to the student as is; ``expected``/``got`` say it in short."""

    def __init__(self, message: str, expected: str | None = None, got: str | None = None):
        super().__init__(message)
        self.expected, self.got = expected, got


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str = ""
    skipped: bool = False
    points: float = 1.0            # what the check is worth; 0 for a gate such as "defines f"
    expected: str | None = None
    got: str | None = None

    @property
    def score(self) -> float:
        return float(self.points) if self.ok else 0.0


@dataclass(frozen=True)
class GradeReport:
    """The outcome of grading one file. ``error``: why the checks could not run at all (None if they did)."""

    assignment: str
    title: str
    path: str
    checks: tuple[Check, ...] = ()
    error: str | None = None
    warnings: tuple[str, ...] = ()
    output: str = ""            # the tail of what the student's code printed
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def score(self) -> tuple[float, float]:
        """(points earned, points possible)."""
        return sum(c.score for c in self.checks), sum(c.points for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok and not c.skipped]

    def text(self, verbose: bool = False) -> str:
        """What ``collsim grade`` prints."""
        lines = [f"{self.assignment}: {self.title}  ({self.path})"]
        for w in self.warnings:
            lines.append(f"  note: {w}")
        if self.error:
            lines.append(f"  ERROR {self.error}")
        for c in self.checks:
            tag = "PASS" if c.ok else ("SKIP" if c.skipped else "FAIL")
            worth = f" [{c.score:g}/{c.points:g}]" if c.points else ""
            lines.append(f"  {tag}{worth} {c.name}" + (f": {c.message}" if c.message else ""))
            if not c.ok and not c.skipped and (c.expected or c.got):
                lines.append(f"      expected {c.expected or '-'}; got {c.got or '-'}")
        if verbose and self.output:
            lines.append("  --- your code printed (last lines) ---")
            lines.extend("  | " + l for l in self.output.rstrip().splitlines()[-20:])
        got, total = self.score
        verdict = ("all checks pass" if self.passed else "could not grade" if self.error and not self.checks
                   else "stopped early (see ERROR)" if self.error else f"{len(self.failures())} check(s) to fix")
        lines.append(f"score {got:g}/{total:g}: {verdict} ({self.seconds:.1f} s)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        got, total = self.score
        return dict(asdict(self), score=got, max_score=total, passed=self.passed)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> "GradeReport":
        d = json.loads(text)
        for derived in ("score", "max_score", "passed"):
            d.pop(derived, None)
        d["checks"] = tuple(Check(**c) for c in d.get("checks", ()))
        d["warnings"] = tuple(d.get("warnings", ()))
        return cls(**d)


def as_student(ns):
    """A namespace dict (tests, trusted code) becomes a :class:`~sim.grade.student.LocalStudent`."""
    if isinstance(ns, dict):
        from .student import LocalStudent
        return LocalStudent(ns)
    return ns


def need(ns, name: str, kind: str = "function") -> None:
    """:class:`Fail` unless the student's code defines ``name`` (a callable unless ``kind`` is "value")."""
    student = as_student(ns)
    if name not in student.names:
        example = f"`def {name}(...)`" if kind == "function" else f"`{name} = ...`"
        raise Fail(f"your code defines no `{name}`: write {example} (check the spelling, and that its cell ran without an error)",
                   expected=f"`{name}` defined", got="not defined")
    if kind == "function" and student.names[name] != "function":
        raise Fail(f"`{name}` is a {student.names[name]}, not a function", expected="a function", got=student.names[name])


def _shown(name, args) -> str:
    return f"`{name}({', '.join(map(repr, args))})`"


def call(ns, name: str, *args, forbid=()):
    """Call the student's function (in their process when sandboxed) and return what it returned, rebuilt
    and validated here; their exception becomes a :class:`Fail` that says where it happened."""
    from .wire import WireError, decode
    student = as_student(ns)
    need(student, name)
    shown = _shown(name, args)
    reply = student.call(name, tuple(args), forbid)
    if reply.get("missing"):
        raise Fail(f"your code defines no `{name}`", expected=f"`{name}` defined", got="not defined")
    if "error" in reply:
        err, text = str(reply.get("error")), str(reply.get("text", ""))[:2000]
        if err == "NotImplementedError":
            raise Fail(f"{shown} raised NotImplementedError: replace the `raise NotImplementedError` with your code",
                       expected="a result", got="NotImplementedError")
        if reply.get("collsim"):
            raise Fail(f"{shown} raised a collsim error: {str(reply.get('message', ''))[:2000]}", expected="a result", got=text)
        raise Fail(f"{shown} raised {text}", expected="a result", got=text)
    try:
        return decode(reply.get("value"))
    except WireError as e:
        raise Fail(f"{shown} returned something the grader cannot accept: {e}", expected="a result", got=str(e)) from None
    except CollsimError as e:
        raise Fail(f"{shown} returned a Program with a bad shape: {e}", expected="a well-formed Program", got=str(e)) from None


def program_from(ns, name: str, args: tuple, collective: str, nranks: int, ranks_note: str = "", own: tuple = ()):
    """Call the student's ``name(*args)`` and check it returned a :class:`sim.Program` for ``collective``
    on ``nranks`` ranks; anything else is a :class:`Fail` saying what came back instead. ``own``: the
    library's algorithms the assignment asks the student to write, whose builders refuse during the call."""
    import sim
    shown = _shown(name, args)
    p = call(ns, name, *args, forbid=("library:" + "+".join(own),) if own else ())
    if not isinstance(p, sim.Program):
        got = getattr(p, "type_name", type(p).__name__)
        how = ("the sends are collected, now turn them into a Program: `return p.program(\"my_name\", steps=...)`"
               if got == "ChunkProgram" else "build it with a ChunkProgram and return `p.program(...)`")
        raise Fail(f"{shown} returned a {got}; return a sim.Program ({how})", expected="a sim.Program", got=f"a {got}")
    if p.collective.name != collective:
        raise Fail(f"{shown} returns a Program for {p.collective.name}; write ChunkProgram(\"{collective}\", ...)",
                   expected=collective, got=p.collective.name)
    if p.nranks != nranks:
        raise Fail(f"{shown} returns a Program for {p.nranks} ranks, not {nranks}{ranks_note}",
                   expected=f"{nranks} ranks", got=f"{p.nranks} ranks")
    return p


def run_checks(ns, checks) -> list[Check]:
    """Run ``[(name, fn)]``, ``[(name, fn, [names it needs])]`` or ``[(name, fn, needs, points)]`` in order;
    a check whose needs failed is skipped with the reason. When the student's process stops answering
    (time limit, crash) the check running and every later one fail with that reason."""
    from .sandbox import StudentGone
    student = as_student(ns)
    done: dict[str, bool] = {}
    out = []
    gone = None
    for item in checks:
        name, fn, *rest = item
        needs = rest[0] if rest else []
        points = rest[1] if len(rest) > 1 else 1.0
        missing = [n for n in needs if not done.get(n)]
        if gone:
            out.append(Check(name, False, f"not run: {gone}", skipped=True, points=points))
            continue
        if missing:
            out.append(Check(name, False, f"skipped until `{missing[0]}` passes", skipped=True, points=points))
            done[name] = False
            continue
        try:
            note = fn(student)
            out.append(Check(name, True, note or "", points=points))
            done[name] = True
        except Fail as e:
            out.append(Check(name, False, str(e), points=points, expected=e.expected, got=e.got))
            done[name] = False
        except StudentGone as e:
            gone = str(e)
            out.append(Check(name, False, gone, points=points, got="stopped"))
        except Exception as e:  # a grader bug or a value that misbehaves: still one line
            out.append(Check(name, False, f"checking raised {student_error(e)}", points=points))
            done[name] = False
    return out


def close(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * abs(target)


__all__ = ["Fail", "Check", "GradeReport", "need", "call", "program_from", "run_checks", "student_error", "close", "as_student"]
