"""Hung training jobs for assignment a5: a random fault per seed, its flight-recorder dumps, its truth.

:func:`make_job` draws, from a seed, a DDP job (4, 6 or 8 ranks, 2-4 gradient buckets, 2 steps) and
one fault in one rank's program (it skips a collective, calls another collective, passes another size
or another dtype); :func:`write_job` runs it in the flight-recorder simulator (:mod:`sim.flight`) and
writes each rank's dump (``rank_<r>.json``, the shape of PyTorch's flight recorder). The truth
(:func:`ground_truth`) comes from the fault that was injected and from the simulator's own record of
which collective never completed, not from the analyzer the students are asked to replace.

>>> job = make_job(7)
>>> sorted(job["truth"])
['collective', 'kind', 'rank', 'seq']
>>> make_job(7) == job        # the same seed, the same job
True
"""
from __future__ import annotations

import random

KINDS = {"skip": "missing_rank", "wrong_collective": "collective_type_mismatch", "size": "size_mismatch",
         "dtype": "dtype_mismatch"}


def _fault(rng: random.Random, kind: str, world: int, calls: int) -> dict:
    fault = {"kind": kind, "rank": rng.randrange(world), "call": rng.randrange(calls)}
    if kind == "wrong_collective":
        fault["collective"] = rng.choice(["broadcast", "all_gather", "reduce_scatter"])
    elif kind == "size":
        fault["factor"] = rng.choice([0.5, 2.0])
    elif kind == "dtype":
        fault["dtype"] = rng.choice(["bfloat16", "float16"])
    return fault


def make_job(seed: int, kind: str | None = None) -> dict:
    """The job for ``seed``: ``{"scenario": ..., "truth": {"rank", "seq", "collective", "kind"}}``."""
    from ..flight.faults import apply_rank_faults, parse_faults
    from ..flight.rank_workload import from_dict
    from ..flight.replay import run
    rng = random.Random(int(seed))
    world, buckets = rng.choice([4, 6, 8]), rng.choice([2, 3, 4])
    kind = kind or rng.choice(sorted(KINDS))
    workload = {"builtin": "ddp_step", "world_size": world, "buckets": buckets, "bucket_nbytes": "6M", "steps": 2}   # 6M: splits over 4, 6 and 8 ranks
    fault = _fault(rng, kind, world, buckets * 2)
    scenario = {"name": f"a5-job-{seed}", "workload": workload, "faults": [fault]}
    w = from_dict(workload)
    result = run(apply_rank_faults(w, parse_faults([fault], w.world_size)))
    stuck = [i for i in result.instances if i.end_us is None]
    first = min(stuck, key=lambda i: i.seq)
    healthy_ops = [c.op for r, (_t, c) in first.joined.items() if r != fault["rank"]]
    truth = {"rank": fault["rank"], "seq": first.seq, "collective": max(set(healthy_ops), key=healthy_ops.count),
             "kind": KINDS[kind]}
    return {"scenario": scenario, "truth": truth, "dumps": result.dumps()}


def write_job(directory: str, seed: int, kind: str | None = None) -> list[str]:
    """Write the dumps of the job for ``seed`` into ``directory``; returns their paths (not the truth)."""
    from ..flight.records import write_dumps
    return write_dumps(directory, make_job(seed, kind)["dumps"])


def ground_truth(seed: int, kind: str | None = None) -> dict:
    """``{"rank", "seq", "collective", "kind"}`` of the job for ``seed``."""
    return make_job(seed, kind)["truth"]


__all__ = ["make_job", "write_job", "ground_truth", "KINDS"]
