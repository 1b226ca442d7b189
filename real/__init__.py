"""Real runs of the six collectives, measured the way nccl-tests measures them.

``real`` runs on hardware what ``sim`` predicts: ``collsim bench`` sweeps sizes over torch.distributed
(NCCL on GPUs, gloo on CPUs) and prints nccl-tests' table or JSON; ``collsim env`` says what this machine
can run. Importing this package is cheap: torch is imported only by the modules that run collectives
(:mod:`real.harness`, :mod:`real.worker`, :mod:`real.executor`), never by :mod:`real.commands`,
:mod:`real.options` or :mod:`real.report`, so ``collsim simulate`` works without torch.

Modules:

- :mod:`real.options`  - the bench settings (flags -> :class:`~real.options.BenchOptions`), sizes and
  per-rank element counts in nccl-tests' conventions. No torch.
- :mod:`real.launch`   - starts N local ranks (or joins a torchrun job) and always cleans them up.
- :mod:`real.worker`   - one rank: process group, sweep, output (``python -m real.worker``).
- :mod:`real.harness`  - warm-up, timed iterations, the ``#wrong`` check, the cross-rank average.
- :mod:`real.collectives` - the six collectives on torch tensors: buffers, calls, test data.
- :mod:`real.backends` - what each backend can do and the notes printed with its numbers (gloo honesty).
- :mod:`real.report`   - nccl-tests table, JSON and CSV. No torch.
- :mod:`real.envinfo`  - versions, GPUs, ``nvidia-smi topo -m``, NCCL_* variables; ``collsim env``.
- :mod:`real.nccl`     - ctypes binding to ``libnccl.so.2`` (version and unique id work without a GPU).
- :mod:`real.executor` - runs a ``sim`` Program with torch point-to-point ops on real tensors.
"""
