"""Seeded stochastic mode (``collsim simulate --stochastic N --seed S``): stragglers from per-hop latency variation.

The deterministic model gives every network hop its median latency. On a real fabric each message's
latency varies, and a collective ends only when its *slowest* dependency chain has: a ring's last step
closes the chain of node crossings that led to it, a tree's root waits for every leaf-to-root path. The
more such paths run in parallel, the further into the tail the slowest one sits, so the same per-hop
distribution makes large jobs slower than small ones (the stragglers of thousands of ranks) without any
term fitted per scale; and the longer each path, the more its hops average out (a 2,000-step ring hardly
moves, a 20-level tree does).

What is sampled, per prediction (a :class:`~sim.engine.result.Result` with its latency term in
``explain["latency_us"]``):

* the latency term is ``width`` dependency paths in parallel (:func:`network_stages`: the nodes the
  collective spans times its channels), each ``stages`` network hops long (a ring's node crossings, a
  tree's levels up and down, one for a one-shot algorithm);
* one hop's latency is the median times ``exp(sigma * Z)``, ``Z`` standard normal (log-normal); a path's
  sum of ``stages`` hops is taken as normal with the log-normal's exact mean and variance (central limit),
  and the slowest of ``width`` paths is drawn directly from the distribution of the maximum
  (``Z_max = Phi^-1(U^(1/width))``, ``U`` uniform): one draw per sample, whatever the scale;
* the latency term is scaled by that slowest path relative to the expected slowest path of the same
  collective on :data:`REFERENCE_NODES` nodes: the model's constants were fitted on measured medians of
  mostly 2-node runs, which already contain their own stragglers, so a 2-node question keeps its
  deterministic median and only wider jobs move; the bandwidth term is left as it is (large transfers
  average their packets).

``sigma`` is the fabric's per-message latency spread (:data:`HOP_SIGMA`): its prior is a public figure,
the median-to-p90 ratio of small RDMA messages under a kernel-bypass software stack (RAMCloud's
clusterperf on InfiniBand: 3.9 us median, 5.0 us p90, i.e. sigma = ln(5.0/3.9)/1.2816 = 0.19), the same
for every fabric until a fabric's own figure is published. The mode reports the median and the 10th-90th
percentile spread of ``samples`` draws; the seed makes it reproducible.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 16, "dgx-h100:nodes=64")
>>> s = sample(r, "dgx-h100:nodes=64", samples=200, seed=1)
>>> s["time_us_p10"] <= s["time_us_median"] <= s["time_us_p90"], s == sample(r, "dgx-h100:nodes=64", samples=200, seed=1)
(True, True)
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


def path_factor(stages: int, width: int, sigma: float, z) -> np.ndarray:
    """Slowest of ``width`` paths of ``stages`` log-normal(0, sigma) hops, per hop, for standard-normal
    quantiles ``z`` of that maximum (central limit on each path's sum)."""
    mean = math.exp(sigma * sigma / 2)
    sd = math.sqrt((math.exp(sigma * sigma) - 1.0) * math.exp(sigma * sigma))
    return mean + sd * np.asarray(z) / math.sqrt(stages)


@lru_cache(maxsize=256)   # a sweep asks for the same 2-node reference row after row
def expected_slowest(stages: int, width: int, sigma: float, draws: int = 4096) -> float:
    """E[slowest path] per hop, by a fixed quadrature over the maximum's quantiles."""
    u = (np.arange(draws) + 0.5) / draws
    return float(np.mean(path_factor(stages, width, sigma, ndtri(u ** (1.0 / width)))))


def sample(result, topo, samples: int = 100, seed: int = 0, sigma: float | None = None) -> dict:
    """Median and 10th/90th percentiles of ``samples`` seeded draws of ``result``'s time and busbw."""
    from ..nccl.machine import machine
    from ..presets import load_topology
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise CollsimError(f"--stochastic {samples!r}: the number of samples must be a whole number from 1 to {MAX_SAMPLES}")
    sigma = HOP_SIGMA if sigma is None else float(sigma)
    m = machine(load_topology(topo) if isinstance(topo, str) else topo)
    stages, width = network_stages(result, m)
    explain = result.explain or {}
    # the per-hop latencies only: a deep tree's lag (part of latency_us) grows with the bytes, like the data term
    lat = float(explain.get("latency_us", 0.0)) - float(explain.get("tree_lag_us", 0.0))
    rng = np.random.default_rng(seed)
    if stages == 0 or lat <= 0 or sigma <= 0:
        factors = np.ones(samples)
    else:
        ref = expected_slowest(*network_stages(result, m, min(REFERENCE_NODES, m.nnodes)), sigma)
        factors = path_factor(stages, width, sigma, ndtri(rng.random(samples) ** (1.0 / width))) / ref
    times = result.time_us + lat * (factors - 1.0)
    alg = lambda t: result.nbytes / (1000.0 * t) if t > 0 else 0.0
    bus = lambda t: alg(t) * (result.busbw_GBps / result.algbw_GBps if result.algbw_GBps else 1.0)
    p10, med, p90 = (float(np.percentile(times, q)) for q in (10, 50, 90))
    return {"samples": samples, "seed": seed, "hop_sigma": sigma, "network_stages": stages, "parallel_paths": width,
            "time_us_median": med, "time_us_p10": p10, "time_us_p90": p90,
            "busbw_GBps_median": bus(med), "busbw_GBps_p10": bus(p90), "busbw_GBps_p90": bus(p10)}


__all__ = ["HOP_SIGMA", "REFERENCE_NODES", "network_stages", "path_factor", "expected_slowest", "sample"]
