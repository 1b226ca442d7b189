"""The NCCL layer: what NCCL would do on a machine, in one package, read top to bottom.

* :mod:`sim.nccl.constants`   NCCL's own numbers (wire formats, latency tables, speed lists), with sources.
* :mod:`sim.nccl.calibration` the few constants collsim fits (per fabric, launch costs), with the cases.
* :mod:`sim.nccl.protocols`   LL / LL128 / Simple (and ``ideal``) as the engine sees them; chunk sizes.
* :mod:`sim.nccl.machine`     what NCCL sees of a machine (topology detection) and its channel search.
* :mod:`sim.nccl.tuner`       NCCL's cost model: (latency, bandwidth) per (algorithm, protocol).
* :mod:`sim.nccl.execution`        how NCCL runs one collective (channels over NICs, chunks, latency term),
                              and the engine run under that plan.
* :mod:`sim.nccl.select`      which (algorithm, protocol) NCCL picks, and whether another is faster.

Nothing is imported here, so ``import sim.nccl.constants`` stays cheap and no import order matters.
"""
