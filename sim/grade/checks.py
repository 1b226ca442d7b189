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
import traceback
from dataclasses import asdict, dataclass, field

from ..errors import CollsimError


class Fail(Exception):
    """Raised by a check: the message is shown to the student as is."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str = ""
    skipped: bool = False


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
    def score(self) -> tuple[int, int]:
        return sum(c.ok for c in self.checks), len(self.checks)

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
            lines.append(f"  {tag} {c.name}" + (f": {c.message}" if c.message else ""))
        if verbose and self.output:
            lines.append("  --- your code printed (last lines) ---")
            lines.extend("  | " + l for l in self.output.rstrip().splitlines()[-20:])
        got, total = self.score
        verdict = "all checks pass" if self.passed else ("could not grade" if self.error else f"{total - got} check(s) to fix")
        lines.append(f"score {got}/{total}: {verdict} ({self.seconds:.1f} s)")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "GradeReport":
        d = json.loads(text)
        d["checks"] = tuple(Check(**c) for c in d.get("checks", ()))
        d["warnings"] = tuple(d.get("warnings", ()))
        return cls(**d)


def student_error(e: BaseException) -> str:
    """``ValueError: bad (cell 3, line 4)``: the exception and the innermost place in the student's code."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.startswith("<student"):
            where = f" ({frame.filename[len('<student '):-1]}, line {frame.lineno})"
            break
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}{': ' + text if text else ''}{where}"


def need(ns: dict, name: str, kind: str = "function"):
    """The student's ``name`` (a callable unless ``kind`` is "value"), or :class:`Fail`."""
    if name not in ns:
        example = f"`def {name}(...)`" if kind == "function" else f"`{name} = ...`"
        raise Fail(f"your code defines no `{name}`: write {example} (check the spelling, and that its cell ran without an error)")
    obj = ns[name]
    if kind == "function" and not callable(obj):
        raise Fail(f"`{name}` is a {type(obj).__name__}, not a function")
    return obj


def call(ns: dict, name: str, *args, **kwargs):
    """Call the student's function; their exception becomes a :class:`Fail` that says where it happened."""
    fn = need(ns, name)
    shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise Fail(f"`{name}({shown})` raised NotImplementedError: replace the `raise NotImplementedError` with your code") from None
    except CollsimError as e:
        raise Fail(f"`{name}({shown})` raised a collsim error: {e}") from None
    except Exception as e:  # the student's code may raise anything; report it in one line
        raise Fail(f"`{name}({shown})` raised {student_error(e)}") from None


def program_from(ns: dict, name: str, args: tuple, collective: str, nranks: int, ranks_note: str = ""):
    """Call the student's ``name(*args)`` and check it returned a :class:`sim.Program` for ``collective``
    on ``nranks`` ranks; anything else is a :class:`Fail` saying what came back instead."""
    import sim
    shown = f"`{name}({', '.join(map(repr, args))})`"
    p = call(ns, name, *args)
    if not isinstance(p, sim.Program):
        raise Fail(f"{shown} returned a {type(p).__name__}; return a sim.Program (use sim.Program.from_ops)")
    if p.collective.name != collective:
        raise Fail(f"{shown} returns a Program for {p.collective.name}; pass \"{collective}\" to Program.from_ops")
    if p.nranks != nranks:
        raise Fail(f"{shown} returns a Program for {p.nranks} ranks, not {nranks}{ranks_note}")
    return p


def run_checks(ns: dict, checks) -> list[Check]:
    """Run ``[(name, fn)]`` or ``[(name, fn, [names it needs])]`` in order; a check whose needs failed is
    skipped with the reason."""
    done: dict[str, bool] = {}
    out = []
    for item in checks:
        name, fn, *rest = item
        needs = rest[0] if rest else []
        missing = [n for n in needs if not done.get(n)]
        if missing:
            out.append(Check(name, False, f"skipped until `{missing[0]}` passes", skipped=True))
            done[name] = False
            continue
        try:
            note = fn(ns)
            out.append(Check(name, True, note or ""))
            done[name] = True
        except Fail as e:
            out.append(Check(name, False, str(e)))
            done[name] = False
        except Exception as e:  # a bug in how the student's objects behave (e.g. wrong types), still one line
            out.append(Check(name, False, f"checking raised {student_error(e)}"))
            done[name] = False
    return out


def close(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * abs(target)


__all__ = ["Fail", "Check", "GradeReport", "need", "call", "run_checks", "student_error", "close"]
