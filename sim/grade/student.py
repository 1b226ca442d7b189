"""The student's side of grading: run their cells, then answer the checker's calls, over a pipe.

This module runs in the sandboxed process (:mod:`sim.grade.sandbox` starts it as
``python -m sim.grade.student CONFIG.json``). It executes the code cells one by one in a fresh namespace
(a cell that raises is reported and the next still run, like "Run All" that keeps going), then reads
requests, one JSON line each, from the checker: ``{"call": NAME, "args": [...], "forbid": [...]}`` or
``{"get": NAME}``, and writes one JSON line back with what came of it (:func:`serve`), values encoded by
:func:`sim.grade.wire.encode`. Nothing here is trusted by the checker: the student's code runs in this
process and may change any of it; the checker re-validates every reply.

:class:`LocalStudent` answers the same requests in the calling process (for tests and quick checks of
trusted code), through the same encode/decode round trip.

>>> s = LocalStudent({"f": lambda x: x + 1, "k": 3})
>>> s.names["f"], s.names["k"], s.call("f", (1,))
('function', 'int', {'value': 2})
"""
from __future__ import annotations

import builtins
import errno
import json
import os
import sys
from contextlib import ExitStack, contextmanager

from .where import student_error
from .wire import WireError, encode

MAX_NAMES = 5000
MAX_MESSAGE = 2000


def execute_cells(cells: list[tuple[str, str]]) -> tuple[dict, list[str]]:
    """Run code cells in order in a fresh namespace; returns (namespace, notes about cells that failed)."""
    ns: dict = {"__name__": "__student__", "__builtins__": builtins, "display": lambda *a, **k: None}
    notes = []
    for label, code in cells:
        try:
            compiled = compile(code, f"<student {label}>", "exec")
        except SyntaxError as e:
            notes.append(f"{label} has a syntax error at line {e.lineno}: {e.msg}; it was skipped")
            continue
        try:
            exec(compiled, ns)  # the student's own code, run on purpose in this throwaway process
        except OSError as e:
            why = (" (it wrote more than the grader's output limit: print less)" if e.errno == errno.EFBIG else "")
            notes.append(f"{label} raised {student_error(e)}{why}; the cells after it still ran")
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: a cell calling exit() must not end grading
            notes.append(f"{label} raised {student_error(e)}; the cells after it still ran")
    return ns, notes


def names_of(ns: dict) -> dict[str, str]:
    """What the cells defined: name -> "function" or the value's type name."""
    out = {}
    for k, v in list(ns.items())[: MAX_NAMES * 4]:
        if isinstance(k, str) and not k.startswith("__") and len(out) < MAX_NAMES:
            out[k[:200]] = "function" if callable(v) else type(v).__name__[:80]
    return out


def _refuse(what: str):
    def refuse(*_a, **_k):
        raise RuntimeError(f"predict with a formula: your prediction functions may not run the {what} "
                           f"(the grader compares your answer with it)")
    return refuse


@contextmanager
def _patched(targets: list[tuple[object, str]], refusal):
    """Each ``(object, attribute)`` of ``targets`` replaced by ``refusal`` while the block runs."""
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr in targets]
    for obj, attr in targets:
        setattr(obj, attr, refusal)
    try:
        yield
    finally:
        for obj, attr, value in saved:
            setattr(obj, attr, value)


@contextmanager
def forbid_simulator():
    import sim
    import sim.api
    import sim.engine.fast
    with _patched([(sim, "simulate"), (sim.api, "simulate"), (sim.api, "run_engine"), (sim.engine, "simulate_program"),
                   (sim.engine, "run_program"), (sim.engine.fast, "simulate_program")],
                  _refuse("simulator")):
        yield


@contextmanager
def forbid_analyzer():
    import sim.flight.analyze
    import sim.flight.scenarios
    with _patched([(sim.flight.analyze, "analyze"), (sim.flight.scenarios, "analyze")], _refuse("flight-recorder analyzer")):
        yield


def _refuse_library(*_a, **_k):
    raise RuntimeError("write the algorithm yourself: the function you hand in may not build the library's own "
                       "Program for it (sim.build_program, sim.algorithms' builders), which the grader compares yours with")


@contextmanager
def forbid_library_algorithms(names):
    """The library's builders of the algorithms ``names`` refuse while the student's function runs: a one-line
    ``return sim.build_program("ring", "reduce_scatter", n)`` got full marks on a1. Every way to them is
    closed (``sim.build_program`` looks the builder up in the registry; the modules' own names are patched
    too). Not a proof: code that copies a builder's source is not caught, and the checks' other properties
    still hold for what it returns."""
    import dataclasses
    import importlib
    alg = importlib.import_module("sim.algorithms")   # the package: sim.algorithms is also the name of a function
    table = alg.algorithms()   # imports every algorithm module, so each builder below is the registered one
    own = {id(table[n].builder) for n in names if n in table}   # by identity: any value may sit in a module
    targets = [(mod, attr) for name, mod in list(sys.modules.items()) if name.startswith("sim.algorithms.")
               for attr, value in list(vars(mod).items()) if id(value) in own]
    registry = dict(alg._REGISTRY)
    alg._REGISTRY.update({n: dataclasses.replace(registry[n], builder=_refuse_library) for n in names if n in registry})
    try:
        with _patched(targets, _refuse_library):
            yield
    finally:
        alg._REGISTRY.clear()
        alg._REGISTRY.update(registry)


FORBID = {"simulator": forbid_simulator, "analyzer": forbid_analyzer}
LIBRARY = "library:"   # "library:ring+nvls": those algorithms' builders refuse (forbid_library_algorithms)


def serve(ns: dict, request: dict) -> dict:
    """One request from the checker, answered from the student's namespace ``ns``."""
    from ..errors import CollsimError
    if "get" in request:
        name = request["get"]
        if name not in ns:
            return {"missing": True}
        try:
            return {"value": encode(ns[name])}
        except WireError as e:
            return {"error": "TooBig", "text": str(e)}
    name, args = request.get("call"), request.get("args") or []
    fn = ns.get(name)
    if not callable(fn):
        return {"missing": True}
    try:
        with ExitStack() as stack:
            for what in request.get("forbid") or ():
                if str(what).startswith(LIBRARY):
                    stack.enter_context(forbid_library_algorithms(str(what)[len(LIBRARY):].split("+")))
                else:
                    stack.enter_context(FORBID[what]())
            value = fn(*args)
    except NotImplementedError:
        return {"error": "NotImplementedError", "text": "NotImplementedError"}
    except BaseException as e:  # the student's code may raise anything, exit() included
        return {"error": type(e).__name__[:80], "text": student_error(e)[:MAX_MESSAGE],
                "collsim": isinstance(e, CollsimError), "message": str(e)[:MAX_MESSAGE]}
    try:
        return {"value": encode(value)}
    except WireError as e:
        return {"error": "TooBig", "text": str(e)}
    except Exception as e:  # an object whose attributes misbehave while being read
        return {"error": "Unreadable", "text": f"the grader could not read what it returned ({student_error(e)})"}


class LocalStudent:
    """The student interface in this process: cells already run into ``ns``. Only for trusted code."""

    def __init__(self, ns: dict, notes=()):
        self.ns, self.notes = ns, list(notes)
        self.names = names_of(ns)

    def call(self, name: str, args: tuple = (), forbid=()) -> dict:
        return json.loads(json.dumps(serve(self.ns, {"call": name, "args": list(args), "forbid": list(forbid)})))

    def get(self, name: str) -> dict:
        return json.loads(json.dumps(serve(self.ns, {"get": name})))


def send_line(out, obj) -> None:
    """One JSON object as one line on the pipe to the trusted process."""
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


def main(argv: list[str]) -> int:
    """The sandboxed process: ``python -m sim.grade.student CONFIG.json``."""
    with open(argv[0]) as f:
        cfg = json.load(f)
    requests, replies = os.fdopen(cfg["request_fd"], "rb"), os.fdopen(cfg["reply_fd"], "wb")
    ns, notes = execute_cells([tuple(c) for c in cfg["cells"]])
    send_line(replies, {"ready": True, "notes": notes, "names": names_of(ns)})
    for line in requests:
        try:
            request = json.loads(line)
        except ValueError:
            return 3
        send_line(replies, serve(ns, request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["execute_cells", "serve", "send_line", "LocalStudent", "names_of", "FORBID"]
