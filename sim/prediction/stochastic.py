"""Seeded stochastic mode (``collsim simulate --stochastic N --seed S``): stragglers from per-hop latency variation.

The deterministic model gives every network hop its median latency. On a real fabric each message's
latency varies, and a collective ends only when its *slowest* dependency chain has: a ring's last step
closes the chain of node crossings that led to it, a tree's root waits for every leaf-to-root path. The
more chains run in parallel, the further into the tail the slowest one sits, and the longer each chain,
the more its sum exceeds the sum of the hops' medians; so the same per-hop distribution puts a large job
further above its deterministic time than a small one (the stragglers of thousands of ranks), without
any term fitted per scale.

What is sampled, per prediction (a :class:`~sim.engine.result.Result` with its latency term in
``explain["latency_us"]``):

* the latency term is ``width`` dependency chains in parallel (:func:`network_stages`: the nodes the
  collective spans times its channels), each ``stages`` network hops long (a ring's node crossings, a
  tree's levels up and down, one for a one-shot algorithm); the per-hop median is the latency term over
  its stages (the launch and intra-node parts ride along with the hops: an approximation);
* one hop is its median times ``X = exp(sigma * Z)``, ``Z`` standard normal: median 1, mean
  ``mu = exp(sigma^2/2)``, variance ``v = (exp(sigma^2) - 1) exp(sigma^2)``;
* derivation. The deterministic model charges a chain of ``k`` hops the sum of their medians, ``k``. The
  sum's mean is ``k mu`` and its median lies between the two, nearing ``k mu`` as ``k`` grows (each hop
  adds a term of median 0 and positive mean): the median of a sum is not the sum of medians. The sum is
  taken as log-normal with its exact mean and variance (Fenton-Wilkinson: exact at ``k = 1``, and it
  keeps the right skew a normal would lose in the tail), ``s^2 = ln(1 + v / (k mu^2))``, log-median
  ``l = ln(k mu) - s^2/2``. The slowest of ``P`` independent chains has ``P(max <= x) = F(x)^P``, so its
  ``u``-quantile is ``exp(l + s Phi^-1(u^(1/P)))``: one draw per sample, whatever the scale
  (:func:`slowest_path`). Its excess over the deterministic ``k``, ``E(k, P) = max - k``, grows with
  both ``k`` and ``P``;
* the latency constants were fitted on the measured medians of mostly 2-node runs, which paid their own
  excess ``E_ref``, the median of ``E`` for the same collective on :data:`REFERENCE_NODES` nodes; that
  is taken as a fixed amount the fit absorbed, not a per-hop cost, so a sample is
  ``time + (latency / stages) * (E(k, P) - E_ref)``: a 2-node question keeps its deterministic median
  and a wider one is never below it. (Spreading ``E_ref`` over the 2-node run's 2 hops and charging it
  per hop instead made every larger job *faster* than its deterministic time: the mechanism before.)
  The bandwidth term is left as it is (large transfers average their packets).

What it leaves out: correlated variation (a slow node, OS jitter, congestion shared by many chains),
which is what stragglers at scale mostly are; so the sampled excess is a floor, and its relative spread
narrows as chains lengthen and multiply (in microseconds it widens for a ring, narrows a little for a tree).

``sigma`` is the fabric's per-message latency spread (:data:`HOP_SIGMA`): its prior is a public figure,
the median-to-p90 ratio of small RDMA messages under a kernel-bypass software stack (RAMCloud's
clusterperf on InfiniBand: 3.9 us median, 5.0 us p90, i.e. sigma = ln(5.0/3.9)/1.2816 = 0.19), the same
for every fabric until a fabric's own figure is published; not fitted, and the mode is not validated
against measurements. The mode reports the median and the 10th-90th percentile spread of ``samples``
draws; the seed makes it reproducible.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 16, "dgx-h100:nodes=64")
>>> s = sample(r, "dgx-h100:nodes=64", samples=200, seed=1)
>>> r.time_us <= s["time_us_median"], s["time_us_p10"] <= s["time_us_median"] <= s["time_us_p90"]
(True, True)
>>> s == sample(r, "dgx-h100:nodes=64", samples=200, seed=1)
True
"""
from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from ..collectives import get_collective
from ..errors import CollsimError

HOP_SIGMA = 0.19            # log-normal spread of one message's latency (see the module docstring for the source)
REFERENCE_NODES = 2         # the node count of the runs the latency constants were mostly fitted on
MAX_SAMPLES = 10_000
_INV_CDF = np.vectorize(NormalDist().inv_cdf, otypes=[float])


def ndtri(p) -> np.ndarray:
    """The standard normal quantile function, element-wise (``p`` in (0, 1))."""
    return _INV_CDF(np.clip(np.asarray(p, dtype=float), 1e-300, 1.0 - 1e-16))


def check_args(samples, seed) -> None:
    """Refuse a sample count or seed the mode cannot use (before a sweep runs, and in :func:`sample`)."""
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise CollsimError(f"--stochastic {samples!r}: the number of samples must be a whole number from 1 to {MAX_SAMPLES}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CollsimError(f"--seed {seed!r}: the seed must be a whole number 0 or more")


def network_stages(result, m, nodes: int | None = None) -> tuple[int, int]:
    """(stages in a row, hops in parallel per stage) of ``result``'s critical path on machine ``m`` (or
    on ``nodes`` nodes of it)."""
    nodes = max(1, m.nnodes if nodes is None else nodes)
    if nodes == 1:
        return 0, 1
    ch = max(1, int(result.nchannels or 1))
    a = result.algorithm
    lg = max(1, math.ceil(math.log2(nodes)))
    if a == "ring":
        passes = get_collective(result.collective).passes   # all_reduce: reduce-scatter then all-gather
        return passes * (nodes - 1), nodes * ch
    if a in ("tree", "nvls_tree"):
        return 2 * lg, nodes * ch
    if a == "pat":
        return lg, nodes * ch
    if a == "p2p":
        return 1, nodes * (nodes - 1)
    return 1, nodes * ch                    # collnet, nvls: one network exchange per call


def slowest_path(stages: int, width: int, sigma: float, u) -> np.ndarray:
    """The ``u``-quantiles (element-wise, ``u`` in (0, 1)) of the slowest of ``width`` independent chains,
    each the sum of ``stages`` log-normal(0, ``sigma``) hops, in hop medians (the deterministic chain is
    ``stages``): each sum log-normal with its exact mean and variance (see the module docstring)."""
    mu = math.exp(sigma * sigma / 2)
    v = (math.exp(sigma * sigma) - 1.0) * math.exp(sigma * sigma)
    s2 = math.log1p(v / (stages * mu * mu))
    # u^(1/width) as an upper-tail probability: 1 - u^(1/width) loses every digit once width is in the millions
    tail = -np.expm1(np.log(np.asarray(u, dtype=float)) / width)
    z = -ndtri(tail)
    return np.exp(math.log(stages * mu) - s2 / 2 + math.sqrt(s2) * z)


@lru_cache(maxsize=256)   # a sweep asks for the same 2-node reference row after row
def median_slowest(stages: int, width: int, sigma: float) -> float:
    """The median of :func:`slowest_path`."""
    return float(slowest_path(stages, width, sigma, 0.5))


def sample(result, topo, samples: int = 100, seed: int = 0, sigma: float | None = None) -> dict:
    """Median and 10th/90th percentiles of ``samples`` seeded draws of ``result``'s time and busbw."""
    from ..nccl.machine import machine
    from ..presets import load_topology
    check_args(samples, seed)
    sigma = HOP_SIGMA if sigma is None else float(sigma)
    m = machine(load_topology(topo) if isinstance(topo, str) else topo)
    stages, width = network_stages(result, m)
    explain = result.explain or {}
    # the per-hop latencies only: a deep tree's lag (part of latency_us) grows with the bytes, like the data term
    lat = float(explain.get("latency_us", 0.0)) - float(explain.get("tree_lag_us", 0.0))
    rng = np.random.default_rng(seed)
    if stages == 0 or lat <= 0 or sigma <= 0:
        excess = np.zeros(samples)
    else:
        ref_stages, ref_width = network_stages(result, m, min(REFERENCE_NODES, m.nnodes))
        ref = median_slowest(ref_stages, ref_width, sigma) - ref_stages   # the excess the fitted runs paid
        # 1 - random() is in (0, 1]: a quantile of exactly 0 would be an infinitely fast path
        excess = slowest_path(stages, width, sigma, 1.0 - rng.random(samples)) - stages - ref
    times = result.time_us + (lat / max(stages, 1)) * excess
    alg = lambda t: result.nbytes / (1000.0 * t) if t > 0 else 0.0
    bus = lambda t: alg(t) * (result.busbw_GBps / result.algbw_GBps if result.algbw_GBps else 1.0)
    p10, med, p90 = (float(np.percentile(times, q)) for q in (10, 50, 90))
    return {"samples": samples, "seed": int(seed), "hop_sigma": sigma, "network_stages": stages, "parallel_paths": width,
            "time_us_median": med, "time_us_p10": p10, "time_us_p90": p90,
            "busbw_GBps_median": bus(med), "busbw_GBps_p10": bus(p90), "busbw_GBps_p90": bus(p10)}


__all__ = ["HOP_SIGMA", "REFERENCE_NODES", "check_args", "network_stages", "slowest_path", "median_slowest",
           "sample"]
