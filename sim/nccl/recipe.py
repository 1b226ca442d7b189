"""Choices every predictor shares: the protocols ``auto`` stands for and how data is cut into pieces.

Kept apart from :mod:`sim.api` so that the engine, the flow model and selection can use them without
importing the dispatcher that imports them (no import cycle).

>>> protocols_for("auto"), protocols_for("ideal")
(['LL', 'LL128', 'Simple'], ['ideal'])
"""
from __future__ import annotations

import math

from ..algorithms import get_algorithm
from ..collectives import get_collective
from ..topology import Topology
from .constants import NCCL_PROTOCOLS
from .protocols import get_protocol

MAX_PIPELINE = 128


def default_pipeline(algorithm: str, collective: str, nbytes: float, topo: Topology, protocol, nchannels: int,
                     steps: int) -> int:
    """How many pieces each channel's data is cut into.

    NCCL protocols cut data into ``protocol.chunk_bytes`` pieces. In the ideal model only algorithms
    whose critical path shrinks with pipelining (trees, chains, in-network reduction) are cut, into the
    piece count that minimises the pipeline time (d + P - 1)(alpha + S/(P B)): P* = sqrt((d-1) S / (B alpha)).
    """
    coll = get_collective(collective).name
    algo = get_algorithm(algorithm)
    per_channel = nbytes / nchannels
    if protocol.chunk_bytes:
        return max(1, min(MAX_PIPELINE, math.ceil(per_channel / topo.nranks / protocol.chunk_bytes)
                          if coll not in algo.pipelined else math.ceil(per_channel / protocol.chunk_bytes)))
    if coll not in algo.pipelined or steps <= 1:
        return 1
    # the slowest neighbour hop and the highest latency stand for the path: one fast link (rank 0 to 1
    # alone, as this read before) must not make the pieces fewer for everyone (hypothesis found a
    # 1.5x faster link slowing a tree all_reduce by 11%: tests/properties)
    first = [r for h in topo.hosts[:2] for r in h]
    hops = [(r, (r + 1) % topo.nranks) for r in first] + [(topo.nranks - 1, 0)]
    bw = min(topo.path_bandwidth_GBps(a, b) for a, b in hops) * 1e3
    alpha = max(max(topo.path_latency_us(a, b) for a, b in hops), 1e-3)
    best = math.sqrt(max(steps - 1, 1) * per_channel / (bw * alpha))
    return max(1, min(MAX_PIPELINE, int(round(best))))


def protocols_for(protocol: str) -> list[str]:
    """``auto`` -> NCCL's three protocols; a name -> itself."""
    if protocol == "auto":
        return list(NCCL_PROTOCOLS)
    return [get_protocol(protocol).name]
