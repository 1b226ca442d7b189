"""Collective algorithms: pure functions that return a :class:`~sim.program.Program`.

Each algorithm lives in its own short module and registers itself with :func:`algorithm`, saying which
collectives it serves and (optionally) what it needs from the topology. :func:`build_program` is the one
way in:

>>> build_program("ring", "all_gather", 4, nchannels=2).nchunks
8

Algorithms never import simpy and never look at timing: the engine and the closed forms do that.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from ..collectives import get_collective
from ..errors import CollsimError
from ..program import Program


@dataclass(frozen=True)
class Algorithm:
    name: str
    builder: Callable[..., Program]
    collectives: tuple[str, ...]
    summary: str
    # requirement(topology, collective_name, nranks) -> None if usable, else the reason it is not
    requirement: Callable | None = None
    # collectives for which cutting data into pipelined pieces shortens the critical path even in the
    # ideal model (trees, chains, in-network reduction); a ring all-reduce is already pipelined across ranks
    pipelined: tuple[str, ...] = ()
    # collectives NCCL itself runs with this algorithm (NCCL_ALGO can select it); () for the textbook
    # algorithms, which NCCL does not have
    nccl: tuple[str, ...] = ()


_REGISTRY: dict[str, Algorithm] = {}

# Modules that define algorithms (imported on first use). One algorithm family per file.
ALGORITHM_MODULES = ("ring", "tree", "collnet", "nvls", "classic", "hierarchical", "alltoall", "pat")


def algorithm(name: str, collectives, summary: str, requirement: Callable | None = None, pipelined=(), nccl=()):
    """Decorator registering ``builder(collective, nranks, *, topology, nchannels, pipeline, root)``.

    ``requirement(topology, collective, nranks)`` returns None when the algorithm can run, else why not.
    ``pipelined``: collectives whose critical path shrinks when the data is cut into pieces.
    ``nccl``: collectives NCCL itself runs with this algorithm (empty: a textbook algorithm).
    """
    def deco(fn):
        _REGISTRY[name] = Algorithm(name, fn, tuple(collectives), summary, requirement, tuple(pipelined), tuple(nccl))
        return fn
    return deco


def algorithms() -> dict[str, Algorithm]:
    for mod in ALGORITHM_MODULES:
        try:
            importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{mod}":
                raise
    # registry order = ALGORITHM_MODULES order, whichever module a caller happened to import first
    rank = {f"{__name__}.{m}": i for i, m in enumerate(ALGORITHM_MODULES)}
    return dict(sorted(_REGISTRY.items(), key=lambda kv: rank.get(kv[1].builder.__module__, len(rank))))


def get_algorithm(name: str) -> Algorithm:
    table = algorithms()
    if name not in table:
        raise CollsimError(f"unknown algorithm {name!r}: choose one of {', '.join(sorted(table))} (or auto/all)")
    return table[name]


def why_not(name: str, collective, nranks: int, topology=None) -> str | None:
    """None if ``name`` can run ``collective`` on ``nranks`` ranks of ``topology``, else the reason."""
    algo = get_algorithm(name)
    coll = get_collective(collective)
    if coll.name not in algo.collectives:
        return f"{name} does not implement {coll.name} (it serves {', '.join(algo.collectives)})"
    if algo.requirement is not None:
        return algo.requirement(topology, coll.name, nranks)
    return None


def in_nccl(name: str, collective) -> bool:
    """Whether NCCL itself runs ``collective`` with algorithm ``name`` (the registry's ``nccl`` field).

    >>> in_nccl("ring", "all_reduce"), in_nccl("recursive_hd", "all_reduce"), in_nccl("ring", "all_to_all")
    (True, False, False)
    """
    table = algorithms()
    return name in table and get_collective(collective).name in table[name].nccl


def candidates(collective, nranks: int, topology=None) -> list[str]:
    """Every registered algorithm that can run ``collective`` here, in registry order."""
    return [name for name in algorithms() if why_not(name, collective, nranks, topology) is None]


def build_program(name: str, collective, nranks: int, *, topology=None, nchannels: int = 1, pipeline: int = 1,
                  root: int = 0) -> Program:
    """Build algorithm ``name``'s Program for ``collective`` on ``nranks`` ranks.

    ``nchannels``: parallel channels (NCCL's rings/trees), each carrying 1/nchannels of the data.
    ``pipeline``: chunks each channel's data is cut into so consecutive steps overlap.
    """
    coll = get_collective(collective)
    if nranks < 2:
        raise CollsimError(f"{coll.name} needs at least 2 ranks, got {nranks}")
    if nchannels < 1 or pipeline < 1:
        raise CollsimError(f"nchannels={nchannels} and pipeline={pipeline} must both be at least 1")
    if coll.rooted and not 0 <= root < nranks:
        raise CollsimError(f"root {root} is not a rank: choose 0..{nranks - 1}")
    reason = why_not(name, coll, nranks, topology)
    if reason:
        raise CollsimError(reason)
    return get_algorithm(name).builder(coll, nranks, topology=topology, nchannels=nchannels, pipeline=pipeline, root=root)
