"""The examples in sim.plan's docstrings run and say what they claim."""
import doctest
import importlib

import pytest

MODULES = ["sim.plan", "sim.plan.workload", "sim.plan.layout", "sim.plan.subtopo", "sim.plan.costs",
           "sim.plan.schedule", "sim.plan.step", "sim.plan.plan", "sim.plan.report", "sim.plan.whatif",
           "sim.plan.plot", "sim.plan.flight"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_plan_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, sim.plan, sim.commands.plan, sim.plan.flight, sim.plan.plot; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
