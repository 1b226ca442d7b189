"""Fixtures for the evidence tests: the published traces (../shared/traces, or $COLLSIM_TRACES) and a
CPU trace recorded here from two gloo ranks."""
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def gloo_trace(tmp_path_factory):
    """A folder with rank0.trace.json and rank1.trace.json recorded by record_gloo_trace.py."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo") / "trace"
    out.mkdir()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("record_gloo_trace.py")), str(out)],
                       capture_output=True, text=True, timeout=180, env=env, check=False)
    if p.returncode:
        pytest.skip(f"could not record a gloo trace here: {p.stderr.strip()[-300:]}")
    return out
