"""The engine model: one pair timed by the discrete-event engine and made a Result in one place.

NCCL protocols run under NCCL's plan (:func:`sim.nccl.execution.engine_timing`: latency term, channels
over NICs, chunks); the ideal protocol runs the algorithm's program on the topology as drawn, with no
latency term (:func:`ideal_timing`). Either way :func:`sim.engine.result.engine_result` turns the
:class:`~sim.engine.result.EngineTiming` into the Result. :mod:`sim.api` adds the time and memory
budget around it; the step model anchors on it (:mod:`sim.prediction.flow_steps`).
"""
from __future__ import annotations

from ..algorithms import build_program, get_algorithm
from ..engine import run_program
from ..engine.result import EngineTiming, Result, engine_result
from ..nccl.protocols import IDEAL
from ..nccl.recipe import default_pipeline
from ..topology import Topology


def engine_predict(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels: int | None = None,
                   pipeline: int | None = None, root: int = 0, trace: bool = False, engine: str = "default") -> Result:
    """The engine's Result for one (algorithm, protocol), ideal or NCCL, timed by ``engine``."""
    if proto.name != IDEAL.name:
        from ..nccl.execution import engine_timing
        timing = engine_timing(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline,
                               root=root, trace=trace, engine=engine)
    else:
        timing = ideal_timing(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline, root=root,
                              engine=engine)
    return engine_result(coll, nbytes, topo, timing, trace)


def ideal_timing(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels: int | None = None,
                 pipeline: int | None = None, root: int = 0, engine: str = "default") -> EngineTiming:
    """The ideal protocol: the algorithm's program on the topology as drawn, no latency term."""
    nch = nchannels or 1
    if pipeline is None:
        steps = build_program(algorithm, coll, topo.nranks, topology=topo, nchannels=1, pipeline=1, root=root).steps \
            if coll.name in get_algorithm(algorithm).pipelined else 0
        pipeline = default_pipeline(algorithm, coll.name, nbytes, topo, proto, nch, steps)
    program = build_program(algorithm, coll, topo.nranks, topology=topo, nchannels=nch, pipeline=pipeline, root=root)
    run = run_program(program, topo, nbytes, proto, engine=engine)
    return EngineTiming(algorithm, proto.name, program.steps, nch, pipeline, program, run, 0.0, run.time_us,
                        head={"ops": program.nops})


__all__ = ["engine_predict", "ideal_timing"]
