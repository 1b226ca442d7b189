"""``sim.simulate``: predict one collective on one topology.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 30, "ring:n=8,bandwidth_GBps=100,latency_us=1",
...                  algorithm="ring", protocol="ideal")
>>> r.steps, round(r.time_us, 2)
(14, 18804.48)
"""
from __future__ import annotations

import math

from . import analytic
from .algorithms import build_program, candidates, get_algorithm, why_not
from .collectives import get_collective
from .engines import check_engine, run_program
from .errors import CollsimError
from .presets import load_topology
from .protocols import IDEAL, NCCL_PROTOCOLS, PROTOCOLS, get_protocol
from .result import Result, link_tables
from .topology import Topology

MAX_PIPELINE = 128
MODELS = ("engine", "tuner", "alpha-beta", "flow")


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
    bw = topo.path_bandwidth_GBps(0, 1) * 1e3
    alpha = max(topo.path_latency_us(0, 1), 1e-3)
    best = math.sqrt(max(steps - 1, 1) * per_channel / (bw * alpha))
    return max(1, min(MAX_PIPELINE, int(round(best))))


def simulate(collective, nbytes: int, topology, algorithm: str = "auto", protocol: str = "auto", *,
             model: str = "engine", nchannels: int | None = None, pipeline: int | None = None, root: int = 0,
             trace: bool = False, engine: str = "default", select: str = "nccl") -> Result:
    """Predict ``collective`` moving ``nbytes`` (nccl-tests' size) on ``topology``.

    ``topology``: a Topology, a preset spec (``"dgx-h100:nodes=2"``) or a .yaml/.json path.
    ``algorithm``: a name from :func:`sim.algorithms.algorithms`, or ``auto`` (NCCL-style selection).
    ``protocol``: ``ideal``, ``LL``, ``LL128``, ``Simple`` or ``auto``.
    ``model``: ``engine`` (discrete-event), ``tuner`` (NCCL's closed form), ``alpha-beta``, or ``flow``
    (ring collectives on very large clusters, aggregated by symmetry; see :mod:`sim.flow`).
    ``engine``: ``default`` or ``reference`` (the readable SimPy engine, :mod:`sim.reference_engine`).
    ``select`` (with ``auto``): ``nccl``, the pair NCCL's tuner picks (what nccl-tests measures), or
    ``fastest``, the model's fastest pair among those NCCL can run (:mod:`sim.select`).
    """
    topo = load_topology(topology)
    coll = get_collective(collective)
    if not isinstance(nbytes, (int, float)) or nbytes < 0:
        raise CollsimError(f"size {nbytes!r} must be a non-negative number of bytes")
    if model not in MODELS:
        raise CollsimError(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < topo.nranks:  # every model, not only the engine
        raise CollsimError(f"root {root!r} is not a rank of {topo.name}: choose 0..{topo.nranks - 1}")
    for name, value in (("nchannels", nchannels), ("pipeline", pipeline)):
        if value is not None and value < 1:
            raise CollsimError(f"{name}={value} must be at least 1 (leave it out for the model's choice)")
        if value is not None and model in ("tuner", "alpha-beta"):
            raise CollsimError(f"--{name} has no effect on the {model} model (its channels come from NCCL's "
                               f"search or the formula): drop it, or use --model engine")
    if check_engine(engine) != "default" and model not in ("engine", "auto"):
        raise CollsimError(f"--engine {engine} times programs for the engine model, not the {model} model: "
                           f"drop it, or use --model engine")
    if model == "flow":  # ring collectives on huge clusters; picks among the algorithms it covers itself
        from .flow import flow_simulate
        return flow_simulate(coll, int(nbytes), topo, algorithm, protocol, nchannels=nchannels, pipeline=pipeline, root=root)
    if algorithm == "auto" or protocol == "auto":
        from .select import choose
        return choose(coll, int(nbytes), topo, algorithm=algorithm, protocol=protocol, model=model,
                      nchannels=nchannels, pipeline=pipeline, root=root, trace=trace, engine=engine, select=select)
    reason = why_not(algorithm, coll, topo.nranks, topo)
    if reason:
        raise CollsimError(f"cannot run {algorithm} on {topo.name}: {reason}")
    proto = get_protocol(protocol)
    if model == "tuner":
        from .tuner import tuner_result
        return tuner_result(coll, int(nbytes), topo, algorithm, proto)
    if model == "alpha-beta":
        return _alpha_beta(coll, int(nbytes), topo, algorithm, proto)
    return run_engine(coll, int(nbytes), topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline,
                      root=root, trace=trace, engine=engine)


def run_engine(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels=None, pipeline=None,
               root: int = 0, trace: bool = False, engine: str = "default") -> Result:
    """The discrete-event prediction for one (algorithm, protocol), timed by ``engine``."""
    if proto.name != IDEAL.name:  # NCCL protocols: latency term, channels over NICs, chunks (sim.nccl_run)
        from .nccl_run import run
        return run(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline, root=root, trace=trace,
                   engine=engine)
    nch = nchannels or 1
    if pipeline is None:
        steps = build_program(algorithm, coll, topo.nranks, topology=topo, nchannels=1, pipeline=1, root=root).steps \
            if coll.name in get_algorithm(algorithm).pipelined else 0
        pipeline = default_pipeline(algorithm, coll.name, nbytes, topo, proto, nch, steps)
    program = build_program(algorithm, coll, topo.nranks, topology=topo, nchannels=nch, pipeline=pipeline, root=root)
    run = run_program(program, topo, nbytes, proto, engine=engine)
    link_bytes, link_busy = link_tables(topo, run.link_bytes, run.link_busy_us)
    tr = None
    if trace:
        from .trace import Trace, expand_times
        start, end = expand_times(run, program)
        tr = Trace(program, start, end, program.nbytes_per_chunk(nbytes))
    t = run.time_us
    return Result(coll.name, nbytes, topo.nranks, algorithm, proto.name, t, analytic.algbw_GBps(nbytes, t),
                  analytic.busbw_GBps(coll.name, topo.nranks, nbytes, t), program.steps, "engine", topo.name,
                  nch, pipeline, link_bytes, link_busy,
                  {"ops": program.nops, "simulated_ops": len(run.op_index), "symmetric": run.symmetric}, tr)


def _alpha_beta(coll, nbytes: int, topo: Topology, algorithm: str, proto) -> Result:
    """Textbook formulas for one ring of uniform hops: the slowest and highest-latency neighbour hop
    stands for all (a conservative single-channel bound; contention and channels are the engine's job)."""
    n = topo.nranks
    first_hosts = [r for h in topo.hosts[:2] for r in h]  # every kind of hop of a regular cluster, cheaply
    hops = [(r, (r + 1) % n) for r in first_hosts] + [(n - 1, 0)]
    bw = min(topo.path_bandwidth_GBps(a, b) for a, b in hops) * proto.payload_efficiency
    lat = max(topo.path_latency_us(a, b) for a, b in hops) + proto.hop_latency_us
    t = analytic.alpha_beta_time_us(coll.name, algorithm, topo.nranks, nbytes, bw, lat) + proto.launch_us
    steps = build_program(algorithm, coll, topo.nranks, topology=topo).steps
    return Result(coll.name, nbytes, topo.nranks, algorithm, proto.name, t, analytic.algbw_GBps(nbytes, t),
                  analytic.busbw_GBps(coll.name, topo.nranks, nbytes, t), steps, "alpha-beta", topo.name,
                  explain={"alpha_us": lat, "bandwidth_GBps": bw})


def protocols_for(protocol: str) -> list[str]:
    """``auto`` -> NCCL's three protocols; a name -> itself."""
    if protocol == "auto":
        return list(NCCL_PROTOCOLS)
    return [get_protocol(protocol).name]


__all__ = ["simulate", "run_engine", "default_pipeline", "MODELS", "PROTOCOLS", "IDEAL", "candidates"]
