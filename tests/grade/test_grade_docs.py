"""The examples in the docstrings of sim.grade and sim.viz run and say what they print."""
import doctest
import importlib

import pytest

MODULES = ["sim.grade", "sim.grade.checks", "sim.grade.source", "sim.grade.runner", "sim.grade.torus",
           "sim.grade.a1_ring_reduce_scatter", "sim.grade.a2_torus_all_reduce", "sim.grade.a3_ring_tree_sharp",
           "sim.grade.a4_nvls_all_reduce", "sim.grade.a5_debug_hang", "sim.grade.hung_job", "sim.grade.wire",
           "sim.grade.student", "sim.grade.batch", "sim.grade.release", "sim.grade.where",
           "sim.viz", "sim.viz.chunks", "sim.viz.links", "sim.viz.bandwidth", "sim.viz.style", "sim.viz.topology_plot"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
