"""Autograders for the course assignments in ``notebooks/assignments/``.

``collsim grade FILE...`` (the student's .ipynb or .py) runs the file's code cells in a sandboxed process
(:mod:`sim.grade.sandbox`) and checks what they defined from this one: correctness with
:func:`sim.verify` (whose message names the rank and chunk that are wrong), step counts, and time
bounds from the engine. Each assignment is one module (``a1_ring_reduce_scatter`` ... ``a5_debug_hang``)
with a ``check(student)`` function; the instructor notebooks (``notebooks/solutions/``, nbgrader
markers) are the one source the student notebooks are released from (:mod:`sim.grade.release`).
Batches, CSV, Gradescope and feedback files: :mod:`sim.grade.batch`.

>>> from sim.grade import ASSIGNMENTS
>>> sorted(ASSIGNMENTS)
['a1', 'a2', 'a3', 'a4', 'a5']
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .checks import Check, Fail, GradeReport
    from .runner import ASSIGNMENTS, assignment_module, execute_cells, grade

# imported when first used: ``python -m sim.grade.sandbox`` (and .student, .user_file) import this package
# first, and a package that imported them already makes runpy warn on the process's stderr
_LAZY = {"Check": ".checks", "Fail": ".checks", "GradeReport": ".checks", "ASSIGNMENTS": ".runner",
         "assignment_module": ".runner", "execute_cells": ".runner", "grade": ".runner"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["grade", "GradeReport", "Check", "Fail", "ASSIGNMENTS", "assignment_module", "execute_cells"]
