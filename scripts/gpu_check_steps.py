"""The Python steps of scripts/gpu_check.sh, one per subcommand (each prints a few lines and exits 0 or 1).

    python scripts/gpu_check_steps.py nccl-allreduce           # real ncclAllReduce, 1 rank, CUDA memory, checked
    python scripts/gpu_check_steps.py flight DIR BACKEND       # a flight-recorder dump written by the backend
    python scripts/gpu_check_steps.py copy-bw TOPOLOGY         # device-to-device copy GB/s beside the preset's figure

On a machine without a GPU the CUDA steps say so and exit 0 with "skipped" (the script runs on the CPU as
``BACKEND=gloo NGPUS=1`` to check itself); they never print a GPU number they did not measure.
"""
from __future__ import annotations

import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def nccl_allreduce() -> int:
    import torch

    from real.measure import nccl_ctypes as nccl
    if not torch.cuda.is_available():
        print("ncclAllReduce: skipped (no CUDA GPU visible to torch)")
        return 0
    path = nccl.find_library()
    if not path:
        print("ncclAllReduce: FAILED: libnccl.so.2 not found (pip install nvidia-nccl-cu12)")
        return 1
    lib = nccl.Nccl(path)
    comm = lib.comm_init_rank(1, lib.unique_id(), 0)
    try:
        n = 1 << 20
        send = torch.arange(n, dtype=torch.float32, device="cuda") % 1000   # exact in float32
        recv = torch.full((n,), -1.0, device="cuda")
        stream = torch.cuda.current_stream()
        comm.all_reduce(send, recv, "sum", stream)
        torch.cuda.synchronize()
        wrong = int((recv != send).sum().item())     # one rank: the sum is the rank's own data
    finally:
        comm.destroy()
    print(f"ncclAllReduce (real.measure.nccl_ctypes ctypes, NCCL {nccl.version_string(lib.version())}, 1 rank, {n} floats on "
          f"{torch.cuda.get_device_name(0)}): {wrong} wrong elements -> {'OK' if wrong == 0 else 'FAILED'}")
    return 0 if wrong == 0 else 1


def flight(directory: str, backend: str) -> int:
    """One rank runs three all_reduces on ``backend`` and writes PyTorch's flight-recorder dump to
    DIR/rank_0, which ``collsim flight analyze DIR`` then reads."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    import torch
    import torch.distributed as dist
    if backend == "nccl" and not torch.cuda.is_available():
        print("flight recorder (nccl): skipped (no CUDA GPU visible to torch)")
        return 0
    os.makedirs(directory, exist_ok=True)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("GPU_CHECK_PORT", "29531"))
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    dist.init_process_group(backend, rank=0, world_size=1, timeout=datetime.timedelta(seconds=60),
                            device_id=device if device.type == "cuda" else None)
    try:
        x = torch.ones(1024, device=device)
        for _ in range(3):
            dist.all_reduce(x)
        if device.type == "cuda":
            torch.cuda.synchronize()
        c10d = torch._C._distributed_c10d
        dump = c10d._dump_nccl_trace() if backend == "nccl" and hasattr(c10d, "_dump_nccl_trace") else c10d._dump_fr_trace()
    finally:
        dist.destroy_process_group()
    with open(os.path.join(directory, "rank_0"), "wb") as f:
        f.write(dump)
    print(f"flight recorder ({backend}): {len(dump)} bytes dumped to {directory}/rank_0")
    return 0


def copy_bw(topology: str) -> int:
    """Copy 256 MiB device to device (GPU 0 -> GPU 1 over NVLink/PCIe when there are two; on one GPU a
    copy within its memory) and print GB/s beside the preset's NVLink figure."""
    import torch

    from sim.presets import load_topology
    if not torch.cuda.is_available():
        print("device-to-device copy: skipped (no CUDA GPU visible to torch)")
        return 0
    nbytes, reps = 256 << 20, 10
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    two = torch.cuda.device_count() >= 2
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda:1" if two else "cuda:0")
    dst.copy_(src)   # warm-up (and peer mapping)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        dst.copy_(src)
    end.record()
    end.synchronize()
    gbps = nbytes * reps / (start.elapsed_time(end) / 1e3) / 1e9
    try:
        meta = load_topology(topology).meta
        figure = f"{topology}: NVLink {meta.get('nvlink_GBps', 'n/a')} GB/s per direction per GPU"
    except Exception as e:   # a spec for fewer than 2 GPUs cannot be built; say so, do not invent a figure
        figure = f"{topology}: no preset figure ({str(e).splitlines()[0][:120]})"
    what = "GPU 0 -> GPU 1" if two else "within GPU 0 (its memory: read + write, not NVLink)"
    print(f"device-to-device copy {what}: {gbps:.1f} GB/s measured | preset {figure}")
    return 0


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "nccl-allreduce":
        return nccl_allreduce()
    if cmd == "flight" and len(rest) == 2:
        return flight(*rest)
    if cmd == "copy-bw" and len(rest) == 1:
        return copy_bw(rest[0])
    print(f"gpu_check_steps: unknown step {' '.join(argv)!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
