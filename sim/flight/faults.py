"""Faults to inject into a simulated workload.

Rank faults address "the ``call``-th collective rank ``rank`` issues" (0-based, counting collectives only,
over all steps; :meth:`Workload.calls` lists them):

- ``skip``: the rank does not call it (its later calls then take earlier sequence ids);
- ``wrong_collective``: it calls ``collective`` instead;
- ``size``: it passes ``nbytes`` (or ``factor`` times the size);
- ``dtype``: it passes ``dtype`` (if the byte count changes, the collective hangs; if not, NCCL would
  reduce the bytes as the wrong type and complete: silent corruption, still visible in the records);
- ``straggler``: it is busy ``delay_us`` more just before that call;
- ``crash``: the rank dies at ``at_us`` (it writes no dump, as a killed process cannot).

Link faults name a link by the two ranks whose GPUs it joins (``ranks: [a, b]``; with a topology, the
route between them, both ways), or with a topology by its labels (``links: ["gpu2->switch"]``), and act
on collectives whose group's ring (members in rank order, wrapping round) uses it:

- ``degraded_link``: from ``at_us`` on, the link keeps ``bandwidth_fraction`` of its bandwidth;
- ``link_down``: from ``at_us`` on it carries nothing. If another route exists (``reroute: true``, or
  ``auto`` with a topology that has one) traffic takes it at ``reroute_bandwidth_fraction`` of the
  bandwidth; otherwise collectives that need it never complete (a hang).

>>> f = parse_faults([{"kind": "skip", "rank": 2, "call": 1}])
>>> f[0]
RankFault(kind='skip', rank=2, call=1, collective=None, nbytes=None, factor=None, dtype=None, delay_us=0.0)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import CollsimError
from ..io.validation import MAX_RANKS, MAX_US, number, whole
from ..units import parse_size
from .rank_workload import COLLECTIVES, DTYPES, Call, Compute, Workload

RANK_FAULTS = ("skip", "wrong_collective", "size", "dtype", "straggler")
KINDS = RANK_FAULTS + ("crash", "degraded_link", "link_down")


@dataclass(frozen=True)
class RankFault:
    """A fault in one rank's program at its ``call``-th collective."""
    kind: str
    rank: int
    call: int
    collective: str | None = None
    nbytes: int | None = None
    factor: float | None = None
    dtype: str | None = None
    delay_us: float = 0.0


@dataclass(frozen=True)
class Crash:
    """Rank ``rank`` dies at ``at_us``."""
    rank: int
    at_us: float
    kind: str = "crash"


@dataclass(frozen=True)
class LinkFault:
    """The link between the GPUs of ranks ``a`` and ``b`` degrades or goes down at ``at_us``.

    ``bandwidth_fraction`` is what is left (0 for down); ``reroute`` is True/False/"auto" (down only)."""
    kind: str
    a: int
    b: int
    at_us: float = 0.0
    bandwidth_fraction: float = 0.0
    reroute: object = "auto"
    reroute_bandwidth_fraction: float = 0.5
    links: tuple = ()  # topology link labels ("gpu2->switch") instead of the route between a and b


def _rank(value, kind: str, low: int = 0) -> int:
    """A rank named in a fault: a whole number (1.7 is refused, not cut to 1), checked against the world later."""
    return whole(value, f"fault {kind!r} rank", low=low, high=MAX_RANKS)


def _need(d: dict, key: str, kind: str):
    if key not in d:
        raise CollsimError(f"fault {kind!r} needs {key}: (see `sim.flight.faults` for the fields)")
    return d[key]


def parse_faults(raw: list | None, world_size: int | None = None) -> list:
    """Fault objects from their YAML/dict form (a list of dicts with ``kind``)."""
    shape = "faults must be a list of mappings like {kind: skip, rank: 2, call: 3}"
    if raw is not None and not isinstance(raw, (list, tuple)):
        raise CollsimError(f"{shape}, not {type(raw).__name__} {raw!r}")
    out = []
    for d in raw or []:
        if not isinstance(d, dict):
            raise CollsimError(f"{shape}; item {d!r} is a {type(d).__name__}")
        if d.get("kind") not in KINDS:
            raise CollsimError(f"fault {d!r} has no known kind: use kind: one of {', '.join(KINDS)}")
        kind = d["kind"]
        if kind in RANK_FAULTS:
            f = RankFault(kind, _rank(_need(d, "rank", kind), kind), whole(_need(d, "call", kind), f"fault {kind!r} call", low=0, high=1 << 40))
            if kind == "wrong_collective":
                op = _need(d, "collective", kind)
                if op not in COLLECTIVES:
                    raise CollsimError(f"fault collective {op!r} unknown: use one of {', '.join(COLLECTIVES)}")
                f = replace(f, collective=op)
            elif kind == "size":
                if "nbytes" not in d and "factor" not in d:
                    raise CollsimError("fault 'size' needs nbytes: N or factor: F")
                f = replace(f, nbytes=parse_size(d["nbytes"]) if "nbytes" in d else None,
                            factor=number(d["factor"], "fault size factor", low=0, low_open=True, high=1e6) if "factor" in d else None)
            elif kind == "dtype":
                dt = _need(d, "dtype", kind)
                if dt not in DTYPES:
                    raise CollsimError(f"fault dtype {dt!r} unknown: use one of {', '.join(DTYPES)}")
                f = replace(f, dtype=dt)
            elif kind == "straggler":
                f = replace(f, delay_us=number(_need(d, "delay_us", kind), "straggler delay_us", high=MAX_US))
                if f.delay_us < 0:
                    raise CollsimError(f"straggler delay_us {f.delay_us} is negative: give a delay >= 0")
        elif kind == "crash":
            f = Crash(_rank(_need(d, "rank", kind), kind), number(_need(d, "at_us", kind), "crash at_us", low=0, high=MAX_US))
        else:
            pair = d["ranks"] if "ranks" in d else (-1, -1)
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise CollsimError(f"fault {kind!r}: ranks must be a pair [a, b], not {str(pair)[:60]}")
            a, b = pair
            if "ranks" not in d and "links" not in d:
                raise CollsimError(f"fault {kind!r} needs ranks: [a, b] (or links: [labels] with a topology)")
            frac = 0.0 if kind == "link_down" else number(_need(d, "bandwidth_fraction", kind), "bandwidth_fraction", low=0, high=1)
            if kind == "degraded_link" and not 0 < frac <= 1:
                raise CollsimError(f"bandwidth_fraction {frac} must be in (0, 1]: it is the share of bandwidth left")
            f = LinkFault(kind, _rank(a, kind, -1), _rank(b, kind, -1), number(d.get("at_us", 0.0), f"{kind} at_us", low=0, high=MAX_US),
                          frac, d.get("reroute", "auto"),
                          number(d.get("reroute_bandwidth_fraction", 0.5), "reroute_bandwidth_fraction", low=0, high=1),
                          tuple(d.get("links", ()) if isinstance(d.get("links", ()), (list, tuple)) else ()))
        for r in ([f.rank] if hasattr(f, "rank") else [f.a, f.b] if "ranks" in d else []):
            if world_size is not None and not 0 <= r < world_size:
                raise CollsimError(f"fault {kind!r} names rank {r}: ranks are 0..{world_size - 1}")
        out.append(f)
    return out


def apply_rank_faults(workload: Workload, faults: list) -> Workload:
    """The workload with each :class:`RankFault` applied to its rank's program (others untouched)."""
    programs = [list(p) for p in workload.programs]
    # Highest call index first, so a skip does not renumber the calls a later fault names.
    for f in sorted((f for f in faults if isinstance(f, RankFault)), key=lambda f: -f.call):
        positions = [i for i, item in enumerate(programs[f.rank]) if isinstance(item, Call)]
        if not 0 <= f.call < len(positions):
            raise CollsimError(f"fault {f.kind!r}: rank {f.rank} makes {len(positions)} collective calls, "
                               f"so call must be in 0..{len(positions) - 1}")
        i = positions[f.call]
        c = programs[f.rank][i]
        note = f"rank {f.rank} call {f.call}: {f.kind}"
        if f.kind == "skip":
            programs[f.rank][i] = Compute(0.0, f"rank {f.rank} skips call {f.call} ({c.op})")
        elif f.kind == "wrong_collective":
            programs[f.rank][i] = replace(c, op=f.collective, nbytes=0 if f.collective == "barrier" else c.nbytes,
                                          note=f"{note}: {f.collective} instead of {c.op}")
        elif f.kind == "size":
            nbytes = f.nbytes if f.nbytes is not None else int(c.nbytes * f.factor)
            esize = DTYPES[c.dtype][1]
            programs[f.rank][i] = replace(c, nbytes=nbytes - nbytes % esize,
                                          note=f"{note}: {nbytes - nbytes % esize} B instead of {c.nbytes} B")
        elif f.kind == "dtype":
            # the same element count in another type: what a forgotten .float() does
            count = c.nbytes // DTYPES[c.dtype][1]
            programs[f.rank][i] = replace(c, dtype=f.dtype, nbytes=count * DTYPES[f.dtype][1],
                                          note=f"{note}: {f.dtype} instead of {c.dtype}")
        elif f.kind == "straggler":
            programs[f.rank].insert(i, Compute(f.delay_us, f"{note}: delayed {f.delay_us / 1e3:g} ms before it"))
    return Workload(workload.world_size, tuple(tuple(p) for p in programs), workload.groups)
