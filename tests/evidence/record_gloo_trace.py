"""Record a CPU profiler trace of two gloo ranks with known collectives (run as a script: spawn re-imports it).

    python record_gloo_trace.py OUT_DIR

Per rank: all_reduce of 4 KiB x3 and 64 KiB x3 (float32), all_gather of 16 KiB per rank x2, one broadcast of
8 KiB; ``OUT_DIR/rank{r}.trace.json``. ``CALLS`` below is what the tests expect to read back.
"""
import os
import sys

CALLS = {("all_reduce", 4096): 3, ("all_reduce", 65536): 3, ("all_gather", 16384): 2, ("broadcast", 8192): 1}


def main(rank, world, out, init):
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for nbytes in (4096, 65536):
            x = torch.ones(nbytes // 4)
            for _ in range(3):
                dist.all_reduce(x)
        y = torch.ones(16384 // 4)
        outs = [torch.empty_like(y) for _ in range(world)]
        for _ in range(2):
            dist.all_gather(outs, y)
        dist.broadcast(torch.ones(8192 // 4), 0)
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.trace.json"))
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp
    out = sys.argv[1]
    init = "file://" + os.path.join(os.path.dirname(os.path.abspath(out)), "rendezvous")
    mp.spawn(main, args=(2, out, init), nprocs=2)
