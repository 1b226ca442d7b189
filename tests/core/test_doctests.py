"""Every docstring example in sim/ and real/compare/ runs, so the documentation cannot rot."""
import doctest
import importlib
import pkgutil

import pytest

import real.compare
import sim


def _modules():
    for pkg in (sim, real.compare):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith("__main__"):
                continue  # running it would start the CLI or the grading child
            yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
