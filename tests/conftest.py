"""Shared test settings: a non-interactive matplotlib backend, a way to run the CLI in-process, and a CPU
profiler trace recorded from two gloo ranks (tests/evidence). The evidence tests keep no conftest.py of
their own: a second module named ``conftest`` would shadow tests/reliability's helpers when both folders
are collected in one run."""
import os
import subprocess
import sys
from pathlib import Path

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


@pytest.fixture(scope="session")
def gloo_trace(tmp_path_factory):
    """A folder with rank0.trace.json and rank1.trace.json recorded by record_gloo_trace.py."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo") / "trace"
    out.mkdir()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    p = subprocess.run([sys.executable, str(Path(__file__).parent / "evidence" / "record_gloo_trace.py"), str(out)],
                       capture_output=True, text=True, timeout=180, env=env, check=False)
    if p.returncode:
        pytest.skip(f"could not record a gloo trace here: {p.stderr.strip()[-300:]}")
    return out
