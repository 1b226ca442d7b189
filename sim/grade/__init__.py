"""Autograders for the course assignments in ``notebooks/assignments/``.

``collsim grade FILE`` (FILE: the student's .ipynb or .py) runs the file's code cells in a fresh Python
process with a time limit, then checks what they defined: correctness with :func:`sim.verify` (whose
message names the rank and chunk that are wrong), step counts, and time bounds from the engine. Each
assignment is one module (``a1_ring_reduce_scatter``, ``a2_torus_all_reduce``, ``a3_ring_tree_sharp``)
with a ``check(namespace)`` function; the reference solutions live in ``notebooks/solutions/``.

>>> from sim.grade import ASSIGNMENTS
>>> sorted(ASSIGNMENTS)
['a1', 'a2', 'a3']
"""
from .checks import Check, Fail, GradeReport
from .runner import ASSIGNMENTS, assignment_module, execute_cells, grade

__all__ = ["grade", "GradeReport", "Check", "Fail", "ASSIGNMENTS", "assignment_module", "execute_cells"]
