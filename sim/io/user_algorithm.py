"""A user's algorithm file in this process, and what its answer must be.

:func:`load_user_builder` imports a user's file here (``bench --impl program:FILE.py`` runs your own code on
purpose, in every rank); :func:`program_mismatch` says why a Program is not the answer asked for. Running a
file's ``build()`` away from collsim, with a time limit and the grader's sandbox, and verifying what it built
in collsim's own process, is :mod:`sim.grade.user_file` (``collsim verify FILE.py`` and the bench's check
before any rank starts).
"""
from __future__ import annotations

import importlib.util
import os

from ..collectives import COLLECTIVES
from ..errors import CollsimError


def load_user_builder(path: str):
    """Import a user's algorithm file (their own code, run on purpose) and return (build, collectives)."""
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give a built-in algorithm name or a .py file")
    spec = importlib.util.spec_from_file_location("collsim_user_algorithm", path)
    if spec is None or spec.loader is None:
        raise CollsimError(f"{path} is not a Python file Python can import: give a .py file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the student's code: report its error in one line
        raise CollsimError(f"{path} failed to import: {type(e).__name__}: {e}") from None
    build = getattr(module, "build", None)
    if not callable(build):
        raise CollsimError(f"{path} defines no function build(collective, nranks) returning a sim.Program")
    return build, list(getattr(module, "COLLECTIVES", COLLECTIVES))


def program_mismatch(program, collective: str, nranks: int) -> str | None:
    """Why ``program`` is not an answer to "build ``collective`` on ``nranks`` ranks" (None when it is)."""
    from ..program import Program
    if not isinstance(program, Program):
        return f"build() returned {type(program).__name__}, not a sim.Program"
    if program.collective.name != collective:
        return f"build({collective!r}, {nranks}) returned a {program.collective.name} program, not {collective}"
    if program.nranks != nranks:
        return f"build({collective!r}, {nranks}) returned a program for {program.nranks} ranks, not {nranks}"
    return None
