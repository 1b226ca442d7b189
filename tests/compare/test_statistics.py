"""--statistic mean|median|min|auto in compare and calibrate, and calibration's bootstrap uncertainty.

The measurements are built from the calibrated model's closed form (compareutil.gloo_time_us, written
out by hand), with iterations that a shared machine would produce: most at the true time, some stalled.
"""
import json
import random
import subprocess
import sys

import pytest
import yaml
from compareutil import SIZES, bench_doc, gloo_time_us, write_doc

from real.compare.calibrate import calibrate
from real.compare.measured import measurement_from_json, with_statistic
from real.compare.score import compare

BW, T0 = 1.5, 300.0


def noisy_doc(collective, stall_share, seed, stall_us=4000.0, iters=20):
    """Iterations at the model's time +-2%, ``stall_share`` of them (rounded) delayed by a 4 ms scheduler tick."""
    rng = random.Random(seed)
    true = {s: gloo_time_us(collective, s, BW, T0) for s in SIZES}
    doc = bench_doc(collective, true)
    for row in doc["results"]:
        for p in ("", "inplace_"):
            xs = [true[row["nbytes"]] * rng.uniform(0.98, 1.02) for _ in range(iters)]
            for i in rng.sample(range(iters), round(stall_share * iters)):
                xs[i] += stall_us
            row.update({f"{p}time_samples_us": xs, f"{p}time_us": sum(xs) / iters,
                        f"{p}median_time_us": sorted(xs)[iters // 2], f"{p}min_time_us": min(xs),
                        f"{p}max_time_us": max(xs)})
    return doc, true


def test_statistic_picks_the_recorded_column_and_says_when_only_the_mean_exists():
    doc, true = noisy_doc("all_gather", 0.3, 1)
    m = measurement_from_json(doc)
    for stat, key in (("mean", "time_us"), ("median", "median_time_us"), ("min", "min_time_us")):
        got = with_statistic(m, stat)
        assert [r.time_us for r in got.rows] == [r[key] for r in doc["results"]]
        assert got.statistic == stat
    old = measurement_from_json(bench_doc("all_gather", true))   # an older file: the mean only
    got = with_statistic(old, "median")
    assert got.statistic == "mean" and "only the mean" in got.statistic_note
    # auto: these iterations are noisy (30% stalled: mean far above the median), so the minimum
    assert with_statistic(m, "auto").statistic == "min" and "noisy" in with_statistic(m, "auto").statistic_note
    steady, _ = noisy_doc("all_gather", 0.0, 2)
    assert with_statistic(measurement_from_json(steady), "auto").statistic == "median"


def test_median_calibration_ignores_stalls_that_ruin_the_mean():
    doc, _ = noisy_doc("all_gather", 0.2, 3)   # 4 of 20 iterations stalled by 4 ms: mean +800 us everywhere
    m = measurement_from_json(doc, "<ag>")
    by = {stat: calibrate([m], statistic=stat, bootstrap=0) for stat in ("mean", "median", "min")}
    assert by["median"].bandwidth_GBps == pytest.approx(BW, rel=0.05)
    assert by["median"].launch_us == pytest.approx(T0, rel=0.1)
    assert by["min"].bandwidth_GBps == pytest.approx(BW, rel=0.05)
    assert by["mean"].launch_us > T0 + 500        # the stalls land in the per-call overhead


def test_bootstrap_range_covers_the_truth_and_widens_with_noise():
    quiet, _ = noisy_doc("all_gather", 0.0, 4)
    cal = calibrate([measurement_from_json(quiet, "<q>")], statistic="median")
    u = cal.uncertainty
    assert u["link_bandwidth_GBps"]["low"] <= BW <= u["link_bandwidth_GBps"]["high"] * 1.02
    assert u["launch_us"]["high"] - u["launch_us"]["low"] < 0.1 * T0      # +-2% jitter pins it down
    assert "bootstrap" in u["method"]
    assert cal.document["meta"]["calibration"]["uncertainty"]["launch_us"] == u["launch_us"]
    # half the iterations stalled: the median jumps between the two modes, and the range says so
    loud, _ = noisy_doc("all_gather", 0.5, 5)
    wide = calibrate([measurement_from_json(loud, "<l>")], statistic="median").uncertainty
    assert (wide["launch_us"]["high"] - wide["launch_us"]["low"]) > 10 * (u["launch_us"]["high"] - u["launch_us"]["low"])


def test_compare_median_vs_mean_on_the_true_model(tmp_path):
    doc, true = noisy_doc("all_reduce", 0.2, 6)
    fit_doc = bench_doc("all_gather", {s: gloo_time_us("all_gather", s, BW, T0) for s in SIZES})
    cal = calibrate([measurement_from_json(fit_doc, "<ag>")], bootstrap=0)
    m = measurement_from_json(doc, "<ar>")
    median = compare(m, cal.topology, statistic="median")
    mean = compare(m, cal.topology, statistic="mean")
    assert median.summary["median_abs_rel_error"] < 0.03 < mean.summary["median_abs_rel_error"]
    assert median.to_dict()["measured_statistic"] == "median"


def test_cli_statistic_and_uncertainty_lines(tmp_path):
    doc, _ = noisy_doc("all_gather", 0.1, 7)
    ag = write_doc(tmp_path, "ag.json", doc)
    out = tmp_path / "local.yaml"
    p = subprocess.run([sys.executable, "-m", "sim", "calibrate", ag, "--out", str(out), "--statistic", "median"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "median of each size's iterations" in p.stdout and "(95%:" in p.stdout
    cal = yaml.safe_load(out.read_text())["meta"]["calibration"]
    assert cal["statistic"] == "median" and cal["uncertainty"]["link_bandwidth_GBps"]["low"] > 0
    p = subprocess.run([sys.executable, "-m", "sim", "compare", "--measured", ag, "--topology", str(out),
                        "--statistic", "typical"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "invalid choice" in p.stderr
    p = subprocess.run([sys.executable, "-m", "sim", "compare", "--measured", ag, "--topology", str(out),
                        "--statistic", "min", "--format", "json"], capture_output=True, text=True, timeout=60)
    assert json.loads(p.stdout)["measured_statistic"] == "min"
