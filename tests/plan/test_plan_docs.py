"""The examples in sim.planning's docstrings run and say what they claim."""
import doctest
import importlib

import pytest

MODULES = ["sim.planning", "sim.planning.training_workload", "sim.planning.layout", "sim.planning.subtopo", "sim.planning.costs",
           "sim.planning.schedule", "sim.planning.step", "sim.planning.planner", "sim.planning.plan_report", "sim.planning.cluster_whatif",
           "sim.planning.plot", "sim.planning.flight_export"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_plan_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, sim.planning, sim.commands.plan, sim.planning.flight_export, sim.planning.plot; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
