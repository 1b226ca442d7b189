"""The seeded stochastic mode (sim/prediction/stochastic.py): stragglers from per-hop latency variation.

Expected values come from a second implementation (brute-force Monte Carlo over every hop of every chain)
and from properties the statistics must have (the median of a sum is above the sum of medians; more and
longer chains -> a larger excess; a 2-node question keeps the median its constants were fitted on), not
from the module's own numbers.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import sim
from sim.errors import CollsimError
from sim.prediction import stochastic
from sim.presets import load_topology

S = stochastic.HOP_SIGMA


@pytest.mark.parametrize("chains, hops, sigma, draws", [(16, 2, S, 4000), (512, 12, S, 400), (64, 40, S, 1000),
                                                        (8, 3, 0.5, 20000), (4, 1, 0.8, 50000)])
def test_slowest_chain_matches_a_brute_force_monte_carlo(chains, hops, sigma, draws):
    rng = np.random.default_rng(7)
    slowest = np.exp(sigma * rng.standard_normal((draws, chains, hops))).sum(axis=2).max(axis=1)   # every hop
    u = (np.arange(4096) + 0.5) / 4096   # the formula's mean, by quadrature over its quantiles
    assert float(np.mean(stochastic.slowest_path(hops, chains, sigma, u))) == pytest.approx(float(slowest.mean()), rel=0.01)
    for q in (10, 50, 90):
        formula = float(stochastic.slowest_path(hops, chains, sigma, q / 100))
        assert formula == pytest.approx(float(np.percentile(slowest, q)), rel=0.01), q
    assert stochastic.median_slowest(hops, chains, sigma) == pytest.approx(float(np.median(slowest)), rel=0.01)


def test_the_median_of_a_sum_is_above_the_sum_of_medians_and_the_excess_grows_with_chains_and_hops():
    mu = math.exp(S * S / 2)                                                   # one hop's mean; its median is 1
    per_hop = [stochastic.median_slowest(k, 1, S) / k for k in (1, 2, 8, 64, 4096)]
    assert per_hop[0] == pytest.approx(1.0) and per_hop == sorted(per_hop) and per_hop[-1] == pytest.approx(mu, rel=1e-4)
    excess = lambda k, p: stochastic.median_slowest(k, p, S) - k
    for k in (1, 2, 8, 30, 510):
        row = [excess(k, p) for p in (1, 16, 128, 2048, 16384)]
        assert row == sorted(row) and row[0] > -1e-12
    for p in (1, 16, 16384):
        col = [excess(k, p) for k in (1, 2, 8, 30, 510, 4094)]
        assert col == sorted(col)
    # u^(1/width) near 1 keeps its digits at millions of chains (p2p on 2,048 nodes)
    big = stochastic.slowest_path(1, 2048 * 2047, S, np.array([0.1, 0.5, 0.9]))
    assert np.all(np.isfinite(big)) and big[0] < big[1] < big[2] and big[0] > stochastic.median_slowest(1, 16384, S)


def _sampled(algorithm, nodes, samples=400, seed=3):
    topo = load_topology(f"dgx-h100:nodes={nodes}")
    r = sim.simulate("all_reduce", 1 << 16, topo, algorithm=algorithm, protocol="LL")
    return r, stochastic.sample(r, topo, samples, seed=seed)


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_two_nodes_keep_their_median_and_more_nodes_are_never_faster(algorithm):
    r, s = _sampled(algorithm, 2, samples=4000)
    assert s["time_us_median"] == pytest.approx(r.time_us, rel=0.005)     # the fit's own scale: no shift
    excess, ratio, spread = [0.0], [1.0], [s["time_us_p90"] - s["time_us_p10"]]
    for nodes in (16, 256, 2048):
        r, s = _sampled(algorithm, nodes)
        assert s["time_us_p10"] > r.time_us, nodes                          # the whole spread above the point
        excess.append(s["time_us_median"] - r.time_us)
        ratio.append(s["time_us_median"] / r.time_us)
        spread.append(s["time_us_p90"] - s["time_us_p10"])
    assert excess == sorted(excess), excess                                  # the straggler delay grows with nodes
    if algorithm == "tree":                                                  # 2 log2(n) levels: the excess per hop holds
        assert ratio == sorted(ratio), ratio
    else:   # a ring's 2(n-1) crossings average out towards the hop's mean (+1.8%), never below the point
        assert min(ratio[1:]) > 1.0 + (math.exp(S * S / 2) - 1) / 2, ratio
    # independent hops average out, so the relative spread narrows; in microseconds it does not vanish
    assert min(spread) > 0.5 * spread[0], spread
    if algorithm == "ring":
        assert spread == sorted(spread), spread


def test_seeded_reproducible_different_seeds_differ_and_bad_seeds_are_refused():
    r = sim.simulate("all_reduce", 1 << 16, "dgx-h100:nodes=16")
    a, b = (stochastic.sample(r, "dgx-h100:nodes=16", 300, seed=5) for _ in range(2))
    assert a == b and stochastic.sample(r, "dgx-h100:nodes=16", 300, seed=6) != a
    assert a["time_us_p10"] < a["time_us_median"] < a["time_us_p90"]
    for seed in (-1, 1.5, True):
        with pytest.raises(CollsimError, match="--seed"):
            stochastic.sample(r, "dgx-h100:nodes=16", 10, seed=seed)
    flat = stochastic.sample(r, "dgx-h100:nodes=16", 50, seed=5, sigma=0.0)
    assert flat["time_us_p10"] == flat["time_us_p90"] == pytest.approx(r.time_us)
    one = sim.simulate("all_reduce", 1 << 16, "dgx-h100")
    assert stochastic.sample(one, "dgx-h100", 20)["time_us_median"] == pytest.approx(one.time_us)   # no network


def test_cli_rows_carry_the_samples_and_refuse_bad_counts_and_seeds():
    run = lambda *a: subprocess.run([sys.executable, "-m", "sim", "simulate", *a], capture_output=True, text=True, timeout=120)
    p = run("-t", "dgx-h100:nodes=16", "-b", "64K", "-e", "64K", "--stochastic", "64", "--seed", "2", "--format", "json")
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["results"][0]
    st = row["stochastic"]
    assert st["samples"] == 64 and st["seed"] == 2 and st["time_us_p10"] <= st["time_us_median"] <= st["time_us_p90"]
    assert row["time_us_range"][0] <= st["time_us_p10"] and st["time_us_p90"] <= row["time_us_range"][1]
    bad = run("-b", "1K", "-e", "1K", "--stochastic", "-3")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--stochastic -3" in bad.stderr
    neg = run("-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--stochastic", "5", "--seed", "-1")
    assert neg.returncode == 2 and neg.stderr.strip().splitlines() == ["collsim: error: --seed -1: the seed must be a whole number 0 or more"]
    alone = run("-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--seed", "3")
    assert alone.returncode == 0 and "ignoring --seed: it has no effect without --stochastic" in alone.stderr
