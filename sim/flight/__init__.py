"""Hangs, faults and recovery: flight-recorder dumps, their analysis, a fault simulator, recovery costs.

- :func:`sim.flight.analyze.analyze` names the culprit rank(s) from every rank's dump, read by
  :func:`sim.flight.loader.load_dir` (PyTorch pickles or JSON, gloo or NCCL, or simulated);
- :func:`sim.flight.replay.run` runs a :class:`~sim.flight.rank_workload.Workload` with faults
  (:mod:`sim.flight.faults`) in simpy and returns the records each rank would dump;
- :mod:`sim.flight.scenarios` ties them together (``collsim flight simulate``);
- :mod:`sim.flight.recovery` compares shrinking the communicator with re-initialising.

Nothing here imports torch; the real gloo demo lives in ``real/measure/flight_demo.py``. See ``docs/flight.md``.

>>> from sim.flight.scenarios import load_scenario, run_scenario
>>> run_scenario(load_scenario("ddp-crash"))["diagnosis"]["culprits"]
[1]
"""
