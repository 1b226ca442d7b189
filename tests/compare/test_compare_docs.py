"""The examples in the docstrings of real.compare and real.measure.demo_run run and say what they claim."""
import doctest
import importlib

import pytest

MODULES = ["real.compare", "real.compare.measured", "real.compare.hostmodel", "real.compare.predict",
           "real.compare.score", "real.compare.calibrate", "real.compare.figures", "real.compare.markdown_report", "real.measure.demo_run"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_compare_commands_do_not_import_torch():
    import subprocess
    import sys
    code = "import sys, sim.cli; sim.cli.build_parser(); import real.compare_cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
