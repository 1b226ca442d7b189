"""collsim's simulator: collectives as Programs, verified symbolically and timed in simpy.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 20, "ring:n=8", algorithm="ring", protocol="ideal")
>>> r.steps
14

The pieces: :mod:`sim.topology` and :mod:`sim.presets` (where), :mod:`sim.collectives` (what),
:mod:`sim.algorithms` (how, as a :class:`~sim.program.Program`), :mod:`sim.verify` (is it right),
:mod:`sim.engine.fast` (how long, in simpy), :mod:`sim.algorithms.analytic` (the closed forms), :mod:`sim.api` (one call).
``sim`` never imports torch.
"""
from .algorithms import algorithms, build_program
from .api import simulate
from .collectives import COLLECTIVES, get_collective
from .engine.result import Result
from .errors import CollsimError
from .presets import load_topology
from .program import Program
from .topology import Link, Node, Topology
from .verify import VerificationError, verify

__all__ = ["simulate", "algorithms", "build_program", "COLLECTIVES", "get_collective", "CollsimError",
           "load_topology", "Program", "Result", "Link", "Node", "Topology", "VerificationError", "verify"]
__version__ = "0.1.0"
