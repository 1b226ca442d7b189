"""Algorithm and protocol selection, like NCCL's tuner: predict every usable pair, keep the fastest.

``--algorithm X`` / ``--protocol Y`` pin one side, as ``NCCL_ALGO`` / ``NCCL_PROTO`` do.
"""
from __future__ import annotations

from .algorithms import candidates
from .errors import CollsimError
from .result import Result


def choose(coll, nbytes: int, topo, *, algorithm="auto", protocol="auto", model="engine", nchannels=None,
           pipeline=None, root=0, trace=False) -> Result:
    from .api import protocols_for, simulate
    algos = candidates(coll, topo.nranks, topo) if algorithm == "auto" else [algorithm]
    if not algos:
        raise CollsimError(f"no algorithm can run {coll.name} on {topo.name}")
    best = None
    for a in algos:
        for p in protocols_for(protocol):
            r = simulate(coll, nbytes, topo, a, p, model=model, nchannels=nchannels, pipeline=pipeline,
                         root=root, trace=trace)
            if best is None or r.time_us < best.time_us:
                best = r
    return best
