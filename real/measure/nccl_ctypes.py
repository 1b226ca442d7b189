"""A small ctypes binding to NCCL's ``libnccl.so.2`` (from the ``nvidia-nccl-cu12`` wheel).

Why: to ask the library itself (version, unique id) on any machine, and to call NCCL's collectives on
GPU tensors without torch.distributed in between. ``ncclGetVersion`` and ``ncclGetUniqueId`` work
without a GPU; communicators and collectives need one (tensors are torch CUDA tensors; calls are
enqueued on torch's current stream, as torch does).

The library is found through ``NCCL_LIBRARY`` (a path to libnccl.so.2) or the installed
``nvidia.nccl`` package (``pip install nvidia-nccl-cu12``).

>>> lib = Nccl()                                   # doctest: +SKIP
>>> version_string(lib.version())                  # doctest: +SKIP
'2.32.3'
>>> len(lib.unique_id())                           # doctest: +SKIP
128

On GPUs, one communicator per rank (the unique id travels from rank 0 to the others, e.g. with
``torch.distributed.broadcast_object_list``)::

    comm = lib.comm_init_rank(nranks, uid, rank)   # after torch.cuda.set_device(local_rank)
    comm.all_reduce(x, x)                           # x: a CUDA tensor; sum in place
    comm.destroy()
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from contextlib import contextmanager

from sim.errors import CollsimError

UNIQUE_ID_BYTES = 128
_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
# torch dtype name -> ncclDataType_t (nccl.h)
_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "float32": 7, "float64": 8, "bfloat16": 9, "float8_e4m3fn": 10, "float8_e5m2": 11}


class NcclError(RuntimeError):
    """A call into libnccl returned an error code; the message is NCCL's own text."""


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


def find_library() -> str | None:
    """Path of libnccl.so.2: ``$NCCL_LIBRARY``, else the ``nvidia.nccl`` package's ``lib/``, else None."""
    env = os.environ.get("NCCL_LIBRARY")
    if env:
        return env if os.path.exists(env) else None
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        spec = None
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(base, "lib", "libnccl.so.2")
        if os.path.exists(path):
            return path
    return None


def version_string(code: int) -> str:
    """``23203`` -> ``'2.32.3'`` (NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older major*1000)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


class Nccl:
    """The loaded library. ``path``: defaults to :func:`find_library`."""

    def __init__(self, path: str | None = None):
        path = path or find_library()
        if not path:
            raise CollsimError("libnccl.so.2 not found: pip install nvidia-nccl-cu12, or set NCCL_LIBRARY to its path")
        self.path = path
        self.lib = ctypes.CDLL(path)
        L, P, I, S = self.lib, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        L.ncclGetErrorString.restype = ctypes.c_char_p
        L.ncclGetErrorString.argtypes = [I]
        sigs = {"ncclGetVersion": [ctypes.POINTER(I)], "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
                "ncclCommInitRank": [ctypes.POINTER(P), I, UniqueId, I], "ncclCommDestroy": [P],
                "ncclCommInitAll": [ctypes.POINTER(P), I, ctypes.POINTER(I)],
                "ncclCommFinalize": [P], "ncclGroupStart": [], "ncclGroupEnd": [],
                "ncclAllReduce": [P, P, S, I, I, P, P], "ncclReduce": [P, P, S, I, I, I, P, P],
                "ncclBroadcast": [P, P, S, I, I, P, P], "ncclAllGather": [P, P, S, I, P, P],
                "ncclReduceScatter": [P, P, S, I, I, P, P], "ncclSend": [P, S, I, I, P, P],
                "ncclRecv": [P, S, I, I, P, P], "ncclAlltoAll": [P, P, S, I, P, P]}
        for name, args in sigs.items():
            fn = getattr(L, name, None)  # ncclAlltoAll is new (2.28): older libraries lack it
            if fn is not None:
                fn.argtypes, fn.restype = args, I

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise NcclError(f"{what} failed: {self.lib.ncclGetErrorString(code).decode()} (ncclResult_t {code})")

    def version(self) -> int:
        """NCCL_VERSION_CODE of the library, e.g. 23203 for 2.32.3 (no GPU needed)."""
        v = ctypes.c_int()
        self.check(self.lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
        return v.value

    def unique_id(self) -> bytes:
        """A fresh ncclUniqueId (128 bytes) for rank 0 to share with the others (no GPU needed)."""
        uid = UniqueId()
        self.check(self.lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)  # all 128 bytes, NULs included

    def comm_init_rank(self, nranks: int, uid: bytes, rank: int) -> "Communicator":
        """Join a communicator on the current CUDA device (collective: every rank must call it)."""
        if len(uid) != UNIQUE_ID_BYTES:
            raise CollsimError(f"an NCCL unique id is {UNIQUE_ID_BYTES} bytes, got {len(uid)}: pass Nccl.unique_id()'s value")
        comm, cid = ctypes.c_void_p(), UniqueId()
        ctypes.memmove(ctypes.addressof(cid), uid, UNIQUE_ID_BYTES)
        self.check(self.lib.ncclCommInitRank(ctypes.byref(comm), nranks, cid, rank), "ncclCommInitRank")
        return Communicator(self, comm, nranks, rank)

    def comm_init_all(self, ndev: int) -> list["Communicator"]:
        """One communicator of ``ndev`` ranks on CUDA devices 0..ndev-1, all in this process
        (``ncclCommInitAll``; needs those GPUs)."""
        if ndev < 1:
            raise CollsimError(f"ncclCommInitAll needs at least one GPU, got {ndev}")
        comms, devs = (ctypes.c_void_p * ndev)(), (ctypes.c_int * ndev)(*range(ndev))
        self.check(self.lib.ncclCommInitAll(comms, ndev, devs), "ncclCommInitAll")
        return [Communicator(self, ctypes.c_void_p(comms[i]), ndev, i) for i in range(ndev)]

    @contextmanager
    def group(self):
        """``ncclGroupStart``/``ncclGroupEnd`` around several calls (needed for paired send/recv)."""
        self.check(self.lib.ncclGroupStart(), "ncclGroupStart")
        try:
            yield
        finally:
            self.check(self.lib.ncclGroupEnd(), "ncclGroupEnd")


def _ptr_type(t):
    if not t.is_cuda:
        raise CollsimError("NCCL works on GPU memory: move the tensor to CUDA first (x.cuda())")
    name = str(t.dtype).removeprefix("torch.")
    if name not in _TYPES:
        raise CollsimError(f"NCCL has no {name} type: use one of {', '.join(_TYPES)}")
    return ctypes.c_void_p(t.data_ptr()), _TYPES[name]


def _stream(stream):
    if stream is None:
        import torch
        stream = torch.cuda.current_stream()
    return ctypes.c_void_p(stream.cuda_stream)


class Communicator:
    """One rank's NCCL communicator. Methods take torch CUDA tensors; counts are in elements, as NCCL."""

    def __init__(self, nccl: Nccl, handle: ctypes.c_void_p, nranks: int, rank: int):
        self.nccl, self.handle, self.nranks, self.rank = nccl, handle, nranks, rank

    def _call(self, name: str, *args) -> None:
        self.nccl.check(getattr(self.nccl.lib, name)(*args), name)

    def all_reduce(self, send, recv, op: str = "sum", stream=None) -> None:
        (s, dt), (r, _) = _ptr_type(send), _ptr_type(recv)
        self._call("ncclAllReduce", s, r, send.numel(), dt, _OPS[op], self.handle, _stream(stream))

    def reduce(self, send, recv, root: int, op: str = "sum", stream=None) -> None:
        (s, dt), (r, _) = _ptr_type(send), _ptr_type(recv)
        self._call("ncclReduce", s, r, send.numel(), dt, _OPS[op], root, self.handle, _stream(stream))

    def broadcast(self, send, recv, root: int, stream=None) -> None:
        (s, dt), (r, _) = _ptr_type(send), _ptr_type(recv)
        self._call("ncclBroadcast", s, r, recv.numel(), dt, root, self.handle, _stream(stream))

    def all_gather(self, send, recv, stream=None) -> None:
        """``recv`` holds nranks x send.numel() elements."""
        (s, dt), (r, _) = _ptr_type(send), _ptr_type(recv)
        self._call("ncclAllGather", s, r, send.numel(), dt, self.handle, _stream(stream))

    def reduce_scatter(self, send, recv, op: str = "sum", stream=None) -> None:
        """``send`` holds nranks x recv.numel() elements."""
        (s, dt), (r, _) = _ptr_type(send), _ptr_type(recv)
        self._call("ncclReduceScatter", s, r, recv.numel(), dt, _OPS[op], self.handle, _stream(stream))

    def all_to_all(self, send, recv, stream=None) -> None:
        """Block d of ``send`` goes to rank d; blocks are send.numel() / nranks elements."""
        (s, dt), (r, _) = _ptr_type(send), _ptr_type(recv)
        block = send.numel() // self.nranks
        if getattr(self.nccl.lib, "ncclAlltoAll", None) is not None:
            self._call("ncclAlltoAll", s, r, block, dt, self.handle, _stream(stream))
            return
        with self.nccl.group():  # before NCCL 2.28: grouped send/recv, as nccl-tests did
            for peer in range(self.nranks):
                self.send(send[peer * block:(peer + 1) * block], peer, stream)
                self.recv(recv[peer * block:(peer + 1) * block], peer, stream)

    def send(self, t, peer: int, stream=None) -> None:
        p, dt = _ptr_type(t)
        self._call("ncclSend", p, t.numel(), dt, peer, self.handle, _stream(stream))

    def recv(self, t, peer: int, stream=None) -> None:
        p, dt = _ptr_type(t)
        self._call("ncclRecv", p, t.numel(), dt, peer, self.handle, _stream(stream))

    def destroy(self) -> None:
        """Finalize (flush outstanding work) and free the communicator."""
        if self.handle:
            if getattr(self.nccl.lib, "ncclCommFinalize", None) is not None:  # NCCL >= 2.14
                self._call("ncclCommFinalize", self.handle)
            self._call("ncclCommDestroy", self.handle)
            self.handle = None
