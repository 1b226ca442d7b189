"""Real jobs set against the model: readers of profiler traces, NCCL debug logs and flight-recorder timings.

    from sim.evidence import read_job, compare_job
    doc = compare_job(read_job(["traces/"]), load_topology("dgx-h100"))
    doc["collectives"][0]["measured_us"], doc["collectives"][0]["predicted_us"]

Modules: :mod:`~sim.evidence.job` (the common ``Call`` record and the byte convention),
:mod:`~sim.evidence.kineto` (PyTorch profiler traces), :mod:`~sim.evidence.nccl_log` (``NCCL_DEBUG=INFO``
logs and the topology they describe), :mod:`~sim.evidence.flight_timing` (flight-recorder dumps with
timings), :mod:`~sim.evidence.load` (which reader a path needs), :mod:`~sim.evidence.job_compare` (measured vs
predicted, NCCL's choice vs the model's, step shares, stragglers), :mod:`~sim.evidence.trace_report` (table,
Markdown, HTML), :mod:`~sim.evidence.trace_whatif` (``collsim plan --from-trace``). The simulator core never
imports this package. See docs/traces.md.
"""
from .job_compare import compare_job
from .load import read_job

__all__ = ["compare_job", "read_job"]
