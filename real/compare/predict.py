"""Predictions to set beside measurements: :func:`sim.simulate`, split into its latency and bandwidth
terms, plus the host-side work of a calibrated CPU model.

A topology written by ``collsim calibrate`` carries its fit under ``meta.calibration``: the per-call
overhead (``launch_us``, charged once per collective), the algorithm the measured library runs (gloo:
``ring``), and the host model (:mod:`real.compare.hostmodel`) with its memory rate ``host_GBps``. A
:class:`Predictor` on such a topology predicts (the links already are the measured library's, so the
simulator runs its ``ideal`` latency-bandwidth protocol, shown as ``calibrated``)

    time = launch_us + simulate(collective, S, topology, algorithm, "ideal") + host_bytes * knee / host_GBps

(``knee``: :func:`~real.compare.hostmodel.cache_factor` of the recorded ``host_cache``, 1 without one)

and on any other topology (a preset, a hand-written file) it is exactly ``sim.simulate`` with the
algorithm and protocol the simulator selects.

Each :class:`Prediction` also says how much of its time is latency: the simulator's own latency term
where it reports one (NCCL protocols), else the difference to the same run with every link latency at
zero. That is what lets a comparison say whether a miss comes from alpha or from beta.

>>> p = Predictor("ring:n=4,bandwidth_GBps=100,latency_us=1", algorithm="ring", protocol="ideal")
>>> r = p.predict("all_reduce", 4_000_000)
>>> round(r.time_us, 3), round(r.latency_us, 3), round(r.bandwidth_us, 3)
(66.0, 6.0, 60.0)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import sim
from sim.algorithms import analytic, why_not
from sim.collectives import get_collective
from sim.errors import CollsimError
from sim.presets import load_topology
from sim.topology import Topology

from .hostmodel import cache_factor, host_bytes


@dataclass(frozen=True)
class Prediction:
    """One predicted size. Times in microseconds, bandwidths in decimal GB/s."""

    collective: str
    nbytes: int
    nranks: int
    time_us: float
    algorithm: str
    protocol: str
    steps: int
    latency_us: float        # the part of the simulator's time that latencies cause
    bandwidth_us: float      # the simulator's time with every latency set to zero
    host_us: float = 0.0     # host-side copies and reductions (calibrated CPU models only)
    notes: tuple[str, ...] = ()

    @property
    def algbw_GBps(self) -> float:
        return analytic.algbw_GBps(self.nbytes, self.time_us)

    @property
    def busbw_GBps(self) -> float:
        return analytic.busbw_GBps(self.collective, self.nranks, self.nbytes, self.time_us)

    @property
    def regime(self) -> str:
        """``latency-bound`` when latencies and per-call overhead are most of the time, else ``bandwidth-bound``."""
        return "latency-bound" if self.latency_us > self.bandwidth_us + self.host_us else "bandwidth-bound"


def calibration_of(topology: Topology) -> dict | None:
    """The ``meta.calibration`` mapping a calibrated topology carries, or None."""
    cal = topology.hardware.calibration
    return cal if isinstance(cal, dict) else None


def _zero_latency(topo: Topology) -> Topology:
    links = [replace(l, latency_us=0.0) for l in topo.links]
    return Topology.build(topo.name + " (no latency)", topo.nodes, links, topo.hardware)


@dataclass(frozen=True, eq=False)
class Predictor:
    """Predicts collectives on one topology. ``algorithm``/``protocol``: ``auto`` or a name (as for
    ``collsim simulate``); ``model``: ``engine``, ``tuner`` or ``alpha-beta``."""

    topology: object
    algorithm: str = "auto"
    protocol: str = "auto"
    model: str = "engine"
    topo: Topology = field(init=False)
    flat: Topology = field(init=False)
    calibration: dict | None = field(init=False)

    def __post_init__(self):
        topo = load_topology(self.topology)
        object.__setattr__(self, "topo", topo)
        object.__setattr__(self, "flat", _zero_latency(topo))
        object.__setattr__(self, "calibration", calibration_of(topo))

    def describe(self) -> str:
        cal = self.calibration
        if not cal:
            return f"sim.simulate on {self.topo.name} (algorithm {self.algorithm}, protocol {self.protocol}, model {self.model})"
        return (f"calibrated model {self.topo.name}: links {cal.get('link_bandwidth_GBps', 0):.3g} GB/s, "
                f"{cal.get('link_latency_us', 0):.3g} us; per-call {cal.get('launch_us', 0):.3g} us; "
                f"host model {cal.get('host_model', 'none')}")

    def _protocol(self) -> str:
        # a calibrated model's links already are the measured library's: no NCCL protocol on top
        return "ideal" if self.calibration and self.protocol == "auto" else self.protocol

    def _algorithm(self) -> str:
        cal = self.calibration
        if cal and self.algorithm == "auto" and cal.get("algorithm", "auto") != "auto":
            return str(cal["algorithm"])
        return self.algorithm

    def predict(self, collective, nbytes: int, nranks: int | None = None) -> Prediction:
        """Predict one size; ``nranks`` (if given) must match the topology's GPU count."""
        coll = get_collective(collective)
        topo = self.topo
        if nranks is not None and nranks != topo.nranks:
            raise CollsimError(f"the measurement has {nranks} ranks but topology {topo.name} has {topo.nranks} GPUs: "
                               f"use a topology with {nranks} (e.g. switch:n={nranks}, dgx-a100:gpus_per_node={nranks})")
        algorithm, protocol = self._algorithm(), self._protocol()
        if algorithm != "auto":
            reason = why_not(algorithm, coll, topo.nranks, topo)
            if reason:
                raise CollsimError(f"cannot predict with --algorithm {algorithm} on {topo.name}: {reason}")
        r = sim.simulate(coll, int(nbytes), topo, algorithm, protocol, model=self.model)
        latency = r.explain.get("latency_us") if isinstance(r.explain.get("latency_us"), (int, float)) else None
        if latency is None:
            # the same run with every link latency at zero is the bandwidth term; the rest is latency
            kw = {"nchannels": r.nchannels, "pipeline": r.pipeline} if r.model == "engine" else {}
            flat = sim.simulate(coll, int(nbytes), self.flat, r.algorithm, r.protocol, model=self.model, **kw).time_us
            latency = r.time_us - min(flat, r.time_us)
        latency = min(max(float(latency), 0.0), r.time_us)
        host_us, launch, notes = 0.0, 0.0, ()
        cal = self.calibration
        if cal:
            launch = float(cal.get("launch_us", 0.0))
            if cal.get("host_model", "none") != "none":
                hb = host_bytes(cal["host_model"], coll.name, nbytes, topo.nranks)
                if hb is None:
                    notes = (f"host-side work of {coll.name} is not modelled for {cal['host_model']}: links only",)
                else:
                    knee = cache_factor(coll.name, nbytes, topo.nranks, cal.get("host_cache"))
                    host_us = hb * knee / (float(cal["host_GBps"]) * 1e3)
        protocol_name = "calibrated" if cal and r.protocol == "ideal" else r.protocol
        return Prediction(coll.name, int(nbytes), topo.nranks, r.time_us + launch + host_us, r.algorithm,
                          protocol_name, r.steps, latency + launch, r.time_us - latency, host_us, notes)
