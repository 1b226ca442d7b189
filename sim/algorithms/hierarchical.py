"""``hierarchical_ring``: a two-level ring all_reduce, inside each host and then across hosts.

::

    host 0: g0 -> g1 -> .. -> g(k-1) -> g0     (1) and (3): a ring inside each host
              |     |            |
    host 1: g0 -> g1 -> .. -> g(k-1) -> g0     (2): k rings across hosts, one per local index
              ...

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

from ..chunk_program import ChunkProgram
from . import algorithm
from .tree import host_groups, uniform_hosts


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
def build_hierarchical_ring(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    rank = np.array(host_groups(topology, n))          # rank[host, local]
    m, k = rank.shape
    p = ChunkProgram(coll, n, k * m)                    # chunk shard * m + sub: sub-chunk `sub` of shard `shard`
    h, l, sub = p.grid(m, k, m)                         # every host, local GPU and sub-chunk at once
    for s in p.steps(k - 1):    # 1. ring reduce-scatter inside each host: l sends shard l-s-1 to l+1
        p.send(rank[h, l], rank[h, (l + 1) % k], chunk=(l - s - 1) % k * m + sub, reduce=True)
    h, l = p.grid(m, k)
    for s in p.steps(m - 1):    # 2. ring all-reduce of shard l over the hosts' GPUs l: reduce-scatter ...
        p.send(rank[h, l], rank[(h + 1) % m, l], chunk=l * m + (h - s) % m, reduce=True)
    for s in p.steps(m - 1):    # ... then all-gather of the sub-chunks
        p.send(rank[h, l], rank[(h + 1) % m, l], chunk=l * m + (h + 1 - s) % m)
    h, l, sub = p.grid(m, k, m)
    for s in p.steps(k - 1):    # 3. ring all-gather inside each host: l sends shard l-s to l+1
        p.send(rank[h, l], rank[h, (l + 1) % k], chunk=(l - s) % k * m + sub)
    return p.program("hierarchical_ring", steps=2 * (k - 1) + 2 * (m - 1), nchannels=nchannels, pipeline=pipeline,
                     hosts=m, ppn=k)
