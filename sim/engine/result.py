"""What a simulation returns: :class:`Result` (time, algbw, busbw, steps, per-link use, a trace).

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 20, "ring:n=4", algorithm="ring", protocol="ideal")
>>> r.steps, round(r.busbw_GBps, 1)
(6, 72.4)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..program import Program
    from .fast import EngineRun


@dataclass(frozen=True, eq=False)
class Result:
    """One predicted collective. Times in microseconds, bandwidths in decimal GB/s."""

    collective: str
    nbytes: int
    nranks: int
    algorithm: str
    protocol: str
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    steps: int
    model: str = "engine"
    topology: str = ""
    nchannels: int = 1
    pipeline: int = 1
    link_bytes: dict = field(default_factory=dict)     # "src->dst" -> wire bytes (links that carried any)
    link_busy_us: dict = field(default_factory=dict)   # "src->dst" -> time spent serialising
    explain: dict = field(default_factory=dict)        # model terms (latency, bandwidth, bottleneck...)
    trace: object = None                               # sim.engine.trace_export.Trace when asked for

    @classmethod
    def of(cls, collective, nbytes: int, nranks: int, algorithm: str, protocol: str, time_us: float, steps: int,
           **rest) -> "Result":
        """A Result whose algbw and busbw are derived from the time (nccl-tests' definitions,
        :func:`sim.analytic.algbw_GBps` and :func:`sim.analytic.busbw_GBps`): the one way predictors
        build one. ``collective``: a name or a :class:`~sim.collectives.Collective`; ``rest``: the
        fields after ``steps`` (model, topology, nchannels, pipeline, link tables, explain, trace)."""
        from ..algorithms import analytic
        name = getattr(collective, "name", collective)
        return cls(name, nbytes, nranks, algorithm, protocol, time_us, analytic.algbw_GBps(nbytes, time_us),
                   analytic.busbw_GBps(name, nranks, nbytes, time_us), steps, **rest)

    def with_explain(self, **terms) -> "Result":
        """A copy with ``terms`` added to (or replacing) ``explain``: layers above a predictor say how
        they chose it without changing a Result another caller (or a cache) holds."""
        return replace(self, explain={**self.explain, **terms})

    def row(self) -> dict:
        """The JSON row of DESIGN.md's contract; ``in_nccl``: whether NCCL itself can run this
        algorithm for this collective (the algorithm registry's ``nccl`` field), false for the textbook ones."""
        from ..algorithms import in_nccl
        return {"nbytes": self.nbytes, "algorithm": self.algorithm, "protocol": self.protocol,
                "time_us": self.time_us, "algbw_GBps": self.algbw_GBps, "busbw_GBps": self.busbw_GBps,
                "steps": self.steps, "model": self.model, "nchannels": self.nchannels, "pipeline": self.pipeline,
                "in_nccl": in_nccl(self.algorithm, self.collective)}

    def bottleneck(self) -> tuple[str, float] | None:
        """The busiest link and its busy time (us), if the model tracks links."""
        if not self.link_busy_us:
            return None
        busy = self.link_busy_us
        name = max(busy, key=lambda k: busy[k])
        return name, self.link_busy_us[name]

    def to_json(self) -> str:
        return json.dumps({"topology": self.topology, "collective": self.collective, "nranks": self.nranks,
                           "results": [self.row()]}, indent=1)


@dataclass(frozen=True)
class EngineTiming:
    """What the engine measured for one prediction, before it is a :class:`Result` (:func:`engine_result`).

    ``program`` and ``run``: the program timed and its :class:`~sim.engine.fast.EngineRun` (shared with
    the run cache: read only); ``scale``: the share of the collective's bytes that run moved (under 1
    when the steady state is extrapolated; per-link tables are divided by it); ``latency_us`` +
    ``data_us``: the predicted time (NCCL's latency term, 0 for the ideal protocol, and the data
    movement); ``head`` and ``tail``: the model's explain terms before and after the run's own
    (``simulated_ops``, ``symmetric``)."""

    algorithm: str
    protocol: str
    steps: int
    nchannels: int
    pipeline: int
    program: "Program"
    run: "EngineRun"
    latency_us: float = 0.0
    data_us: float = 0.0
    scale: float = 1.0
    head: dict = field(default_factory=dict)
    tail: dict = field(default_factory=dict)


def engine_result(coll, nbytes: int, topo, timing: EngineTiming, trace: bool = False) -> Result:
    """The one place an engine run becomes a :class:`Result`, for the ideal and NCCL protocols alike:
    time, per-link tables (scaled to the whole collective), the trace (shifted by the latency term) and
    ``explain`` built once from what ran."""
    run, frac, lat = timing.run, timing.scale, timing.latency_us
    link_bytes, link_busy = link_tables(topo, run.link_bytes / frac, run.link_busy_us / frac) if frac != 1 else \
        link_tables(topo, run.link_bytes, run.link_busy_us)
    tr = None
    if trace:
        from .trace_export import Trace, expand_times
        start, end = expand_times(run, timing.program)
        tr = Trace(timing.program, start + lat, end + lat, timing.program.nbytes_per_chunk(nbytes))
    explain = {**timing.head, "simulated_ops": len(run.op_index), "symmetric": run.symmetric, **timing.tail}
    return Result.of(coll, nbytes, topo.nranks, timing.algorithm, timing.protocol, lat + timing.data_us, timing.steps,
                     model="engine", topology=topo.name, nchannels=timing.nchannels, pipeline=timing.pipeline,
                     link_bytes=link_bytes, link_busy_us=link_busy, explain=explain, trace=tr)


def link_tables(topology, link_bytes: np.ndarray, link_busy: np.ndarray) -> tuple[dict, dict]:
    """Per-link dicts for links that carried traffic (labels ``src->dst``)."""
    used = np.flatnonzero(link_bytes > 0)
    labels = [topology.link_label(i) for i in used]
    return (dict(zip(labels, link_bytes[used].tolist())), dict(zip(labels, link_busy[used].tolist())))
