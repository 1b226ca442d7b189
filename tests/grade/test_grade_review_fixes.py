"""Review fix: the grader kills the student's whole process group, so nothing the code started outlives it."""
import os
import signal
import subprocess
import time

from sim.grade import grade


def _pids(pattern: str) -> list[int]:
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def _cleanup(pattern: str) -> None:
    for pid in _pids(pattern):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_timeout_kills_the_students_child_processes(tmp_path):
    pattern = "sleep 47.3"
    f = tmp_path / "a1_orphan.py"
    f.write_text('import subprocess, time\nsubprocess.Popen(["sleep", "47.3"])\ntime.sleep(30)\n')
    try:
        t0 = time.monotonic()
        rep = grade(str(f), "a1", timeout_s=2)
        assert "ran for more than 2 s and was stopped" in rep.error
        assert time.monotonic() - t0 < 15
        time.sleep(0.2)   # SIGKILL is delivered asynchronously
        assert _pids(pattern) == []
    finally:
        _cleanup(pattern)


def test_normal_completion_kills_leftovers_without_waiting_for_them(tmp_path):
    pattern = "sleep 47.4"
    f = tmp_path / "a1_background.py"
    f.write_text('import subprocess\nsubprocess.Popen(["sleep", "47.4"])\nprint("started it")\n')
    try:
        t0 = time.monotonic()
        rep = grade(str(f), "a1", timeout_s=30)
        assert time.monotonic() - t0 < 20   # the background sleep holds no pipe the grader waits on
        assert rep.error is None and "started it" in rep.output
        time.sleep(0.2)
        assert _pids(pattern) == []
    finally:
        _cleanup(pattern)
