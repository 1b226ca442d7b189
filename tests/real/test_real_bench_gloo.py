"""``collsim bench`` on gloo, run as a user runs it: local processes, nccl-tests output, #wrong = 0."""
import json

import pytest
from realutil import new_env, processes_with, run_bench

pytest.importorskip("torch", reason="collsim bench needs torch (pip install torch==2.13.0)")

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"]
FACTOR = {"all_reduce": 2 * 2 / 3, "all_gather": 2 / 3, "reduce_scatter": 2 / 3, "all_to_all": 2 / 3,
          "broadcast": 1.0, "reduce": 1.0}


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_every_collective_on_three_gloo_ranks(collective):
    env = new_env()
    p = run_bench("--backend", "gloo", "--nprocs", 3, "--collective", collective, "-b", "1K", "-e", "64K", "-f", "8",
                  "-n", 3, "-w", 1, "-r", 2, "--format", "json", env=env, timeout=90)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["topology"] == "local:gloo:3" and doc["nranks"] == 3 and doc["backend"] == "gloo"
    assert doc["collective"] == collective
    rows = doc["results"]
    sharded = collective in ("all_gather", "reduce_scatter", "all_to_all")
    assert [r["nbytes"] for r in rows] == ([1008, 8160, 65520] if sharded else [1024, 8192, 65536])
    for r in rows:
        assert r["wrong"] == 0 and r["inplace_wrong"] == 0
        assert r["time_us"] > 0 and r["inplace_time_us"] > 0
        assert r["algbw_GBps"] == pytest.approx(r["nbytes"] / r["time_us"] / 1e3)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * FACTOR[collective]) and r["busbw_GBps"] > 0
        assert r["algorithm"] == "measured:gloo" and r["root"] == (2 if collective in ("broadcast", "reduce") else -1)
    assert doc["env"]["world_size"] == 3 and "gloo has no version API" in doc["env"]["gloo"]
    assert any("CPU over TCP" in n for n in doc["notes"])
    if collective == "reduce_scatter":
        assert any("no native reduce_scatter" in n for n in doc["notes"])
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


def test_table_output_parses_like_nccl_tests():
    p = run_bench("--backend", "gloo", "--nprocs", 2, "-b", "1K", "-e", "16K", "-f", "4", "-n", 2, "-d", "half")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rows = [ln.split() for ln in lines if ln and not ln.startswith("#")]
    assert [r[:5] for r in rows] == [["1024", "512", "half", "sum", "-1"], ["4096", "2048", "half", "sum", "-1"],
                                     ["16384", "8192", "half", "sum", "-1"]]
    assert all(r[8] == "0" and r[12] == "0" for r in rows)
    assert "# Out of bounds values : 0 OK" in lines and lines[-2].startswith("# Avg bus bandwidth")
    assert any(ln.startswith("# note: gloo runs on the CPU") for ln in lines)


def test_csv_all_ops_and_env_knobs():
    """-o all on gloo, -c 0 (no check: wrong is empty), and NCCL_* knobs recorded in the result."""
    p = run_bench("--backend", "gloo", "--nprocs", 2, "-b", "64", "-e", "64", "-n", 1, "-o", "all", "-d", "int32",
                  "-c", 0, "--nccl-algo", "Ring", "--nccl-channels", 2, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["redop"] for r in doc["results"]] == ["sum", "prod", "max", "min"]  # gloo cannot average ints
    assert any("skipped avg on int32" in n for n in doc["notes"])
    assert all(r["wrong"] is None for r in doc["results"])
    assert doc["env"]["nccl_env"] == {"NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "2", "NCCL_MIN_NCHANNELS": "2"}
    p = run_bench("--backend", "gloo", "--nprocs", 2, "-b", "64", "-e", "128", "-f", "2", "-n", 1, "--format", "csv")
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines[0].startswith("topology,collective,nranks,backend,impl,nbytes") and len(lines) == 3
