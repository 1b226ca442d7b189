"""bench: nothing listens on the network for a local run, options travel in a file, a stopped rank is
named, stale torchrun variables are refused."""
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, refused

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="bench needs torch (pip install torch==2.13.0)")


@pytest.mark.parametrize("env", [{"RANK": "5", "WORLD_SIZE": "2"},
                                 {"RANK": "5", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "LOCAL_RANK": "0"},
                                 {"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "LOCAL_RANK": "0"}])
def test_stale_torchrun_variables_are_refused(user, env):
    refused(user("bench", "--backend", "gloo", "-b", "1K", "-e", "1K", env=env), "torchrun")


def test_options_travel_in_a_private_file_not_the_environment(monkeypatch):
    """-b 64K -e 1G -i 64K is 16,384 sizes: as an environment variable that is 'Argument list too long'."""
    from real.measure import launch
    from real.measure.options import BenchOptions
    seen = []

    class FakeRank:
        def __init__(self, cmd, env, **kw):
            path = env[launch.OPTIONS_FILE_VAR]
            seen.append((env, os.stat(path).st_mode & 0o777, os.path.getsize(path), kw.get("pass_fds")))
            self.pid, self.returncode = os.getpid(), 0

        def poll(self):
            return 0

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(launch.subprocess, "Popen", FakeRank)
    monkeypatch.setattr(launch.os, "killpg", lambda *a: None)
    sizes = tuple(range(64 << 10, (1 << 30) + 1, 64 << 10))
    assert launch.launch_local(BenchOptions(sizes=sizes, nprocs=2)) == 0
    assert len(seen) == 2
    for env, mode, size, _ in seen:
        assert mode == 0o600 and size > 16384 * 6
        assert all(len(v) < 4096 for v in env.values() if isinstance(v, str) and not v.startswith(ROOT))
        assert env["MASTER_ADDR"] == "127.0.0.1"
    assert seen[0][3] and not seen[1][3]  # only rank 0 gets the loopback listening socket
    assert not os.path.exists(seen[0][0][launch.OPTIONS_FILE_VAR])  # removed after the run


def _tree(pid):
    rows = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout.split("\n")
    kids = {}
    for line in rows:
        if line.strip():
            p, pp = map(int, line.split())
            kids.setdefault(pp, []).append(p)
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        seen.add(p)
        todo += kids.get(p, [])
    return seen


@needs_torch
@pytest.mark.slow
def test_local_bench_listens_on_loopback_only_and_names_a_stopped_rank(tmp_path):
    if not os.path.exists("/proc/self/stat") or subprocess.run(["which", "ss"], capture_output=True).returncode:
        pytest.skip("needs Linux /proc and ss")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    bench = subprocess.Popen([sys.executable, "-m", "sim", "bench", "--backend", "gloo", "--nprocs", "2", "-b", "1K",
                              "-e", "1K", "-n", "100000000", "-w", "1", "--timeout", "25"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        mine = []
        while time.monotonic() < deadline and len(mine) < 2:  # rank 0's store and both ranks' gloo sockets
            time.sleep(1)
            pids = _tree(bench.pid)
            ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout.splitlines()
            mine = [line for line in ss if any(f"pid={p}," in line for p in pids)]
        assert mine, "the bench opened no listening socket"
        assert all(re.search(r"\s127\.0\.0\.1:\d+\s", line) for line in mine), mine
        ranks = sorted(p for p in _tree(bench.pid) if p != bench.pid)
        os.kill(ranks[-1], signal.SIGSTOP)
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 1 and "were stopped (SIGSTOP" in err and "Traceback" not in err
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
