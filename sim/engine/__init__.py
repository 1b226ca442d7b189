"""The discrete-event engines: time a Program on a Topology.

* :mod:`sim.engine.fast` (``default``): batched, symmetry-aware; its event loop is :mod:`sim.engine.loop`
  and its symmetry search :mod:`sim.engine.symmetry`.
* :mod:`sim.engine.reference` (``reference``): one SimPy process per op and a ``Link`` (a
  ``simpy.Resource`` and its own state) per link, written to be read in a lecture, and the oracle for
  the fast one. ``docs/engine.md`` walks one ring step through both.

Both return an :class:`~sim.engine.fast.EngineRun` and agree to rounding (tests compare them on every
algorithm). :func:`run_program` is the one way the predictors call an engine.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> p, topo = build_program("tree", "all_reduce", 4), load_topology("switch:n=4")
>>> [round(run_program(p, topo, 1e6, engine=e).time_us, 6) for e in ENGINES]
[34.0, 34.0]
"""
from __future__ import annotations

from ..errors import CollsimError
from .fast import EngineRun, simulate_program
from .transfer import IDEAL

ENGINES = ("default", "reference")


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise CollsimError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    return engine


def run_program(program, topo, nbytes: float, protocol=IDEAL, *, engine: str = "default"):
    """Time ``program`` moving ``nbytes`` on ``topo`` with the named engine, once per input
    (:mod:`sim.engine.runs` keeps recent runs and counts those made; the result is shared: read only)."""
    from .runs import timed
    return timed(_run, program, topo, nbytes, protocol, engine=check_engine(engine))


def _run(program, topo, nbytes: float, protocol, *, engine: str):
    if engine == "reference":
        from .reference import simulate_program as reference  # only when asked: it is slow
        return reference(program, topo, nbytes, protocol)
    return simulate_program(program, topo, nbytes, protocol)


__all__ = ["ENGINES", "EngineRun", "check_engine", "run_program", "simulate_program"]
