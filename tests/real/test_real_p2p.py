"""collsim bench measures the message latency between ranks 0 and 1 before its sweep (real.measure.harness.p2p_latency)
and records it in the JSON env and the table header, where collsim calibrate finds it."""
import json
import math
import time

import pytest
from realutil import run_bench, spawn_gloo

torch = pytest.importorskip("torch", reason="needs torch (pip install torch==2.13.0)")


def _p2p(rank, n):
    from real.measure.harness import p2p_latency
    t0 = time.perf_counter()
    got = p2p_latency(rank, n, torch.device("cpu"))
    return got, time.perf_counter() - t0


def test_p2p_latency_on_three_ranks_is_rank_0s_and_quick():
    (r0, s0), (r1, _), (r2, s2) = spawn_gloo(_p2p, 3)
    assert r1 is None and r2 is None                  # rank 1 takes part, only rank 0 reports; rank 2 stays out
    assert s2 < 0.01                                  # ranks >= 2 do not wait for anything
    assert r0["rounds"] == 30 and r0["nbytes"] == 4 and r0["method"] == "exchange"
    assert math.isfinite(r0["latency_us"]) and 0 < r0["min_us"] <= r0["latency_us"]
    assert s0 < 1.0                                   # 35 rounds: well under a second even on a loaded machine
    assert r0["latency_us"] * 30 / 1e6 <= s0          # the median is a round's time, not the whole run's


@pytest.mark.parametrize("nprocs", [2, 3])
def test_bench_json_records_the_latency(nprocs):
    p = run_bench("--backend", "gloo", "--nprocs", nprocs, "--collective", "all_gather", "-b", "4K", "-e", "16K",
                  "-f", "4", "-n", 2, "--format", "json")
    assert p.returncode == 0, p.stderr
    env = json.loads(p.stdout)["env"]
    lat = env["p2p_latency_us"]
    assert isinstance(lat, float) and math.isfinite(lat) and lat > 0
    assert 0 < env["p2p_latency_min_us"] <= lat and env["p2p_rounds"] == 30
    assert env["p2p_method"].startswith("exchange")
    assert lat < 1e5                                  # a 4-byte message, not a stalled TCP stream (< 0.1 s)


def test_table_header_says_the_latency_and_compare_reads_it(tmp_path):
    from real.compare.measured import read_measurement
    p = run_bench("--backend", "gloo", "--nprocs", 2, "--collective", "all_gather", "-b", "4K", "-e", "16K",
                  "-f", "4", "-n", 2)
    assert p.returncode == 0, p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("# p2p latency:")]
    value = float(line.split()[3])
    assert value > 0 and "rank 0 <-> rank 1" in line and "median of 30 rounds" in line
    path = tmp_path / "ag.txt"
    path.write_text(p.stdout)
    m = read_measurement(str(path))
    assert m.collective == "all_gather" and m.env["p2p_latency_us"] == value and len(m.rows) == 2
