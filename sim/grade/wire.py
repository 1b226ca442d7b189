"""What crosses from the student's process to the checker: plain JSON, re-validated on arrival.

The student's process *encodes* what their functions return (:func:`encode`): numbers, strings, lists,
dicts, and :class:`sim.Program` as its op columns (plain integer lists). The checker *decodes* it
(:func:`decode`) with bounded work: a Program is rebuilt with :meth:`sim.Program.from_ops`, which checks
its shape, in the checker's own process, so nothing the student's process sends can be an object with
overridden methods, and nothing it patched (``sim.verify``, a check function) exists on this side.

>>> decode(encode([1, 2.5, "x", {"a": None}]))
[1, 2.5, 'x', {'a': None}]
>>> decode(encode(object()))
Opaque('object')
"""
from __future__ import annotations

import math

MAX_OPS = 2_000_000          # ops in one Program (a2's 4x4 solution has ~3,000; a 1024-rank ring ~2M)
MAX_ITEMS = 200_000          # list items / dict keys in one value
MAX_DEPTH = 16
MAX_TEXT = 100_000           # characters of one string
PROGRAM_COLUMNS = ("src", "dst", "chunk", "step", "channel", "reduce")


class WireError(ValueError):
    """The student's process sent something the checker will not accept (too big, malformed)."""


class Opaque:
    """A value of a type the wire does not carry: only its type name crosses."""

    def __init__(self, type_name: str):
        self.type_name = str(type_name)[:80]

    def __repr__(self) -> str:
        return f"Opaque({self.type_name!r})"


def encode(value, depth: int = 0):
    """Student side: ``value`` as JSON-ready data (raises :class:`WireError` when too big)."""
    import numpy as np

    import sim
    if depth > MAX_DEPTH:
        raise WireError(f"the value is nested more than {MAX_DEPTH} deep")
    if isinstance(value, sim.Program):
        if value.nops > MAX_OPS:
            raise WireError(f"the Program has {value.nops} ops; the grader accepts at most {MAX_OPS}")
        cols = {c: getattr(value, c).astype(int).tolist() for c in PROGRAM_COLUMNS}
        return {"__program__": dict(cols, collective=value.collective.name, nranks=int(value.nranks),
                                    nchunks=int(value.nchunks), algorithm=str(value.algorithm)[:200],
                                    steps=int(value.steps), root=int(value.root),
                                    switches=[str(s)[:200] for s in value.switches])}
    if value is None or isinstance(value, (bool, str)):
        return value if not isinstance(value, str) else value[:MAX_TEXT]
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value) if abs(int(value)) < 1 << 63 else float(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else {"__float__": repr(v)}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return encode(value.item(), depth)
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) > MAX_ITEMS:
            raise WireError(f"a list of {len(value)} items; the grader accepts at most {MAX_ITEMS}")
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            raise WireError(f"a dict of {len(value)} keys; the grader accepts at most {MAX_ITEMS}")
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    return {"__object__": type(value).__name__}


def decode(data, depth: int = 0):
    """Checker side: rebuild a value from :func:`encode`'s data, validating it (:class:`WireError`)."""
    if depth > MAX_DEPTH + 1:
        raise WireError("the value is nested too deep")
    if data is None or isinstance(data, (bool, int, float)):
        return data
    if isinstance(data, str):
        return data[:MAX_TEXT]
    if isinstance(data, list):
        if len(data) > MAX_ITEMS:
            raise WireError("too many list items")
        return [decode(v, depth + 1) for v in data]
    if not isinstance(data, dict) or len(data) != 1:
        raise WireError(f"malformed value {type(data).__name__}")
    (tag, body), = data.items()
    if tag == "__float__" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "__object__":
        return Opaque(body)
    if tag == "__dict__" and isinstance(body, list) and len(body) <= MAX_ITEMS:
        out = {}
        for pair in body:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise WireError("malformed dict")
            key = decode(pair[0], depth + 1)
            if isinstance(key, (list, dict, Opaque)):
                raise WireError("a dict key must be a number or a string")
            out[key] = decode(pair[1], depth + 1)
        return out
    if tag == "__program__" and isinstance(body, dict):
        return decode_program(body)
    raise WireError(f"malformed value (tag {str(tag)[:40]!r})")


def decode_program(body: dict):
    """A :class:`sim.Program` rebuilt, and shape-checked, in this process from plain op columns."""
    import numpy as np

    import sim
    cols = {}
    for c in PROGRAM_COLUMNS:
        col = body.get(c)
        if not isinstance(col, list) or len(col) > MAX_OPS:
            raise WireError(f"Program column {c!r} is missing or longer than {MAX_OPS}")
        if not all(type(x) is int and -(1 << 31) <= x < 1 << 31 for x in col):
            raise WireError(f"Program column {c!r} holds something other than 32-bit integers")
        cols[c] = np.asarray(col, dtype=np.int64)
    if len({len(v) for v in cols.values()}) != 1:
        raise WireError("Program columns have different lengths")
    for k in ("nranks", "nchunks", "steps", "root"):
        if type(body.get(k)) is not int or not 0 <= body[k] < 1 << 31:
            raise WireError(f"Program field {k!r} is not a non-negative integer")
    switches = body.get("switches", [])
    if not (isinstance(switches, list) and len(switches) <= 4096 and all(isinstance(s, str) for s in switches)):
        raise WireError("Program switches must be a list of node names")
    if not isinstance(body.get("collective"), str) or not isinstance(body.get("algorithm"), str):
        raise WireError("Program collective/algorithm must be strings")
    if np.any(cols["channel"] < 0) or np.any(cols["channel"] >= 1 << 15) or np.any((cols["reduce"] != 0) & (cols["reduce"] != 1)):
        raise WireError("Program channel must be 0..32767 and reduce 0 or 1")
    return sim.Program.from_ops(body["collective"], body["nranks"], body["nchunks"], cols["src"], cols["dst"], cols["chunk"],
                                cols["step"], cols["reduce"].astype(bool), algorithm=body["algorithm"][:200],
                                steps=body["steps"], channel=cols["channel"], root=body["root"], switches=tuple(switches))


__all__ = ["encode", "decode", "decode_program", "Opaque", "WireError", "MAX_OPS"]
