"""``collsim verify FILE.py``: the user's file only *builds* programs, sandboxed; they are verified here.

The file runs as a student's code does in ``collsim grade`` (:class:`sim.grade.sandbox.Session`: bubblewrap
with bounded writable places, rlimits, a supervisor that kills all it starts; elsewhere as you, with a
one-line notice). Its process (``python -m sim.grade.user_file CONFIG``, :func:`main`) imports the file's
code, says which collectives it builds, then answers ``build(collective, nranks)`` calls with each
returned Program as plain op columns (:mod:`sim.grade.wire`). This process rebuilds every Program from
those columns, checks it is the collective and world size asked for, and verifies it itself
(:func:`run_user_file`). So nothing the file does in its own process (write on the pipe, patch
``sim.verify``, return an object whose methods lie) can make a program count as verified: the file used
to run the verifier in its own process and report the verdict on a pipe it could write to, so a file
that built nothing could print "7 of 7 programs verified".

The user's prints go to collsim's stderr. What this module adds besides the sandbox: an ``exit()``, a
crash or an endless loop (``--timeout``) ends as a reported failure of the program being built.
"""
from __future__ import annotations

import json
import os
import sys

from ..errors import CollsimError
from .quote import one_line

MAX_FILE_BYTES = 16 << 20     # a user's algorithm file; far more than any algorithm needs
MODULE_NAME = "collsim_user_algorithm"


def _judge(reply: dict, collective: str, nranks: int) -> tuple[bool, str]:
    """(verified, message) for the answer to ``build(collective, nranks)``: the Program is rebuilt from its
    columns and verified in this process; anything else is a failure that says what came back."""
    from ..io.user_algorithm import program_mismatch
    from ..prediction.budget import check_memory
    from ..program import Program
    from ..verify import verify
    from .wire import Opaque, WireError, decode
    call = f"build({collective!r}, {nranks})"
    if "error" in reply:
        if reply.get("error") == "TooBig":
            return False, f"{call} returned more than collsim reads from a sandboxed process: {one_line(reply.get('text', ''), 300)}"
        if reply.get("collsim"):
            return False, one_line(reply.get("message", ""), 1000)
        return False, f"build raised {one_line(reply.get('text', reply.get('error')), 1000)}"
    if "value" not in reply:
        return False, f"{call}: its process sent an answer collsim cannot read (did the file write to collsim's pipe?)"
    try:
        value = decode(reply["value"])
    except (WireError, CollsimError) as e:
        return False, f"{call} returned a malformed Program: {one_line(e, 500)}"
    if not isinstance(value, Program):
        kind = value.type_name if isinstance(value, Opaque) else type(value).__name__
        return False, f"build() returned {one_line(kind, 80)}, not a sim.Program"
    why = program_mismatch(value, collective, nranks)
    if why:
        return False, why
    # the symbolic state: one nranks-bit set per (rank or switch, chunk); refuse what would not fit here
    need = value.nagents * value.nchunks * (nranks // 8 + 36) + value.nops * 256
    try:
        check_memory(f"verifying {call}'s program ({value.nchunks} chunks)", need, None,
                     "build programs with fewer chunks, or verify fewer ranks")
        verify(value)
    except CollsimError as e:
        return False, one_line(e, 2000)
    return True, ""


def _read_code(path: str) -> str:
    from ..io.safe_io import read_input
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give a built-in algorithm name or a .py file")
    return read_input(path, "algorithm file", MAX_FILE_BYTES)


def run_user_file(path: str, jobs: list[tuple[str, int]], timeout_s: float) -> tuple[list[dict], str | None]:
    """Build ``jobs`` (collective, world size) with the file's ``build`` in the sandbox and verify each program
    here. Returns (one ``{"collective", "nranks", "ok", "message"}`` per program built, a failure of the
    whole run or None); a file that does not import or defines no ``build`` raises :class:`CollsimError`."""
    import tempfile

    from .sandbox import Limits, Session, StudentGone
    code = _read_code(path)
    results: list[dict] = []
    current: tuple[str, int] | None = None
    limits = Limits(wall_s=timeout_s)
    try:   # the file's prints go straight to our stderr; where that is no file (a test capturing it), relayed after
        sink: int | None = sys.stderr.fileno()
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        sink = None
    with tempfile.TemporaryDirectory(prefix="collsim-verify-") as tmp:
        try:
            session = Session([(path, code)], tmp, limits, hidden=(os.path.dirname(os.path.abspath(path)),),
                              module="sim.grade.user_file", output=sink, what=path)
        except StudentGone as e:
            _relay(os.path.join(tmp, "output.txt"), sink)
            return results, _gone(path, e, None, timeout_s, e.status)
        gone: StudentGone | None = None
        try:
            ready = session.ready
            if "fatal" in ready:   # the file does not import, or defines no build(): bad input, one line
                raise CollsimError(one_line(ready["fatal"], 2000))
            supported = ready.get("supported")
            if ready.get("ready") is not True or not isinstance(supported, list):
                return results, (f"{path}: its process sent collsim something that is not an answer (did the file "
                                 "write to collsim's pipe?); nothing it sent counts as verified")
            for collective, n in jobs:
                if collective not in supported:
                    continue
                current = (collective, n)
                ok, message = _judge(session.call("build", (collective, n)), collective, n)
                results.append({"collective": collective, "nranks": n, "ok": ok, "message": message})
        except StudentGone as e:
            gone = e
        finally:
            session.close()
            _relay(session.output_file, sink)
        if gone is not None:
            return results, _gone(path, gone, current, timeout_s, session.status)
    return results, None


def _relay(output_file: str, sink: int | None) -> None:
    """What the file printed, copied to ``sys.stderr`` where it could not write there itself (its last 64 KB)."""
    if sink is not None or not os.path.exists(output_file):
        return
    with open(output_file, "rb") as f:
        f.seek(max(0, os.path.getsize(output_file) - (64 << 10)))
        text = f.read().decode(errors="replace")
    if text:
        sys.stderr.write(text)


def _gone(path: str, e, current: tuple[str, int] | None, timeout_s: float, status: int | None) -> str:
    """Why the run ended before every program was built: the time limit, or the process ended."""
    where = f"build{current}" if current else "while importing the file"
    if e.timed_out:
        return (f"{path} did not finish within --timeout {timeout_s:g} s ({'in ' if current else ''}{where}): an endless "
                "loop? Give a longer --timeout if it is just slow")
    if status is None:
        how = "stopped answering"
    elif status > 128:
        how = f"was killed by signal {status - 128}"
    else:
        how = f"exited with status {status}"
    return f"{path} {how} {'in ' if current else ''}{where}, before every program was verified: a program that exits verifies nothing"


def main(argv: list[str]) -> int:
    """The sandboxed process: import the file's code, then answer build calls (:func:`sim.grade.student.serve`)."""
    import types

    from ..collectives import COLLECTIVES
    from .student import send_line, serve
    from .where import student_error
    with open(argv[0]) as f:
        cfg = json.load(f)
    requests, replies = os.fdopen(cfg["request_fd"], "rb"), os.fdopen(cfg["reply_fd"], "wb")
    (label, code), = cfg["cells"]
    module = types.ModuleType(MODULE_NAME)
    sys.modules[MODULE_NAME] = module   # as an import does (dataclasses, pickling look the module up)
    try:
        exec(compile(code, f"<student {label}>", "exec"), module.__dict__)  # the user's code, run on purpose here
    except SyntaxError as e:
        send_line(replies, {"fatal": f"{label} failed to import: SyntaxError: {e.msg} (line {e.lineno})"})
        return 0
    except Exception as e:  # an exit() is not caught: the process ends, and the checker says with what status
        send_line(replies, {"fatal": f"{label} failed to import: {student_error(e)}"})
        return 0
    build = module.__dict__.get("build")
    if not callable(build):
        send_line(replies, {"fatal": f"{label} defines no function build(collective, nranks) returning a sim.Program"})
        return 0
    supported = module.__dict__.get("COLLECTIVES", list(COLLECTIVES))
    try:
        names = [str(c) for c in list(supported)[:100]]
    except Exception as e:
        send_line(replies, {"fatal": f"{label}: COLLECTIVES is not a list of collective names ({student_error(e)})"})
        return 0
    send_line(replies, {"ready": True, "supported": names})
    for line in requests:
        try:
            request = json.loads(line)
        except ValueError:
            return 3
        send_line(replies, serve({"build": build}, request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["run_user_file", "main"]
