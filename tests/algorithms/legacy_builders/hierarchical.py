"""``hierarchical_ring``: a two-level ring all_reduce, inside each host and then across hosts.

With m hosts of k GPUs each (local index l = position of the rank in its host):

1. reduce-scatter on a ring inside every host (k-1 steps): local GPU l ends with shard l of its host's
   sum (the buffer is cut into k shards);
2. all-reduce of shard l on a ring over the hosts' GPUs l (2(m-1) steps; shard l is cut into m
   sub-chunks, the usual ring reduce-scatter then all-gather), so k independent rings cross the network
   at once, one per rail on a rail-optimised cluster;
3. all-gather on the ring inside every host (k-1 steps).

Steps: ``2(k-1) + 2(m-1)``, against ``2(km-1)`` for one flat ring; the network carries
2(m-1)/m * S/k per GPU, the same bytes as the flat ring, in far fewer latency-bound steps. Without a
topology (or with one GPU per host) k = 1 and this is the flat ring.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> build_program("hierarchical_ring", "all_reduce", 16, topology=load_topology("dgx-h100:nodes=2")).steps
16
"""
from __future__ import annotations

import numpy as np

from sim.program import Program

from .registry import algorithm
from .tree import host_groups, tile, uniform_hosts


def _requirement(topology, collective, n):
    if topology is None:
        return None  # runs as the flat ring (one GPU per host)
    if n != topology.nranks:
        return f"it runs on every GPU of the topology ({topology.nranks}), not {n}"
    groups = host_groups(topology, n)
    if len(groups) == 1 or len(groups) == n:
        return f"topology {topology.name} has {'one host' if len(groups) == 1 else 'one GPU per host'}: the two-level ring is the plain ring here (use ring)"
    return uniform_hosts(topology, n)


@algorithm("hierarchical_ring", ("all_reduce",), "two-level ring: reduce-scatter in each host, ring across hosts, all-gather in each host",
           requirement=_requirement)
def build_hierarchical_ring(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    groups = np.array(host_groups(topology, n))          # [host, local] -> rank
    m, k = groups.shape
    cols = []
    h, l, i = (x.ravel() for x in np.meshgrid(np.arange(m), np.arange(k), np.arange(m), indexing="ij"))

    def add(src, dst, shard, sub, step, red):
        cols.append((src, dst, shard * m + sub, step, np.full(len(src), red)))

    for s in range(k - 1):  # 1. intra-host ring reduce-scatter: l sends shard l-s-1 to l+1 (all m sub-chunks)
        add(groups[h, l], groups[h, (l + 1) % k], (l - s - 1) % k, i, np.full(len(h), s), True)
    hh, ll = (x.ravel() for x in np.meshgrid(np.arange(m), np.arange(k), indexing="ij"))
    base = k - 1
    for s in range(2 * (m - 1)):  # 2. ring over hosts for shard l: reduce-scatter then all-gather of sub-chunks
        sub = (hh - s) % m if s < m - 1 else (hh + 1 - (s - (m - 1))) % m
        add(groups[hh, ll], groups[(hh + 1) % m, ll], ll, sub, np.full(len(hh), base + s), s < m - 1)
    base += 2 * (m - 1)
    for s in range(k - 1):  # 3. intra-host ring all-gather: l sends shard l-s to l+1
        add(groups[h, l], groups[h, (l + 1) % k], (l - s) % k, i, np.full(len(h), base + s), False)
    parts = [np.concatenate([c[j] for c in cols]) for j in range(5)]
    (src, dst, chunk, step, red), channel, nchunks = tile(parts, k * m, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm="hierarchical_ring",
                            steps=2 * (k - 1) + 2 * (m - 1), params={"nchannels": nchannels, "pipeline": pipeline,
                                                                       "hosts": m, "ppn": k})
