"""Drive ``collsim`` as a user would: a subprocess, its exit status, its stderr, and a time limit."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def user(tmp_path):
    """``user(*args, timeout=60)`` runs ``python -m sim ARGS`` in ``tmp_path``; returns (rc, stdout, stderr)."""
    def run(*args, timeout=60, env=None):
        full_env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
        p = subprocess.run([sys.executable, "-m", "sim", *map(str, args)], capture_output=True, text=True,
                           timeout=timeout, cwd=tmp_path, env=full_env, start_new_session=True)
        return p.returncode, p.stdout, p.stderr
    return run


def refused(result, *words):
    """A clean refusal: exit 2, one ``collsim: error:`` line on stderr naming ``words``, no traceback."""
    rc, out, err = result
    assert "Traceback" not in out + err, err
    assert rc == 2, (rc, out[-500:], err[-500:])
    # where bubblewrap is missing, code that is not ours runs with a one-line warning first ("not contained:
    # ..."): that is the sandbox saying what it cannot do, not part of the refusal
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("not contained: ")]
    assert len(lines) == 1 and lines[0].startswith("collsim: error: "), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]
