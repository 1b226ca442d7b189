"""The ctypes binding to libnccl.so.2: version and unique id anywhere; communicators on a GPU."""
import os

import pytest

from real.measure import nccl_ctypes as nccl

LIB = nccl.find_library()
needs_lib = pytest.mark.skipif(LIB is None, reason="libnccl.so.2 not found: pip install nvidia-nccl-cu12 or set NCCL_LIBRARY")


def test_version_string():
    assert nccl.version_string(23203) == "2.32.3" and nccl.version_string(2708) == "2.7.8"


@needs_lib
def test_version_and_unique_id_without_a_gpu():
    lib = nccl.Nccl()
    code = lib.version()
    assert code >= 21800 and nccl.version_string(code).startswith("2.")
    a, b = lib.unique_id(), lib.unique_id()
    assert len(a) == 128 and a != b  # a fresh id each time


def test_library_lookup_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("NCCL_LIBRARY", str(tmp_path / "missing.so"))
    assert nccl.find_library() is None
    with pytest.raises(nccl.CollsimError, match="libnccl.so.2 not found"):
        nccl.Nccl()


@needs_lib
def test_bad_unique_id_is_refused():
    with pytest.raises(nccl.CollsimError, match="128 bytes"):
        nccl.Nccl().comm_init_rank(1, b"short", 0)


@pytest.mark.gpu
def test_single_rank_communicator_runs_collectives_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or LIB is None:
        pytest.skip("needs a CUDA GPU and libnccl.so.2 (run scripts/gpu_check.sh on a GPU machine)")
    lib = nccl.Nccl()
    comm = lib.comm_init_rank(1, lib.unique_id(), 0)
    try:
        x = torch.arange(1024, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        comm.all_reduce(x, y)
        comm.broadcast(x, y, root=0)
        out = torch.empty(1024, device="cuda")
        comm.all_gather(x, out)
        comm.all_to_all(x, y)
        torch.cuda.synchronize()
        assert torch.equal(y, x) and torch.equal(out, x)
    finally:
        comm.destroy()


def _two_gpu_rank(rank, uid, queue):
    import torch
    torch.cuda.set_device(rank)
    comm = nccl.Nccl().comm_init_rank(2, uid, rank)
    x = torch.full((4096,), float(rank + 1), device="cuda")
    comm.all_reduce(x, x)
    torch.cuda.synchronize()
    queue.put((rank, x.tolist()[:3]))
    comm.destroy()


@pytest.mark.gpu
def test_two_gpu_all_reduce_through_ctypes():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2 or LIB is None:
        pytest.skip("needs 2 CUDA GPUs and libnccl.so.2")
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.start_processes(_two_gpu_rank, args=(nccl.Nccl().unique_id(), q), nprocs=2, start_method="spawn")
    assert dict(q.get() for _ in range(2)) == {0: [3.0] * 3, 1: [3.0] * 3}
    assert os.environ.get("NCCL_LIBRARY") is None or LIB


@needs_lib
def test_communicator_without_a_gpu_fails_cleanly():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the GPU tests cover communicators")
    lib = nccl.Nccl()
    with pytest.raises(nccl.NcclError, match="ncclCommInitRank failed"):
        lib.comm_init_rank(1, lib.unique_id(), 0)
