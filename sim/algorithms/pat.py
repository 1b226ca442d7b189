"""PAT (Parallel Aggregated Trees): NCCL's all_gather / reduce_scatter for one GPU per node (NCCL 2.23+).

NCCL 2.23 added PAT for all_gather and reduce_scatter when every node has one GPU (``ncclPatEnable``
in ``src/graph/tuning.cc``: "PAT only supports 1 GPU per node"), because a ring there costs ``n - 1``
network latencies while PAT costs about ``log2 n`` of them. Its kernels (``PatAGAlgorithm`` /
``PatRSAlgorithm``, ``src/include/collectives.h``) walk ``log2 n`` dimensions; in dimension ``d`` a rank
exchanges with the peer ``2^d`` away, and every shard reaches every rank along a binomial tree, the
shards of one dimension aggregated into one send (``aggFactor`` of them per buffer step).

This is the same structure at the level of whole shards (Bruck's all_gather, the dimensions walked
from distance 1 upwards), with the sends of one dimension aggregated into one step:

======== ============================================================== =========
step d   every rank r sends the shards r .. r+m-1 it holds to rank r-2^d   m = min(2^d, n-2^d)
======== ============================================================== =========

After step d rank r holds shards r .. r + 2^(d+1) - 1, so after ``ceil(log2 n)`` steps it holds all n,
each received exactly once (n - 1 shards moved per rank, as a ring moves). reduce_scatter is the same
trees run backwards (the transpose of the all_gather: partial sums flow toward each shard's owner,
summed on the way), largest distance first. NCCL further cuts each dimension into buffer-sized steps
(``aggFactor``), which the engine's pipelining stands for.

>>> from sim.algorithms import build_program
>>> [build_program("pat", "all_gather", n).steps for n in (2, 8, 64, 6)]
[1, 3, 6, 3]
>>> build_program("pat", "reduce_scatter", 8).nops == 8 * 7    # every rank sends n - 1 shards
True
"""
from __future__ import annotations

from ..chunk_program import ChunkProgram
from . import algorithm


def pat_steps(n: int) -> int:
    """ceil(log2 n): the dimensions PAT walks."""
    return (n - 1).bit_length()


def _one_gpu_per_node(topology, coll: str, n: int) -> str | None:
    if topology is None:
        return None
    hosts = getattr(topology, "hosts", None)
    if hosts and max(len(h) for h in hosts) > 1:
        return "PAT runs with one GPU per node only (NCCL's ncclPatEnable: nNodes == nRanks)"
    return None


@algorithm("pat", ("all_gather", "reduce_scatter"),
           "NCCL 2.23+ Parallel Aggregated Trees: log2 n steps at distances 1, 2, 4...; one GPU per node",
           requirement=_one_gpu_per_node, nccl=("all_gather", "reduce_scatter"))   # NCCL 2.23+ (tuner's release rules)
def build_pat(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    k = pat_steps(n)
    p = ChunkProgram(coll, n, n)
    for d in range(k):
        dist = 1 << d
        m = min(dist, n - dist)
        r, j = p.grid(n, m)
        if coll.reduces:   # reduce_scatter: the all_gather's edges reversed, last dimension first
            p.send(r - dist, r, chunk=r + j, step=k - 1 - d, reduce=True)
        else:
            p.send(r, r - dist, chunk=r + j, step=d)
    # The schedule is rotation invariant (rank r -> r+1 maps shard c to c+1), but it is not declared: the
    # engine's one-op-per-orbit mode assumes every link serves an orbit's ops in the same order, which
    # PAT's several shards per step break where routes overlap (ring:n=5 gave 11.5 us for the reference
    # engine's 14.5); large clusters go to the flow model (sim.prediction.flow._pat) instead.
    return p.program("pat", steps=k, nchannels=nchannels, pipeline=pipeline)
