"""Real jobs set against the model: readers of profiler traces, NCCL logs and flight-recorder timings."""
