"""Bench settings and nccl-tests' size conventions (no torch here: the CLI checks flags before it starts).

nccl-tests' ``size`` column is the bytes of one rank's buffer for all_reduce, broadcast and reduce, and
the *total* buffer (n shards) for all_gather, reduce_scatter and all_to_all, whose per-rank shard is
``size / nranks`` rounded down to a multiple of 16 bytes (``*GetCollByteCount`` in nccl-tests).

>>> lay = layout("all_gather", 1024, 4, 3)     # -b 1K, float, 3 ranks
>>> lay.count, lay.nbytes                       # 85 floats rounded down to 84 (16-byte multiple)
(84, 1008)
>>> layout("all_reduce", 1 << 20, 4, 8).count
262144
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from sim.collectives import get_collective
from sim.errors import CollsimError
from sim.io.validation import number
from sim.units import parse_size, size_sweep


@dataclass(frozen=True)
class DType:
    """An element type by its nccl-tests name. ``exact``: largest integer the type holds exactly
    (so test data made of small integers reduces without rounding)."""

    name: str
    torch_name: str
    nbytes: int
    kind: str  # "int", "uint" or "float"
    exact: int


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("int8", "int8", 1, "int", 127),
    DType("uint8", "uint8", 1, "uint", 255),
    DType("int32", "int32", 4, "int", 2**31 - 1),
    DType("uint32", "uint32", 4, "uint", 2**32 - 1),
    DType("int64", "int64", 8, "int", 2**63 - 1),
    DType("uint64", "uint64", 8, "uint", 2**64 - 1),
    DType("half", "float16", 2, "float", 2**11),
    DType("float", "float32", 4, "float", 2**24),
    DType("double", "float64", 8, "float", 2**53),
    DType("bfloat16", "bfloat16", 2, "float", 2**8),
    DType("f8e4m3", "float8_e4m3fn", 1, "float", 2**4),
    DType("f8e5m2", "float8_e5m2", 1, "float", 2**3),
)}
_DTYPE_ALIASES = {"char": "int8", "int": "int32", "float16": "half", "fp16": "half", "float32": "float",
                  "fp32": "float", "float64": "double", "fp64": "double", "bf16": "bfloat16"}
OPS = ("sum", "prod", "max", "min", "avg")  # nccl-tests' order for -o all
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
SHARDED = ("all_gather", "reduce_scatter", "all_to_all")  # S is the total buffer of n shards


@dataclass(frozen=True)
class Layout:
    """Element counts of one size: ``count`` is nccl-tests' ``count`` column (per-rank count passed to
    the collective), ``send``/``recv`` the buffer lengths in elements, ``nbytes`` the ``size`` column."""

    count: int
    send: int
    recv: int
    nbytes: int


def layout(collective: str, nbytes: int, eltsize: int, nranks: int) -> Layout:
    """nccl-tests' element counts for a ``size`` of ``nbytes`` (see the module docstring)."""
    count = nbytes // eltsize
    if collective in SHARDED:
        align = max(1, 16 // eltsize)
        base = (count // nranks) // align * align
        total = base * nranks
        send, recv = {"all_gather": (base, total), "reduce_scatter": (total, base),
                      "all_to_all": (total, total)}[collective]
        return Layout(base, send, recv, total * eltsize)
    return Layout(count, count, count, count * eltsize)


@dataclass(frozen=True)
class BenchOptions:
    """Everything one ``collsim bench`` run needs, checked; JSON-friendly so ranks get it by env var.

    Sizes in bytes, ``timeout_s`` in seconds. ``nccl_env`` are NCCL_* variables set for this run.
    """

    collective: str = "all_reduce"
    sizes: tuple[int, ...] = (32 << 20,)
    minbytes: int = 32 << 20
    maxbytes: int = 32 << 20
    stepfactor: float = 0.0
    stepbytes: int = 1 << 20
    iters: int = 20
    warmup: int = 1
    repeat: int = 1
    check: int = 1
    ops: tuple[str, ...] = ("sum",)
    dtypes: tuple[str, ...] = ("float",)
    root: int = 0
    average: int = 1
    backend: str = "gloo"
    nprocs: int = 2
    timeout_s: float = 300.0
    timer: str = "host"
    impl: str = "torch"
    fmt: str = "table"
    nccl_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # multi-node (real.measure.launchers, real.measure.rendezvous, real.measure.pairs): where rank 0's store listens, the token
    # file (the secret itself never goes in here: the options are printed in the JSON), --pairs
    listen: str | None = None
    token_file: str | None = None
    allow_no_token: bool = False
    pairs: bool = False
    threshold: float = 0.8
    topology: str | None = None
    plot: str | None = None

    def to_json(self) -> dict:
        from dataclasses import asdict
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "BenchOptions":
        data = dict(data)
        data.setdefault("repeat", 1)
        for key in ("sizes", "ops", "dtypes"):
            data[key] = tuple(data[key])
        data["nccl_env"] = tuple(tuple(kv) for kv in data["nccl_env"])
        return cls(**data)


def parse_dtypes(text: str) -> tuple[str, ...]:
    """``-d``: one nccl-tests type name (``float``, ``half``, ``bfloat16``, ``int8``...) or ``all``."""
    key = text.strip().lower()
    if key == "all":
        return tuple(DTYPES)
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise CollsimError(f"unknown data type {text!r}: use one of {', '.join(DTYPES)} or all")
    return (key,)


def parse_ops(text: str) -> tuple[str, ...]:
    """``-o``: sum, prod, min, max, avg or all."""
    key = text.strip().lower()
    if key == "all":
        return OPS
    if key not in OPS:
        raise CollsimError(f"unknown reduction {text!r}: use one of {', '.join(OPS)} or all")
    return (key,)


def parse_impl(text: str) -> str:
    """``--impl``: ``torch`` (torch.distributed's own collective) or ``program:NAME|FILE.py``."""
    if text == "torch" or (text.startswith("program:") and len(text) > len("program:")):
        return text
    raise CollsimError(f"unknown --impl {text!r}: use torch, program:ring (a sim algorithm) or program:my_algo.py")


def check_sweep(opts: BenchOptions) -> None:
    """Reject sizes the collective cannot run, before any process starts (one clear line)."""
    if opts.collective not in COLLECTIVES:
        raise CollsimError(f"unknown collective {opts.collective!r}: choose one of {', '.join(COLLECTIVES)}")
    for name, value, low in (("-n/--iters", opts.iters, 1), ("-w/--warmup_iters", opts.warmup, 0),
                             ("--repeat", opts.repeat, 1),
                             ("-c/--check", opts.check, 0), ("--nprocs", opts.nprocs, 1)):
        if value < low:
            raise CollsimError(f"{name} {value} is below {low}: give a whole number >= {low}")
    if opts.average not in (0, 1, 2, 3):
        raise CollsimError(f"-a/--average {opts.average} is not 0 (rank 0), 1 (average), 2 (min) or 3 (max)")
    number(opts.timeout_s, "--timeout", low=0, low_open=True, high=7 * 24 * 3600, example="300")  # nan/inf too
    if get_collective(opts.collective).rooted and not 0 <= opts.root < opts.nprocs:
        raise CollsimError(f"root {opts.root} is not a rank of a {opts.nprocs}-rank job: use -r 0..{opts.nprocs - 1}")
    for dname in opts.dtypes:
        dt = DTYPES[dname]
        for nbytes in opts.sizes:
            # the first size is -b itself; the others come from -e with -f/-i (the last is not always -e)
            label = "-b/--minbytes" if nbytes == opts.sizes[0] else "sweep size (from -b/-e with -f/-i)"
            if nbytes < dt.nbytes:
                raise CollsimError(f"{label} {nbytes} B is below the {dt.nbytes}-byte size of one {dname}: use at least {dt.nbytes}")
            if nbytes % dt.nbytes:
                raise CollsimError(f"{label} {nbytes} B is not a multiple of the {dt.nbytes}-byte {dname} element: "
                                   f"use {nbytes // dt.nbytes * dt.nbytes} or {(nbytes // dt.nbytes + 1) * dt.nbytes}")
        smallest = min(opts.sizes)
        if layout(opts.collective, smallest, dt.nbytes, opts.nprocs).count == 0:
            need = opts.nprocs * max(16, dt.nbytes)
            raise CollsimError(f"size {smallest} B gives each of {opts.nprocs} ranks no {dname} element for {opts.collective} "
                               f"(the per-rank shard is rounded down to 16 bytes, as in nccl-tests): use -b {need} or more")


def sweep_sizes(minbytes: str | int, maxbytes: str | int, stepfactor: float, stepbytes: str | int) -> tuple[int, ...]:
    """The sizes of a sweep, from the flags as typed (``-b 8 -e 128M -f 2``)."""
    lo, hi, step = parse_size(minbytes), parse_size(maxbytes), parse_size(stepbytes)
    if stepfactor and stepfactor > 1 and lo == 0:
        raise CollsimError("-b 0 with -f never grows: start the sweep at 8 bytes or more")
    sizes = size_sweep(lo, hi, factor=stepfactor, step=step)
    return tuple(sizes)


_NCCL_ALGOS = re.compile(r"^[\w^,:;]+$")  # Ring, ^NVLS, LL128, allreduce:tree;broadcast:ring


def nccl_env(algo: str | None, proto: str | None, channels: int | None) -> tuple[tuple[str, str], ...]:
    """NCCL_* variables for ``--nccl-algo/--nccl-proto/--nccl-channels`` (NCCL reads them at init)."""
    env = []
    if algo:
        if not _NCCL_ALGOS.match(algo):
            raise CollsimError(f"--nccl-algo {algo!r} is not an NCCL_ALGO value: use e.g. Ring, Tree, NVLS or ^NVLS")
        env.append(("NCCL_ALGO", algo))
    if proto:
        if not _NCCL_ALGOS.match(proto):
            raise CollsimError(f"--nccl-proto {proto!r} is not an NCCL_PROTO value: use LL, LL128 or Simple")
        env.append(("NCCL_PROTO", proto))
    if channels is not None:
        if channels < 1:
            raise CollsimError(f"--nccl-channels {channels} must be at least 1")
        env += [("NCCL_MIN_NCHANNELS", str(channels)), ("NCCL_MAX_NCHANNELS", str(channels))]
    return tuple(env)
