"""The one way the predictors time a Program: pick the engine by name.

``default`` is :mod:`sim.engine` (batched, symmetry-aware, fast); ``reference`` is
:mod:`sim.reference_engine` (one SimPy process per op, for reading and as the oracle). Both return an
:class:`~sim.engine.EngineRun` and agree to rounding (tests compare them on every algorithm).

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> p, topo = build_program("tree", "all_reduce", 4), load_topology("switch:n=4")
>>> [round(run_program(p, topo, 1e6, engine=e).time_us, 6) for e in ENGINES]
[34.0, 34.0]
"""
from __future__ import annotations

from .errors import CollsimError
from .protocols import IDEAL

ENGINES = ("default", "reference")


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise CollsimError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    return engine


def run_program(program, topo, nbytes: float, protocol=IDEAL, *, engine: str = "default"):
    """Time ``program`` moving ``nbytes`` on ``topo`` with the named engine."""
    if check_engine(engine) == "reference":
        from .reference_engine import simulate_program as reference
        return reference(program, topo, nbytes, protocol)
    from .engine import simulate_program
    return simulate_program(program, topo, nbytes, protocol)
