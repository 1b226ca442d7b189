"""What a simulation returns: :class:`Result` (time, algbw, busbw, steps, per-link use, a trace).

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 20, "ring:n=4", algorithm="ring", protocol="ideal")
>>> r.steps, round(r.busbw_GBps, 1)
(6, 72.4)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np


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


def link_tables(topology, link_bytes: np.ndarray, link_busy: np.ndarray) -> tuple[dict, dict]:
    """Per-link dicts for links that carried traffic (labels ``src->dst``)."""
    used = np.flatnonzero(link_bytes > 0)
    return ({topology.link_label(i): float(link_bytes[i]) for i in used},
            {topology.link_label(i): float(link_busy[i]) for i in used})
