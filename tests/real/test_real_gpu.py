"""NCCL on real GPUs: all six collectives, CUDA-event timing, a sim Program over NCCL P2P.

Skipped (with the reason) where torch sees no CUDA GPU; scripts/gpu_check.sh runs them on a GPU machine.
"""
import json

import pytest
from realutil import new_env, processes_with, run_bench

torch = pytest.importorskip("torch", reason="needs torch with CUDA")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU (torch.cuda.is_available() is False): run scripts/gpu_check.sh on a GPU machine")]

NGPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"])
def test_nccl_bench_every_collective_on_all_gpus(collective):
    env = new_env()
    p = run_bench("--backend", "nccl", "--nprocs", NGPUS, "--collective", collective, "-b", "8K", "-e", "64M", "-f", "8",
                  "-n", 5, "--format", "json", env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["backend"] == "nccl" and doc["nranks"] == NGPUS and doc["env"]["nccl"]
    assert len(doc["env"]["gpus"]) >= 1 and doc["env"]["cuda_available"]
    for r in doc["results"]:
        assert r["wrong"] == 0 and r["inplace_wrong"] == 0 and r["time_us"] > 0
        assert NGPUS == 1 or r["busbw_GBps"] > 0  # one rank moves no bytes over any bus
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


def test_cuda_event_timer_agrees_with_host_timer():
    args = ["--backend", "nccl", "--nprocs", NGPUS, "-b", "256M", "-e", "256M", "-n", 20, "--format", "json"]
    host = json.loads(run_bench(*args, timeout=300).stdout)["results"][0]["time_us"]
    events = json.loads(run_bench(*args, "--timer", "events", timeout=300).stdout)["results"][0]["time_us"]
    assert events == pytest.approx(host, rel=0.25)


@pytest.mark.skipif(NGPUS < 2, reason=f"a Program needs 2 ranks, so 2 CUDA GPUs; {NGPUS} visible")
def test_ring_program_over_nccl_p2p():
    p = run_bench("--backend", "nccl", "--nprocs", NGPUS, "--impl", "program:ring", "-b", "1M", "-e", "16M", "-f", "4",
                  "-n", 3, "--format", "json", timeout=300)
    assert p.returncode == 0, p.stderr
    assert all(r["wrong"] == 0 for r in json.loads(p.stdout)["results"])


def test_nccl_knobs_reach_nccl():
    p = run_bench("--backend", "nccl", "--nprocs", NGPUS, "-b", "1M", "-e", "1M", "-n", 2, "--nccl-proto", "Simple",
                  "--nccl-channels", 2, "--format", "json", timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["env"]["nccl_env"]["NCCL_PROTO"] == "Simple"
