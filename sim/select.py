"""Algorithm and protocol selection, like NCCL's tuner: predict every usable pair, keep the fastest.

``--algorithm X`` / ``--protocol Y`` pin one side, as ``NCCL_ALGO`` / ``NCCL_PROTO`` do.

With NCCL's protocols the choice is NCCL's own: its cost model (:mod:`sim.tuner`) ranks every
(algorithm, protocol) pair and the cheapest wins, whatever the chosen model then predicts for it. That
is what NCCL does, and it keeps a sweep fast: the engine runs once per size, for the chosen pair only.
Algorithms NCCL does not have (``recursive_hd``, ``binomial``...) are not candidates for ``auto``; pin
one with ``--algorithm`` and its protocol is picked by the chosen model's own times. With
``--protocol ideal`` (the pure latency-bandwidth model) every registered algorithm competes on the
chosen model's times.

>>> import sim
>>> [sim.simulate("all_reduce", s, "dgx-h100").algorithm for s in (1 << 10, 64 << 20)]
['ring', 'nvls']
"""
from __future__ import annotations

from .algorithms import candidates
from .errors import CollsimError
from .protocols import IDEAL, NCCL_ALGORITHMS
from .result import Result


def choose(coll, nbytes: int, topo, *, algorithm="auto", protocol="auto", model="engine", nchannels=None,
           pipeline=None, root=0, trace=False, engine="default") -> Result:
    """The fastest usable pair's Result; ``explain`` records how it was chosen."""
    from .api import protocols_for, simulate
    from .tuner import rank_pairs
    algos = candidates(coll, topo.nranks, topo) if algorithm == "auto" else [algorithm]
    if not algos:
        raise CollsimError(f"no algorithm can run {coll.name} on {topo.name}")
    protos = protocols_for(protocol)
    run = lambda a, p: simulate(coll, nbytes, topo, a, p, model=model, nchannels=nchannels, pipeline=pipeline,
                                root=root, trace=trace, engine=engine)
    if IDEAL.name not in protos:
        nccl_algos = [a for a in algos if a in NCCL_ALGORITHMS]
        ranked = rank_pairs(coll, nbytes, topo, nccl_algos, protos) if nccl_algos else []
        if ranked:
            best = ranked[0]
            r = run(best.algorithm, best.protocol)
            r.explain["selected_by"] = "NCCL 2.27 tuner model"
            r.explain["tuner_ranking"] = ", ".join(f"{t.algorithm}/{t.protocol} {t.time_us:.4g} us" for t in ranked[:4])
            return r
    best = None
    for a in algos:
        for p in protos:
            r = run(a, p)
            if best is None or r.time_us < best.time_us:
                best = r
    best.explain["selected_by"] = f"fastest by the {model} model"
    return best
