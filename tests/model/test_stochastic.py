"""The seeded stochastic mode (sim/prediction/stochastic.py): stragglers from per-hop latency variation.

Expected values come from a second implementation (brute-force Monte Carlo over every hop of every path)
and from properties of the mechanism (more parallel paths -> slower, longer paths -> more averaging),
not from the module's own numbers.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import sim
from sim.prediction import stochastic


@pytest.mark.parametrize("stages, width", [(2, 16), (12, 512), (40, 64)])
def test_slowest_path_matches_a_brute_force_monte_carlo(stages, width):
    rng = np.random.default_rng(7)
    sigma = stochastic.HOP_SIGMA
    hops = np.exp(sigma * rng.standard_normal((400, width, stages)))        # every hop of every path
    brute = float(np.mean(hops.sum(axis=2).max(axis=1) / stages))
    assert stochastic.expected_slowest(stages, width, sigma) == pytest.approx(brute, rel=0.03)


def test_more_paths_are_slower_and_longer_paths_average_out():
    s = stochastic.HOP_SIGMA
    assert stochastic.expected_slowest(10, 4, s) < stochastic.expected_slowest(10, 64, s) < stochastic.expected_slowest(10, 4096, s)
    excess = lambda k: stochastic.expected_slowest(k, 512, s) - math.exp(s * s / 2)
    assert excess(400) == pytest.approx(excess(100) / 2, rel=1e-6)            # ~ 1/sqrt(path length)


def test_seeded_reproducible_and_two_nodes_keep_their_median():
    r = sim.simulate("all_reduce", 1 << 16, "dgx-h100:nodes=2")
    a, b = (stochastic.sample(r, "dgx-h100:nodes=2", 300, seed=5) for _ in range(2))
    assert a == b and stochastic.sample(r, "dgx-h100:nodes=2", 300, seed=6) != a
    assert a["time_us_median"] == pytest.approx(r.time_us, rel=0.03)        # the fit's own scale: no shift
    assert a["time_us_p10"] < a["time_us_median"] < a["time_us_p90"]
    flat = stochastic.sample(r, "dgx-h100:nodes=2", 50, seed=5, sigma=0.0)
    assert flat["time_us_p10"] == flat["time_us_p90"] == pytest.approx(r.time_us)
    one = sim.simulate("all_reduce", 1 << 16, "dgx-h100")
    assert stochastic.sample(one, "dgx-h100", 20)["time_us_median"] == pytest.approx(one.time_us)   # no network


def test_cli_rows_carry_the_samples_and_refuse_bad_counts():
    run = lambda *a: subprocess.run([sys.executable, "-m", "sim", "simulate", *a], capture_output=True, text=True, timeout=120)
    p = run("-t", "dgx-h100:nodes=16", "-b", "64K", "-e", "64K", "--stochastic", "64", "--seed", "2", "--format", "json")
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["results"][0]
    st = row["stochastic"]
    assert st["samples"] == 64 and st["seed"] == 2 and st["time_us_p10"] <= st["time_us_median"] <= st["time_us_p90"]
    assert row["time_us_range"][0] <= st["time_us_p10"] and st["time_us_p90"] <= row["time_us_range"][1]
    bad = run("-b", "1K", "-e", "1K", "--stochastic", "-3")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--stochastic -3" in bad.stderr
