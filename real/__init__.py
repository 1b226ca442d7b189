"""Real runs of the six collectives, measured the way nccl-tests measures them.

``real`` runs on hardware what ``sim`` predicts: ``collsim bench`` sweeps sizes over torch.distributed
(NCCL on GPUs, gloo on CPUs) and prints nccl-tests' table or JSON; ``collsim env`` says what this machine
can run. Importing this package is cheap: torch is imported only by the modules that run collectives
(:mod:`real.measure.harness`, :mod:`real.measure.worker`, :mod:`real.measure.executor`), never by :mod:`real.measure_cli`,
:mod:`real.measure.options` or :mod:`real.measure.bench_report`, so ``collsim simulate`` works without torch.

Modules:

- :mod:`real.measure.options`  - the bench settings (flags -> :class:`~real.measure.options.BenchOptions`), sizes and
  per-rank element counts in nccl-tests' conventions. No torch.
- :mod:`real.measure.launch`   - starts N local ranks (or joins a torchrun job) and always cleans them up.
- :mod:`real.measure.worker`   - one rank: process group, sweep, output (``python -m real.measure.worker``).
- :mod:`real.measure.harness`  - warm-up, timed iterations, the ``#wrong`` check, the cross-rank average.
- :mod:`real.measure.torch_collectives` - the six collectives on torch tensors: buffers, calls, test data.
- :mod:`real.measure.backends` - what each backend can do and the notes printed with its numbers (gloo honesty).
- :mod:`real.measure.bench_report`   - nccl-tests table, JSON and CSV. No torch.
- :mod:`real.measure.envinfo`  - versions, GPUs, ``nvidia-smi topo -m``, NCCL_* variables; ``collsim env``.
- :mod:`real.measure.nccl_ctypes`     - ctypes binding to ``libnccl.so.2`` (version and unique id work without a GPU).
- :mod:`real.measure.executor` - runs a ``sim`` Program with torch point-to-point ops on real tensors.
"""
