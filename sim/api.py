"""``sim.simulate``: predict one collective on one topology.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 30, "ring:n=8,bandwidth_GBps=100,latency_us=1",
...                  algorithm="ring", protocol="ideal")
>>> r.steps, round(r.time_us, 2)
(14, 18804.48)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .algorithms import algorithms, analytic, build_program, candidates, in_nccl, why_not
from .collectives import get_collective
from .engine import check_engine
from .engine.progress import DELAY_S as PROGRESS_DELAY_S
from .engine.progress import phases
from .engine.result import Result
from .errors import CollsimError
from .io.validation import MAX_BYTES, MAX_CHANNELS, whole
from .nccl.context import cached
from .nccl.protocols import IDEAL, PROTOCOLS, get_protocol
from .nccl.recipe import MAX_PIPELINE, default_pipeline, protocols_for
from .nccl.select import choose, faster_note
from .prediction.budget import (
    AUTO_ENGINE_SECONDS,
    AUTO_FALLBACK_SECONDS,
    Estimate,
    check_memory,
    default_max_memory,
    full_program_refusal,
    gb,
    parse_memory,
    run_estimate,
)
from .presets import load_topology
from .topology import Topology

MODELS = ("auto", "engine", "tuner", "alpha-beta", "flow")


@dataclass(frozen=True)
class RunOptions:
    """What every predictor takes besides the collective, size, topology, algorithm and protocol."""

    nchannels: int | None = None
    pipeline: int | None = None
    root: int = 0
    trace: bool = False
    max_memory: int | None = None    # bytes; None: half of the memory available (sim.prediction.budget)
    engine: str = "default"          # which engine times programs (sim.engine)


def simulate(collective, nbytes: int, topology, algorithm: str = "auto", protocol: str = "auto", *,
             model: str = "auto", nchannels: int | None = None, pipeline: int | None = None, root: int = 0,
             trace: bool = False, max_memory=None, engine: str = "default", select: str = "nccl",
             nccl_version=None, nccl_env=None) -> Result:
    """Predict ``collective`` moving ``nbytes`` (nccl-tests' size) on ``topology``.

    ``topology``: a Topology, a preset spec (``"dgx-h100:nodes=2"``) or a .yaml/.json path.
    ``algorithm``: a name from :func:`sim.algorithms.algorithms`, or ``auto`` (NCCL-style selection).
    ``protocol``: ``ideal``, ``LL``, ``LL128``, ``Simple`` or ``auto``.
    ``model``: ``auto`` (the engine where it fits the time and memory budget, the large-scale flow
    model beyond), ``engine`` (discrete-event), ``tuner`` (NCCL's closed form), ``alpha-beta``, or
    ``flow`` (large clusters: rings as flows, trees/NVLS/CollNet through a replica; :mod:`sim.prediction.flow`).
    ``max_memory``: bytes (or ``"2G"``) a run may take; default half of the available memory.
    ``engine``: ``default`` or ``reference`` (the readable SimPy engine, :mod:`sim.engine.reference`).
    ``select`` (with ``auto``): ``nccl``, the pair NCCL's tuner picks (what nccl-tests measures), or
    ``fastest``, the model's fastest pair among those NCCL can run (:mod:`sim.nccl.select`).
    ``nccl_version`` (``"2.18"``...; default the newest documented, :mod:`sim.nccl.versions`) and
    ``nccl_env`` (``{"NCCL_ALGO": "^NVLS"}`` or ``"NCCL_ALGO=Ring,NCCL_MIN_NCHANNELS=32"``): NCCL as the
    run configured it (:mod:`sim.nccl.config`); left out, the configuration in force (a
    :func:`sim.nccl.config.use` block, else the newest release with no variables). The Result's
    ``explain["nccl_version"]`` names the release modelled.
    Every predictor is one function of :data:`PREDICTORS`; selection gets the chosen one.
    """
    if nccl_version is not None or nccl_env is not None:
        from .nccl import config as nccl_config
        with nccl_config.use(nccl_config.make_config(nccl_version, nccl_env)):
            return simulate(collective, nbytes, topology, algorithm, protocol, model=model, nchannels=nchannels,
                            pipeline=pipeline, root=root, trace=trace, max_memory=max_memory, engine=engine,
                            select=select)
    topo, coll, predict = _pipeline(collective, nbytes, topology, model, nchannels, pipeline, root, trace, max_memory,
                                    engine)
    if algorithm == "auto" or protocol == "auto":
        usable = [a for a in algorithms() if _why_not(a, coll, topo) is None] if algorithm == "auto" else None
        r = choose(coll, int(nbytes), topo, predict, algorithm=algorithm, protocol=protocol, model=model,
                   usable=usable, select=select)
    else:
        from .nccl.tuner import protocol_not_run
        why = protocol_not_run(algorithm, get_protocol(protocol).name)
        if why:   # no NCCL kernel does it, so no measurement could check it: refused, not timed
            raise CollsimError(f"-a {algorithm} -p {protocol}: {why} in NCCL: use -p Simple (or -p auto)"
                               + ("" if algorithm == "p2p" else ", or -p ideal for the textbook latency-bandwidth model"))
        r = predict(algorithm, protocol)
    from .nccl.config import current
    return r if "nccl_version" in r.explain else r.with_explain(nccl_version=current().version)


def faster_choice(chosen: Result, topology, *, model: str = "auto", protocol: str = "auto", select: str = "nccl",
                  nchannels: int | None = None, pipeline: int | None = None, root: int = 0, max_memory=None,
                  engine: str = "default") -> Result | None:
    """The pair NCCL can run that the model puts more than 10% ahead of ``chosen`` (what :func:`simulate`
    returned for these options), or None: :func:`sim.nccl.select.faster_note` decides when the note
    applies and times the candidates through the same pipeline, so a pair already timed is not run again."""
    topo, coll, predict = _pipeline(chosen.collective, chosen.nbytes, topology, model, nchannels, pipeline, root, False,
                                    max_memory, engine)
    return faster_note(chosen, coll, chosen.nbytes, topo, predict, model=model, protocol=protocol, select=select)


def _pipeline(collective, nbytes, topology, model, nchannels, pipeline, root, trace, max_memory, engine):
    """(topology, collective, predict): the arguments checked once, and ``predict(algorithm, protocol)``,
    the chosen model's Result for one pair, made once per input (:func:`_predict`)."""
    topo = load_topology(topology)
    coll = get_collective(collective)
    # one validation layer (sim.io.validation): inf, nan, 10**400, 1.5 and True are refused, naming the limit
    nbytes = whole(nbytes, "nbytes", low=0, high=MAX_BYTES, example="1048576 (bytes)")
    if model not in PREDICTORS:
        raise CollsimError(f"unknown model {model!r}: choose one of {', '.join(MODELS)}")
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < topo.nranks:  # every model, not only the engine
        raise CollsimError(f"root {root!r} is not a rank of {topo.name}: choose 0..{topo.nranks - 1}")
    for name, value in (("nchannels", nchannels), ("pipeline", pipeline)):
        if value is not None:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1:
                raise CollsimError(f"{name}={value} must be at least 1 (leave it out for the model's choice)")
            whole(value, name, low=1, high=MAX_CHANNELS if name == "nchannels" else MAX_PIPELINE,
                  example="4 (or leave it out for the model's choice)")
        if value is not None and model in ("tuner", "alpha-beta"):
            raise CollsimError(f"--{name} has no effect on the {model} model (its channels come from NCCL's "
                               f"search or the formula): drop it, or use --model engine")
    if check_engine(engine) != "default" and model not in ("engine", "auto"):
        raise CollsimError(f"--engine {engine} times programs for the engine model, not the {model} model: "
                           f"drop it, or use --model engine")
    opts = RunOptions(nchannels, pipeline, root, trace, None if max_memory is None else parse_memory(max_memory), engine)

    def predict(algo: str, proto: str) -> Result:
        reason = _why_not(algo, coll, topo) or program_refusal(algo, coll, topo, model, opts.max_memory)
        if reason:
            raise CollsimError(f"cannot run {algo} on {topo.name}: {reason}")
        if opts.trace:   # a trace is large and asked for once: not kept
            return PREDICTORS[model](coll, int(nbytes), topo, algo, get_protocol(proto), opts)
        return _predict(model, coll, int(nbytes), topo, algo, get_protocol(proto), opts)

    return topo, coll, predict


def program_refusal(algorithm: str, coll, topo: Topology, model: str, max_memory: int | None = None) -> str | None:
    """Why ``model`` cannot time ``algorithm`` on ``topo`` within ``max_memory``, before anything is built, or
    None: a textbook algorithm (not NCCL's for this collective) is a program over every rank whatever the
    model but the tuner (n^2 ops for recursive_hd: :func:`sim.prediction.budget.full_program_refusal`)."""
    if model == "tuner" or in_nccl(algorithm, coll):
        return None
    return full_program_refusal(algorithm, coll, topo, max_memory)


@cached(maxsize=128)
def _predict(model: str, coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions) -> Result:
    """One predictor's Result, once per (model, collective, size, topology, algorithm, protocol, options)
    and settings in force (:mod:`sim.nccl.context`): selection, ``--select fastest`` and the faster-choice
    note share it. Results are immutable by convention: layers above add to ``explain`` with
    :meth:`Result.with_explain`, never in place."""
    return PREDICTORS[model](coll, nbytes, topo, algorithm, proto, opts)


@lru_cache(maxsize=256)
def _why_not(algo: str, coll, topo: Topology) -> str | None:
    """:func:`sim.algorithms.why_not`, once per topology (a sweep asks for every size; on 16,384 GPUs
    finding the NVLink domains takes a second)."""
    return why_not(algo, coll, topo.nranks, topo)


def run_engine(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels=None, pipeline=None,
               root: int = 0, trace: bool = False, engine: str = "default") -> Result:
    """The discrete-event prediction for one (algorithm, protocol), timed by ``engine``."""
    return _engine(coll, nbytes, topo, algorithm, proto, RunOptions(nchannels, pipeline, root, trace, None, engine))


def _estimate(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions) -> Estimate:
    """What the engine would need for this run (closed forms; nothing is built)."""
    return run_estimate(coll, nbytes, topo, algorithm, proto.name, opts.nchannels, opts.pipeline)


def _engine(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions, est: Estimate | None = None) -> Result:
    """The engine predictor: refuses up front when the run would not fit ``--max-memory`` (``est``: the
    budget's estimate, when the caller made it already)."""
    est = est or _estimate(coll, nbytes, topo, algorithm, proto, opts)
    check_memory(f"the engine on {algorithm}/{proto.name} over {topo.nranks} GPUs ({est.describe(memory=False)})", est.bytes,
                 opts.max_memory, "use --model flow (or auto), a smaller cluster, or raise --max-memory")
    # the bar (stderr, a terminal, after two seconds) carries the estimate the budget made before the run
    with phases(f"engine {algorithm}/{proto.name}, {topo.nranks} GPUs (estimate {est.seconds:.0f} s)",
                3 * (2 if proto.name != IDEAL.name else 1),
                enabled=None if est.seconds >= PROGRESS_DELAY_S else False):
        return _run_engine(coll, nbytes, topo, algorithm, proto, opts)


def _run_engine(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions) -> Result:
    """The engine's timing of one pair, ideal or NCCL protocol, made a Result in one place
    (:func:`sim.prediction.engine_model.engine_predict`)."""
    from .prediction.engine_model import engine_predict
    return engine_predict(coll, nbytes, topo, algorithm, proto, nchannels=opts.nchannels, pipeline=opts.pipeline,
                          root=opts.root, trace=opts.trace, engine=opts.engine)


def _tuner(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions) -> Result:
    from .nccl.tuner import tuner_result
    return tuner_result(coll, nbytes, topo, algorithm, proto)


def _flow(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions) -> Result:
    from .prediction.flow import flow_predict
    return flow_predict(coll, nbytes, topo, algorithm, proto, nchannels=opts.nchannels, pipeline=opts.pipeline,
                        root=opts.root)


def _auto(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions) -> Result:
    """The engine where its estimate fits the time and memory budget, the flow model beyond; the
    Result's ``model`` and ``explain["model_choice"]`` say which ran and why."""
    est = _estimate(coll, nbytes, topo, algorithm, proto, opts)
    limit = default_max_memory() if opts.max_memory is None else opts.max_memory
    fits = est.bytes <= limit
    if fits and (est.seconds <= AUTO_ENGINE_SECONDS or opts.trace or opts.engine != "default"):
        r = _engine(coll, nbytes, topo, algorithm, proto, opts)
        r.explain["model_choice"] = f"engine: {est.describe()}"
        if est.seconds > AUTO_ENGINE_SECONDS and opts.trace:   # past the budget: the trace asked for the engine's events
            r.explain["engine_for_trace"] = True
        return r
    from .prediction.flow import flow_covers
    reason = flow_covers(coll, algorithm, topo)
    if reason is None:
        r = _flow(coll, nbytes, topo, algorithm, proto, opts)
    elif not fits:
        others = [a for a in ("ring",) if a != algorithm and flow_covers(coll, a, topo) is None]
        way = (f", or -a {others[0]} (which the flow model times on this topology)" if others else
               "" if topo.hardware.gpu_arch is not None else
               ", or describe the cluster with a hardware preset (dgx-h100:nodes=N...), which the flow model times")
        raise CollsimError(f"{coll.name} over {topo.nranks} GPUs: the engine would need about {gb(est.bytes)} for "
                           f"{algorithm}/{proto.name} ({est.describe(memory=False)}), more than --max-memory {gb(limit)}, "
                           f"and the flow model cannot run it ({reason}): simulate fewer GPUs{way}")
    elif est.seconds > AUTO_FALLBACK_SECONDS:   # bounded work: minutes of engine are asked for, not chosen
        # a hardware preset already: what the flow model times at any size is NCCL's own algorithms
        hint = ("time NCCL's own algorithms instead (-a auto), which the flow model times at any size"
                if topo.hardware.gpu_arch is not None else
                "describe the cluster with a hardware preset (dgx-h100:nodes=N...), which the flow model times at any size")
        raise CollsimError(f"{coll.name} over {topo.nranks:,} GPUs: the engine would take about {est.seconds:.0f} s for "
                           f"{algorithm}/{proto.name} and the flow model cannot run it ({reason}): pass --model engine "
                           f"to wait for it, simulate fewer GPUs, or {hint}")
    else:
        return _engine(coll, nbytes, topo, algorithm, proto, opts, est).with_explain(
            model_choice=f"engine (the flow model cannot run it: {reason}): {est.describe()}")
    return r.with_explain(model_choice=f"flow: the engine would need {est.describe()}")


def _alpha_beta(coll, nbytes: int, topo: Topology, algorithm: str, proto, opts: RunOptions | None = None) -> Result:
    """Textbook formulas for one ring of uniform hops: the slowest and highest-latency neighbour hop
    stands for all (a conservative single-channel bound; contention and channels are the engine's job)."""
    n = topo.nranks
    first_hosts = [r for h in topo.hosts[:2] for r in h]  # every kind of hop of a regular cluster, cheaply
    hops = [(r, (r + 1) % n) for r in first_hosts] + [(n - 1, 0)]
    bw = min(topo.path_bandwidth_GBps(a, b) for a, b in hops) * proto.payload_efficiency
    lat = max(topo.path_latency_us(a, b) for a, b in hops) + proto.hop_latency_us
    t = analytic.alpha_beta_time_us(coll.name, algorithm, topo.nranks, nbytes, bw, lat) + proto.launch_us
    steps = build_program(algorithm, coll, topo.nranks, topology=topo).steps
    return Result.of(coll, nbytes, topo.nranks, algorithm, proto.name, t, steps, model="alpha-beta",
                     topology=topo.name, explain={"alpha_us": lat, "bandwidth_GBps": bw})


# The predictors: one function each, same signature, each returning a Result (selection gets one).
PREDICTORS = {"auto": _auto, "engine": _engine, "tuner": _tuner, "alpha-beta": _alpha_beta, "flow": _flow}


__all__ = ["simulate", "faster_choice", "run_engine", "default_pipeline", "protocols_for", "MODELS", "PREDICTORS", "RunOptions", "PROTOCOLS",
           "IDEAL", "MAX_PIPELINE", "candidates"]
