"""The pre-rewrite oracle: sim/algorithms/* as they were before the chunk-program language.

These are the numpy index-algebra builders (``k = np.where(rs, r - s, ...)``, ``tile()``) that the
built-in algorithms were rewritten from, frozen here verbatim (only their imports changed) so that
tests/algorithms/test_legacy_equivalence.py can check that every rewritten algorithm still builds
exactly the same Program: same op columns in the same order, same chunks, steps, rotation, switches
and params. Never edit them to make a test pass: a difference is a change of behaviour.
"""
from . import classic, collnet, hierarchical, nvls, ring, tree  # noqa: F401,E402  (they register themselves)
from .registry import LEGACY

__all__ = ["LEGACY"]
