"""``verify`` and ``bench --impl program:`` run your own code in a child process with a time limit: a
program for the wrong collective or world size, an exit() or an endless loop is a failure, never "ok"."""
import importlib.util

import pytest
from conftest import refused

MISMATCH = ('from sim.algorithms import build_program\nCOLLECTIVES = ["all_reduce", "all_gather"]\n'
            'def build(collective, nranks):\n    return build_program("ring", "broadcast", 2)\n')
RIGHT = ('from sim.algorithms import build_program\nCOLLECTIVES = ["all_reduce"]\n'
         'def build(collective, nranks):\n    print("chatty user code")\n    return build_program("ring", collective, nranks)\n')


def test_a_program_for_another_collective_is_not_certified(user, tmp_path):
    (tmp_path / "algo.py").write_text(MISMATCH)
    rc, out, err = user("verify", "algo.py", "--ranks", "2-4")
    assert rc == 1 and "Traceback" not in out + err
    assert "returned a broadcast program, not all_reduce" in out and "0 of 6 programs verified" in out


def test_a_program_for_another_world_size_is_not_certified(user, tmp_path):
    (tmp_path / "algo.py").write_text('from sim.algorithms import build_program\nCOLLECTIVES = ["all_reduce"]\n'
                                      'def build(collective, nranks):\n    return build_program("ring", collective, 2)\n')
    rc, out, err = user("verify", "algo.py", "--ranks", "3")
    assert rc == 1 and "a program for 2 ranks, not 3" in out


def test_a_correct_file_still_verifies_and_its_prints_do_not_break_the_report(user, tmp_path):
    (tmp_path / "algo.py").write_text(RIGHT)
    rc, out, err = user("verify", "algo.py", "--ranks", "2-3")
    assert rc == 0 and "2 of 2 programs verified" in out and "chatty user code" in err


@pytest.mark.parametrize("text,where", [("import sys\nsys.exit(0)\n", "while importing"),
                                        ("import os\ndef build(c, n):\n    os._exit(0)\n", "in build")])
def test_an_exit_is_a_failure(user, tmp_path, text, where):
    (tmp_path / "algo.py").write_text(text)
    rc, out, err = user("verify", "algo.py", "--ranks", "2")
    assert rc == 1 and "exited with status 0" in out and where in out and "Traceback" not in out + err


def test_an_endless_build_is_stopped_by_the_timeout(user, tmp_path):
    (tmp_path / "algo.py").write_text("def build(collective, nranks):\n    while True:\n        pass\n")
    rc, out, err = user("verify", "algo.py", "--ranks", "2", "--timeout", "2", timeout=30)
    assert rc == 1 and "did not finish within --timeout 2 s" in out and "build('all_reduce', 2)" in out


def test_a_file_that_does_not_import_is_one_line(user, tmp_path):
    (tmp_path / "algo.py").write_text("import no_such_module_here\n")
    refused(user("verify", "algo.py"), "failed to import", "no_such_module_here")


def test_verify_help_says_what_contains_the_code_and_what_not(user):
    rc, out, _ = user("verify", "--help")
    text = " ".join(out.split())
    assert rc == 0 and "bubblewrap" in text and "not contained" in text and "--timeout" in text


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="bench needs torch (pip install torch==2.13.0)")
def test_bench_program_file_that_exits_is_refused_before_any_rank_starts(user, tmp_path):
    (tmp_path / "algo.py").write_text("import sys\nsys.exit(0)\n")
    refused(user("bench", "--backend", "gloo", "--nprocs", "2", "-b", "1K", "-e", "1K", "--impl", "program:algo.py",
                 timeout=60), "exited with status 0")
    rc, out, _ = user("bench", "--help")
    assert "not sandboxed" in " ".join(out.split())
