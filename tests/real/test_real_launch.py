"""Launching: a dead rank, a hung run, Ctrl-C and SIGTERM all end ``collsim bench`` with every rank
stopped; bad arguments get one line and status 2 before anything starts."""
import signal
import subprocess
import time

import pytest
from realutil import bench_cmd, new_env, processes_with, run_bench

pytest.importorskip("torch", reason="collsim bench needs torch (pip install torch==2.13.0)")


def test_a_killed_rank_fails_the_run_and_leaves_nothing():
    env = new_env(COLLSIM_TEST_KILL_RANK=1, COLLSIM_TEST_KILL_AFTER_ROWS=1)
    t0 = time.monotonic()
    p = run_bench("--backend", "gloo", "--nprocs", 3, "-b", "1K", "-e", "1M", "-f", "4", "-n", 2, "--timeout", 60, env=env)
    assert p.returncode != 0
    assert "rank 1 exited with status 3 before the run finished" in p.stderr
    assert time.monotonic() - t0 < 60
    assert len([ln for ln in p.stdout.splitlines() if ln and not ln.startswith("#")]) == 1  # one row, then it died
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


def test_timeout_stops_every_rank():
    env = new_env()
    t0 = time.monotonic()
    p = run_bench("--backend", "gloo", "--nprocs", 2, "-b", "4M", "-e", "4M", "-n", 100000, "--timeout", 6, env=env)
    assert p.returncode == 1 and "did not finish within --timeout 6 s" in p.stderr
    assert time.monotonic() - t0 < 6 + 15
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_ctrl_c_and_sigterm_clean_up(sig, code):
    env = new_env()
    proc = subprocess.Popen(bench_cmd("--backend", "gloo", "--nprocs", 2, "-b", "4M", "-e", "4M", "-n", 100000),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # rank 0's header: every rank is up and joined
        assert line.startswith("# collsim bench"), line + proc.stderr.read()
        assert len(processes_with(env["COLLSIM_TEST_TOKEN"])) == 3  # the launcher and two ranks
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "collsim: interrupted" in proc.stderr.read()
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


@pytest.mark.parametrize("args,message", [
    (["--backend", "nccl"], "--backend nccl needs a CUDA GPU and torch sees none: use --backend gloo"),
    (["--backend", "mpi"], "unknown backend 'mpi'"),
    (["--backend", "gloo", "-b", "2", "-e", "8"], "-b/--minbytes 2 B is below the 4-byte size of one float"),
    (["--backend", "gloo", "--nprocs", "1000"], "use --nprocs"),
    (["--backend", "gloo", "--collective", "broadcast", "-r", "2"], "root 2 is not a rank of a 2-rank job"),
    (["--backend", "gloo", "-d", "uint64"], "gloo cannot run uint64"),
    (["--backend", "gloo", "-o", "avg", "-d", "int32"], "gloo cannot average int32"),
    (["--backend", "gloo", "--timer", "events"], "--timer events needs CUDA events"),
    (["--backend", "gloo", "-e", "64G"], "lower -e or --nprocs"),
    (["--backend", "gloo", "--collective", "alltoallv"], "unknown collective 'alltoallv'"),
])
def test_bad_arguments_get_one_line_before_anything_starts(cli, args, message):
    import torch
    if args == ["--backend", "nccl"] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU, so --backend nccl is valid here")
    code, out, err = cli("bench", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("collsim: error: ") and message in err


def test_ranks_die_with_a_killed_launcher():
    """SIGKILL gives the launcher no chance to clean up: the ranks' parent-death signal does it."""
    env = new_env()
    proc = subprocess.Popen(bench_cmd("--backend", "gloo", "--nprocs", 2, "-b", "4M", "-e", "4M", "-n", 100000),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout.readline().startswith("# collsim bench")
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while processes_with(env["COLLSIM_TEST_TOKEN"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


def test_joins_a_torchrun_job():
    """Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, LOCAL_RANK set) bench runs as one rank of that job."""
    import json
    import sys

    from realutil import free_port
    env = new_env()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
           "-m", "sim", "bench", "--backend", "gloo", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "--format", "json"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # only rank 0 prints
    assert doc["nranks"] == 2 and [r["wrong"] for r in doc["results"]] == [0, 0]
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []
