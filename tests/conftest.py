"""Shared test settings: a non-interactive matplotlib backend, and a way to run the CLI in-process."""
import os

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def cli(capsys):
    """Run ``collsim ARGS`` in-process; returns (exit_code, stdout, stderr)."""
    from sim.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err
    return run
