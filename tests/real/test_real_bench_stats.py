"""collsim bench records every timed iteration: median/min/max beside nccl-tests' mean, --repeat pools sweeps."""
import json
import statistics

import pytest
from realutil import run_bench

pytest.importorskip("torch", reason="collsim bench needs torch (pip install torch==2.13.0)")


def test_rows_carry_iteration_statistics_and_repeat_pools_sweeps():
    p = run_bench("--backend", "gloo", "--nprocs", 2, "-b", "1K", "-e", "16K", "-f", "4", "-n", 4, "-w", 1,
                  "--repeat", 2, "--format", "json", timeout=90)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["options"]["repeat"] == 2
    for r in doc["results"]:
        for pre in ("", "inplace_"):
            xs = r[pre + "time_samples_us"]
            assert len(xs) == 2 * 4                          # 2 sweeps x -n 4
            assert r[pre + "time_us"] == pytest.approx(statistics.mean(xs), rel=1e-3)   # nccl-tests' time: the mean
            assert r[pre + "median_time_us"] == pytest.approx(statistics.median(xs), rel=1e-3)
            assert r[pre + "min_time_us"] == pytest.approx(min(xs), rel=1e-3)
            assert r[pre + "max_time_us"] == pytest.approx(max(xs), rel=1e-3)
            assert r[pre + "algbw_GBps"] == pytest.approx(r["nbytes"] / r[pre + "time_us"] / 1e3)


def test_repeat_below_one_is_refused():
    p = run_bench("--backend", "gloo", "--nprocs", 2, "--repeat", 0, timeout=60)
    assert p.returncode == 2 and "--repeat 0 is below 1" in p.stderr
