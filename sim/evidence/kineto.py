"""Read PyTorch profiler traces (Kineto's Chrome-trace JSON, plain or gzipped) into :class:`~sim.evidence.job.Call`.

A trace holds, per rank, two kinds of communication events:

- **launches**, on the CPU thread that issued the call: ``c10d::allreduce_`` (the dispatcher op),
  ``record_param_comms`` (with ``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
  ``dtype``, ``Process Group Ranks`` in PyTorch >= 2.1) and ``nccl:all_reduce`` (with ``Input Dims``);
  they nest, and the nest is one call;
- **work**: the NCCL kernel on the GPU (``ncclKernel_AllReduce_RING_LL_Sum_float`` before NCCL 2.19,
  ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` after; ``SendRecv`` for all_to_all and send/recv), PyTorch's
  symmetric-memory kernels (``multimem_all_reduce_kernel``: no NCCL), or on CPU traces the gloo worker's
  ``gloo:all_reduce`` annotation.

Work is tied to its launch through the CUDA runtime call with the same ``correlation`` (the launch
encloses it on the same thread), else the shared ``External id``, else by order among calls of the same
kind. The algorithm and protocol in a kernel name are those of the kernel *launched*; NCCL may run
another protocol inside it (docs/traces.md), so they are reported as a hint (``choice_source``).

Bounded work: files over :data:`MAX_FILE_BYTES`, gzip members expanding past :data:`MAX_JSON_BYTES`, and
traces with more than :data:`MAX_EVENTS` events are refused with one line. The bytes alone do not bound
memory: a real trace's JSON takes ~2-3x its size in Python objects, but ``{},{},...`` (a 175 KB gzip of
60 million empty events) takes ~25x, so ``json.loads`` would hold GBs before the events could be counted.
So, before parsing, the text's objects and lists (``{``, ``[``) and values (``,``) are counted (a count that
text inside strings can only raise) and a trace with more than :data:`MAX_CONTAINERS` or
:data:`MAX_VALUES` is refused: no real trace under the byte limit comes near them. Running out of memory
anyway is reported naming the file.

Times no profiler records are refused in one line naming the event, as ``collsim validate`` refuses such a
row of nccl-tests' table: a complete event ("ph": "X") with a negative or non-finite ``dur`` or one over
:data:`MAX_EVENT_US` (a day), or a ``ts`` that is not finite or beyond :data:`MAX_TS_US`. Skipping them
would change the calls counted and the step's shares without a word; one corrupted event is a damaged
file. So is a complete event without a text name or numeric ``ts``/``dur``, and one whose ``pid``/``tid`` or
``args`` ``correlation``/``External id`` (the keys that tie events together) is a list or an object.
"""
from __future__ import annotations

import bisect
import gc
import math
import os
import re
from dataclasses import dataclass, field

from ..collectives import COLLECTIVES
from ..errors import CollsimError
from ..io.printable import short_repr
from ..io.safe_io import GZIP_MAGIC, GzipDamaged, GzipTooLarge, gunzip, load_json, read_input
from .job import MAX_EVENT_US, P2P, Call, Job, NotEvidence, dtype_bytes, op_of

MAX_FILE_BYTES = 512 << 20    # the largest published trace is 1.8 MB gzipped; real multi-step traces reach ~1 GB
MAX_JSON_BYTES = 512 << 20     # decompressed (a real trace's objects take ~2-3x that; a bomb's, see MAX_CONTAINERS)
MAX_EVENTS = 5_000_000
# Counted in the text before it is parsed (see the module docstring). The published traces hold ~4.7 objects
# and lists and ~15 commas per event, at 240-580 bytes an event: 512 MiB of such JSON has at most ~9 million
# of the one and ~27 million of the other. At these caps the objects cost at most ~0.7 GB and ~2.5 GB in all.
MAX_CONTAINERS = 10_000_000
MAX_VALUES = 40_000_000
# Timestamps are microseconds since the epoch (1.7e15 in 2024) or since the trace started; 2**53 us is the
# year 2255, and below it every microsecond is exact in a float.
MAX_TS_US = float(2**53)

_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_ALGO_PROTO = re.compile(r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE)(?=_|\(|$)")
_KERNEL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
               "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "sendrecv", "AllToAll": "all_to_all"}
_SENDRECV = "sendrecv"  # the kind of NCCL's point-to-point kernel (all_to_all, send, recv)
_KERNEL_KINDS = frozenset(_KERNEL_OPS.values()) | {"all_reduce"}
# NCCL's names -> collsim's (sim.algorithms and sim.nccl.protocols)
ALGORITHMS = {"RING": "ring", "TREE": "tree", "COLLNET_DIRECT": "collnet_direct", "COLLNET": "collnet_direct",
              "COLLNET_CHAIN": "collnet_chain", "NVLS": "nvls", "NVLS_TREE": "nvls_tree", "PAT": "pat"}
PROTOCOLS = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}
# communication kernels that are not NCCL's (PyTorch symmetric memory, vLLM's custom all-reduce)
_OTHER_KERNELS = (("multimem_all_reduce", "all_reduce", "symm_mem"), ("one_shot_all_reduce", "all_reduce", "symm_mem"),
                  ("two_shot_all_reduce", "all_reduce", "symm_mem"), ("cross_device_reduce", "all_reduce", "custom"))
# the argument of a c10d op that holds its input (the others hold outputs); default 0
_C10D_INPUT_ARG = {"allgather_": 1, "_allgather_base_": 1, "allgather_into_tensor_coalesced_": 1,
                   "reduce_scatter_": 1, "_reduce_scatter_base_": 1, "reduce_scatter_tensor_coalesced_": 1,
                   "alltoall_": 1, "alltoall_base_": 1, "gather_": 1}
_LAUNCH_CATS = ("cpu_op", "user_annotation")
_RUNTIME_CATS = ("cuda_runtime", "runtime", "cuda_driver")


def parse_kernel(name: str) -> tuple[str, str | None, str | None] | None:
    """``(op, algorithm, protocol)`` named by a communication kernel, or None for other kernels.
    ``op`` is ``sendrecv`` for NCCL's point-to-point kernel (all_to_all, send and recv use it).

    >>> parse_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
    ('all_reduce', 'ring', 'LL')
    >>> parse_kernel("ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE(ncclDevKernelArgsStorage<4096ul>)")
    ('all_reduce', 'nvls_tree', 'Simple')
    >>> parse_kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)")
    ('sendrecv', 'p2p', None)
    >>> parse_kernel("void at::native::vectorized_elementwise_kernel<4>") is None
    True
    """
    m = _KERNEL.match(name)
    if m:
        op = _KERNEL_OPS.get(m.group(1))
        if op == _SENDRECV:
            # one kernel for NCCL's p2p path, whatever protocol it runs inside (LL up to NCCL_P2P_LL_THRESHOLD,
            # 16 KiB per peer, Simple above): the name, and the RING_SIMPLE label of old names, say none
            return (op, "p2p", None)
        ap = _ALGO_PROTO.search(name.split("(", 1)[0])
        algo, proto = (ALGORITHMS[ap.group(1)], PROTOCOLS[ap.group(2)]) if ap else (None, None)
        return (op or "unknown", algo, proto)
    for needle, op, _ in _OTHER_KERNELS:
        if needle in name:
            return (op, None, None)
    return None


def _backend_of_kernel(name: str) -> str:
    if _KERNEL.match(name):
        return "nccl"
    return next((b for needle, _, b in _OTHER_KERNELS if needle in name), "nccl")


# ---- reading a file ---------------------------------------------------------------------------------
def _decompress(blob: bytes, path: str) -> bytes:
    try:
        gunzip(blob, MAX_JSON_BYTES, keep=False)   # sized first, keeping nothing: a bomb costs a megabyte
        return gunzip(blob, MAX_JSON_BYTES)[1]
    except GzipTooLarge:
        raise CollsimError(f"{path}: expands past {MAX_JSON_BYTES:,} bytes: too large to read (trim the profiled window)") from None
    except GzipDamaged as e:
        raise CollsimError(f"{path}: the gzip file is truncated: copy it again" if e.truncated else
                           f"{path}: a damaged gzip file ({e}): re-export the trace") from None


def _check_counts(text: str, path: str) -> None:
    """Refuse, before ``json.loads`` builds anything, a text with more objects/lists or values than a real
    trace of at most :data:`MAX_JSON_BYTES` holds (see the module docstring): str.count runs in C, ~0.1 s
    for 100 MB, where building what a bomb of empty events describes takes minutes and GBs."""
    containers = text.count("{") + text.count("[")
    values = containers + text.count(",")
    if containers > MAX_CONTAINERS or values > MAX_VALUES:
        raise CollsimError(f"{path}: {containers:,} JSON objects and lists and {values:,} values, over the limits "
                           f"({MAX_CONTAINERS:,} and {MAX_VALUES:,}; a real trace holds ~5 and ~20 an event): not a "
                           "profiler trace collsim can read in bounded memory: profile fewer steps")


def load_trace(path: str) -> dict:
    """The trace's JSON object, refused in one line when it is not a profiler trace."""
    blob = read_input(path, "profiler trace", MAX_FILE_BYTES, binary=True)
    if blob[:2] == GZIP_MAGIC:
        blob = _decompress(blob, path)
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        raise NotEvidence(f"{path}: binary data, not a profiler trace (Chrome-trace JSON as torch.profiler exports it)") from None
    if "\x00" in text[:4096] or not text.lstrip().startswith(("{", "[")):
        raise NotEvidence(f"{path}: not a profiler trace (Chrome-trace JSON as torch.profiler exports it)")
    _check_counts(text, path)
    del blob   # the bytes are no longer needed: do not hold them while the objects are built
    # JSON builds no reference cycles, and Python's cycle collector, run again and again while millions of
    # objects are made, nearly doubles the time of the largest text the counts let through (~18 s vs ~10 s)
    collecting = gc.isenabled()
    gc.disable()
    try:
        data = load_json(text, path)
    finally:
        if collecting:
            gc.enable()
    if isinstance(data, list):   # Chrome-trace's array form: a list of event objects
        if data and not any(isinstance(e, dict) for e in data[:1000]):
            raise NotEvidence(f"{path}: a JSON list without event objects: not a profiler trace (Chrome-trace JSON as "
                               "torch.profiler exports it)")
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise NotEvidence(f"{path}: no 'traceEvents' list: not a profiler trace (export it with "
                           "prof.export_chrome_trace or tensorboard_trace_handler)")
    if len(data["traceEvents"]) > MAX_EVENTS:
        raise CollsimError(f"{path}: {len(data['traceEvents']):,} events, over the {MAX_EVENTS:,} limit: profile fewer steps")
    return data


def _real(x) -> float | None:
    """A JSON number as a float, infinities and NaN included (they are refused by :func:`_check_times`, not
    skipped); a 400-digit integer becomes inf. None for anything else."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return None
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _device(data: dict) -> str | None:
    """The GPU model(s) the trace's ``deviceProperties`` name (``Tesla V100-SXM2-32GB``), None if it names none."""
    props = data.get("deviceProperties")
    names = sorted({str(p["name"])[:80] for p in props if isinstance(p, dict) and isinstance(p.get("name"), str)}) \
        if isinstance(props, list) else []
    return " + ".join(names) or None


def _rank_of(data: dict, path: str, fallback: int) -> int:
    info = data.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and info["rank"] >= 0:
        return info["rank"]
    m = re.search(r"(?:rank|worker)[_-]?(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else fallback


def _shape_elems(arg) -> int | None:
    """Elements of one argument of ``Input Dims``: a shape (list of ints) or a tensor list (list of shapes)."""
    if not isinstance(arg, list) or not arg:
        return None
    if all(isinstance(d, int) for d in arg):
        n = 1
        for d in arg:
            n *= d
        return n
    parts = [_shape_elems(a) for a in arg if isinstance(a, list)]
    total = [t for t in parts if t is not None]
    return sum(total) if total else None


def _first_type(args: dict, index: int = 0):
    t = args.get("Input type")
    return t[index] if isinstance(t, list) and len(t) > index and isinstance(t[index], str) else None


def _ranks_arg(text) -> tuple | None:
    if isinstance(text, list):
        vals = text
    elif isinstance(text, str) and 2 <= len(text) <= 200_000:
        try:
            vals = [int(x) for x in text.strip("[] ").split(",") if x.strip()]
        except ValueError:
            return None
    else:
        return None
    return tuple(int(v) for v in vals if isinstance(v, int)) or None


def _whole_arg(args: dict, key: str, event: dict, minimum: int):
    """``args[key]`` as a whole number of at least ``minimum``; None where the event does not carry it. A value
    no profiler writes (true/false, a fraction, below the minimum: "In msg nelems": -5, "Group size": 0) is
    damaged input, refused naming the event, not read as something else."""
    v = args.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise CollsimError(f"event {str(event.get('name'))[:60]!r} at ts {event.get('ts')}: {key!r} is {str(v)[:40]!r}, "
                           f"not a whole number of at least {minimum}: the trace is damaged (re-export it from the profiler)")
    return v


class _Launch:
    """One issued call: the nest of launch events on one CPU thread."""

    def __init__(self, first: dict):
        self.events = [first]
        self.ts = first["ts"]
        self.end = first["ts"] + first["dur"]

    def describe(self) -> dict:
        """op, nbytes, dtype, group size and ranks, as far as the nest says (record_param_comms first)."""
        info: dict = {"op": None, "nbytes": None, "dtype": None, "group_size": None, "group_ranks": None}
        rpc = [e for e in self.events if e["name"] == "record_param_comms"]
        annot = [e for e in self.events if e["name"].startswith(("nccl:", "gloo:"))]
        c10d = [e for e in self.events if e["name"].startswith(("c10d::", "symm_mem::"))]
        for e in rpc:
            a = e["args"]
            if isinstance(a.get("Collective name"), str) and info["op"] is None:
                info["op"] = op_of(a["Collective name"]) or "other"
            n, size = _whole_arg(a, "In msg nelems", e, 0), dtype_bytes(a.get("dtype"))
            if n is not None and size and info["nbytes"] is None:
                info["nbytes"], info["dtype"] = n * size, a.get("dtype")
            elif n is not None and not size and isinstance(a.get("dtype"), str) and info["dtype"] is None:
                info["dtype"] = a["dtype"]   # kept without a size: the report names the element type it lacks
            if (g := _whole_arg(a, "Group size", e, 1)) is not None:
                info["group_size"] = g
            info["group_ranks"] = info["group_ranks"] or _ranks_arg(a.get("Process Group Ranks"))
        for e in annot + c10d:
            if info["op"] is None:
                info["op"] = op_of(e["name"]) or "other"
            if info["nbytes"] is None:
                dims = e["args"].get("Input Dims")
                idx = _C10D_INPUT_ARG.get(e["name"].split("::")[-1], 0) if e in c10d else 0
                if isinstance(dims, list) and len(dims) > idx:
                    n, t = _shape_elems(dims[idx]), _first_type(e["args"], idx)
                    size = dtype_bytes(t)
                    if n is not None and size:
                        info["nbytes"], info["dtype"] = n * size, t
        return info


def _group_launches(events: list) -> dict:
    """(pid, tid) -> launches sorted by start; nested launch events on one thread make one launch."""
    by_thread: dict = {}
    for e in events:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    out = {}
    for key, evs in by_thread.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        launches: list = []
        for e in evs:
            if launches and e["ts"] <= launches[-1].end:
                launches[-1].events.append(e)
            else:
                launches.append(_Launch(e))
        out[key] = launches
    return out


def _find(launches_by_thread: dict, starts: dict, key, ts: float):
    launches = launches_by_thread.get(key)
    if not launches:
        return None
    i = bisect.bisect_right(starts[key], ts) - 1
    return launches[i] if i >= 0 and launches[i].end >= ts else None


def read_trace(path: str, fallback_rank: int = 0) -> Job:
    """The calls one rank's trace file records (see the module docstring)."""
    try:
        return _read_trace(path, fallback_rank)
    except MemoryError:   # past the counts' estimate (a smaller memory limit): name the file, not the simulator
        raise CollsimError(f"{path}: out of memory reading this profiler trace: profile fewer steps (a shorter "
                           "schedule), or read it where more memory is free") from None


def _read_trace(path: str, fallback_rank: int) -> Job:
    data = load_trace(path)
    rank = _rank_of(data, path, fallback_rank)
    info: dict = data["distributedInfo"] if isinstance(data.get("distributedInfo"), dict) else {}
    world = info.get("world_size") if isinstance(info.get("world_size"), int) and info["world_size"] > 0 else None
    ev = _sort_events(data["traceEvents"], path)
    launches_by_thread = _group_launches(ev.launches)
    all_launches = sorted((l for ls in launches_by_thread.values() for l in ls), key=lambda l: l.ts)
    described = {id(l): l.describe() for l in all_launches}
    matched, used = _match_work(ev, launches_by_thread, all_launches, described)
    notes: set = set()
    calls = [c for c in (_call_of(path, rank, world, described, notes, *m) for m in matched) if c is not None]
    for l in all_launches:  # issued calls whose work the trace did not record (CPU-only profile of a GPU job)
        d = described[id(l)]
        if id(l) not in used and d["op"] not in (None, "other"):
            calls.append(Call(source=path, rank=rank, op=d["op"], nbytes=d["nbytes"], dtype=d["dtype"],
                              group_size=d["group_size"] or world, group_ranks=d["group_ranks"], launch_us=l.ts))
    calls.sort(key=lambda c: c.launch_us if c.launch_us is not None else (c.start_us or 0.0))
    for i, c in enumerate(calls):
        c.seq = i
    version = info.get("nccl_version")   # torch writes NCCL's release here (distributedInfo, "2.17.1")
    job = Job(calls=calls, sources=[path], world_size=world, device=_device(data), notes=sorted(notes),
              nccl_version=version if isinstance(version, str) and version.strip() else None)
    if ev.steps:
        job.spans[rank] = (min(s for s, _ in ev.steps), max(e for _, e in ev.steps))
        job.steps[rank] = len(ev.steps)
    elif ev.hi > ev.lo:
        job.spans[rank] = (ev.lo, ev.hi)
    if ev.compute:
        job.compute[rank] = ev.compute
    return job


@dataclass
class _Events:
    """One trace's complete events ("ph": "X"), sorted by what they are (times in us)."""

    launches: list = field(default_factory=list)   # host-side collective calls (record_param_comms, nccl:...)
    work: list = field(default_factory=list)       # (event, (op, algorithm, protocol)): kernels and gloo work
    runtime: dict = field(default_factory=dict)    # correlation id -> CUDA runtime event (the kernel's launch)
    compute: list = field(default_factory=list)    # (start, end) of kernels that are not communication
    steps: list = field(default_factory=list)      # (start, end) of ProfilerStep# spans
    lo: float = float("inf")                       # first and last instant of any non-"Trace" event
    hi: float = float("-inf")


def _check_times(name: str, ts: float, dur: float, path: str) -> None:
    """Refuse a complete event whose ``ts`` or ``dur`` no profiler records (see the module docstring)."""
    name = name[:80]
    if not (-MAX_TS_US <= ts <= MAX_TS_US):  # also false for NaN
        raise CollsimError(f"{path}: event {name!r} has ts {ts:g}: timestamps must be finite and within "
                           f"+-{MAX_TS_US:.0f} us: the trace is damaged: export it again (or delete that event)")
    if not (0 <= dur <= MAX_EVENT_US):
        raise CollsimError(f"{path}: event {name!r} at ts {ts:.0f} has dur {dur:g}: durations must be 0.."
                           f"{MAX_EVENT_US:,.0f} us (a day): the trace is damaged: export it again (or delete that event)")


# The fields that tie events together are used as keys (a thread, a CUDA correlation, an External id): a value
# no profiler writes there (a list, an object) is refused naming the event, never read as something else.
# Kineto writes numbers; Chrome traces may name a process or thread ("Spans", "stream 7").
_ID_FIELDS = (("pid", (int, float, str), "a number or a name"), ("tid", (int, float, str), "a number or a name"))
_ARG_ID_FIELDS = (("correlation", (int,), "a whole number"), ("External id", (int,), "a whole number"))


def _check_ids(index: int, e: dict, args: dict, path: str) -> None:
    """Refuse a complete event whose pid/tid or args' correlation/External id is not what profilers write."""
    for where, fields in ((e, _ID_FIELDS), (args, _ARG_ID_FIELDS)):
        for key, types, what in fields:
            v = where.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, types)):
                label = "args." + key if where is args else key
                raise CollsimError(f"{path}: event {index} ({str(e.get('name'))[:60]!r}): {label} is "
                                   f"{_json_kind(v)} {short_repr(v)}, not {what}: a damaged trace: export it again "
                                   "(or delete that event)")


def _json_kind(v) -> str:
    return {list: "a list", dict: "an object", str: "text", bool: "true/false", float: "a fraction"}.get(type(v), "a value")


def _sort_events(events, path: str = "trace") -> _Events:
    out = _Events()
    for index, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur, name, cat = _real(e.get("ts")), _real(e.get("dur")), e.get("name"), e.get("cat")
        if ts is None or dur is None or not isinstance(name, str):
            # every complete event a profiler writes has a text name and numeric ts/dur: one that does not is
            # damaged, and skipping it would quietly change a collective's median (docs/traces.md)
            bad = next(k for k, ok in (("name", isinstance(name, str)), ("ts", ts is not None), ("dur", dur is not None))
                       if not ok)
            what = f"no {bad}" if e.get(bad) is None else f"{bad} {short_repr(e.get(bad))}"
            label = repr(name[:80]) if isinstance(name, str) else "without a text name"
            raise CollsimError(f"{path}: a complete event {label} has {what}: profilers write a text name and numeric "
                               "ts and dur: the trace is damaged: export it again (or delete that event)")
        _check_times(name, ts, dur, path)
        args: dict = e["args"] if isinstance(e.get("args"), dict) else {}
        _check_ids(index, e, args, path)
        e = {"name": name, "ts": ts, "dur": dur, "pid": e.get("pid"), "tid": e.get("tid"), "args": args, "cat": cat}
        if cat != "Trace":
            out.lo, out.hi = min(out.lo, ts), max(out.hi, ts + dur)
        if cat == "kernel":
            k = parse_kernel(name)
            if k:
                out.work.append((e, k))
            else:
                out.compute.append((ts, ts + dur))
        elif cat in _LAUNCH_CATS and name.startswith("gloo:"):
            out.work.append((e, (op_of(name) or "other", None, None)))
        elif cat in _LAUNCH_CATS and (name == "record_param_comms" or name.startswith(("nccl:", "c10d::", "symm_mem::"))):
            out.launches.append(e)
        elif cat in _RUNTIME_CATS and isinstance(args.get("correlation"), int):
            out.runtime[args["correlation"]] = e
        elif cat in _LAUNCH_CATS and name.startswith("ProfilerStep#"):
            out.steps.append((ts, ts + dur))
    return out


def _match_work(ev: _Events, launches_by_thread: dict, all_launches: list, described: dict) -> tuple[list, dict]:
    """Each work event with the call that launched it: by CUDA correlation, then External id, then the
    issuing thread; what is left, by order within its kind. Returns (matched, used launch ids)."""
    starts = {k: [l.ts for l in v] for k, v in launches_by_thread.items()}
    by_ext: dict = {}
    for ls in launches_by_thread.values():
        for l in ls:
            for x in l.events:
                if isinstance(x["args"].get("External id"), int):
                    by_ext.setdefault(x["args"]["External id"], l)
    used: dict = {}
    matched = []
    pending = []
    for e, (op, algo, proto) in sorted(ev.work, key=lambda w: w[0]["ts"]):
        launch = None
        rt = ev.runtime.get(e["args"].get("correlation")) if e["cat"] == "kernel" else None
        if rt is not None:
            launch = _find(launches_by_thread, starts, (rt.get("pid"), rt.get("tid")), rt["ts"])
        if launch is None and e["cat"] == "kernel" and isinstance(e["args"].get("External id"), int):
            launch = by_ext.get(e["args"]["External id"])
            if launch is not None and op in _KERNEL_KINDS and _family(described[id(launch)]["op"]) != _family(op):
                launch = None  # old traces number kernels' External ids apart from the ops': a collision
        if launch is None and e["cat"] != "kernel":  # gloo work on the issuing thread (send/recv)
            launch = _find(launches_by_thread, starts, (e["pid"], e["tid"]), e["ts"])
        if launch is not None and id(launch) in used:
            launch = None  # one kernel per call; a second (grouped) kernel is matched by order below
        if launch is None:
            pending.append((e, op, algo, proto))
        else:
            used[id(launch)] = True
            matched.append((launch, e, op, algo, proto))
    # order: the k-th unmatched work of a kind goes with the k-th unmatched launch of that kind
    free: dict = {}
    for l in all_launches:
        if id(l) not in used:
            free.setdefault(_family(described[id(l)]["op"]), []).append(l)
    for e, op, algo, proto in pending:
        if op in _KERNEL_KINDS:
            queue = free.get(_family(op))
            launch = queue.pop(0) if queue else None
        else:  # a kernel that names no collective (ncclDevKernel_Generic): the earliest call issued before it
            launch = min((q[0] for q in free.values() if q and q[0].ts <= e["ts"]), key=lambda l: l.ts, default=None)
            if launch is not None:
                free[_family(described[id(launch)]["op"])].pop(0)
        if launch is not None:
            used[id(launch)] = True
        matched.append((launch, e, op, algo, proto))
    return matched, used


def _call_of(path: str, rank: int, world, described: dict, notes: set, launch, e: dict, op, algo, proto) -> Call | None:
    """The :class:`Call` of one work event and its launch (None: not a collective or p2p call)."""
    d = described[id(launch)] if launch is not None else {}
    a = e["args"]
    kop = op_of(a["Collective name"]) if isinstance(a.get("Collective name"), str) else None
    call_op = d.get("op") or kop or (op if op in COLLECTIVES or op in P2P else None)
    if call_op is None or call_op == "other":
        return None
    nbytes, dtype = d.get("nbytes"), d.get("dtype")
    if nbytes is None and (n := _whole_arg(a, "In msg nelems", e, 0)) is not None and dtype_bytes(a.get("dtype")):
        nbytes, dtype = n * dtype_bytes(a.get("dtype")), a.get("dtype")
    if nbytes is None and e["cat"] != "kernel":
        dims = a.get("Input Dims")
        n = _shape_elems(dims[0]) if isinstance(dims, list) and dims else None
        size = dtype_bytes(_first_type(a))
        if n is not None and size:
            nbytes, dtype = n * size, _first_type(a)
    group = d.get("group_size") or _whole_arg(a, "Group size", e, 1)
    ranks = d.get("group_ranks") or _ranks_arg(a.get("Process Group Ranks"))
    if group and ranks and len(ranks) != group:
        # the two fields disagree: the group's size is the profiler's own count; the list is not used to place it
        notes.add(f"{path}: 'Group size' {group} but 'Process Group Ranks' lists {len(ranks)} ranks on "
                  f"{str(e.get('name'))[:40]!r}: the size is taken, the rank list ignored (predicted on ranks 0..{group - 1})")
        ranks = None
    return Call(source=path, rank=rank, op=call_op, nbytes=nbytes, dtype=dtype,
                group_size=group or (len(ranks) if ranks else None) or world, group_ranks=ranks,
                launch_us=launch.ts if launch is not None else None, start_us=e["ts"], duration_us=e["dur"],
                nccl_algorithm=algo, nccl_protocol=proto,
                choice_source="kernel name" if algo else None,
                backend="gloo" if e["cat"] != "kernel" else _backend_of_kernel(e["name"]),
                kernel=e["name"].split("(", 1)[0] if e["cat"] == "kernel" else None)


def _family(op) -> str | None:
    """Which work kind runs a call: NCCL runs all_to_all, send and recv as its SendRecv kernel."""
    coll = COLLECTIVES.get(op or "")
    if (coll is not None and coll.nccl_p2p) or op in P2P or op == _SENDRECV:
        return _SENDRECV
    return op


def trace_files(paths, max_files: int = 4096) -> list[str]:
    """The trace files named by ``paths`` (files, or folders whose *.json / *.json.gz files are read)."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if n.endswith((".json", ".json.gz")) and not n.startswith("."))
            out += [os.path.join(p, n) for n in names]
        else:
            out.append(p)
        if len(out) > max_files:
            raise CollsimError(f"more than {max_files} trace files: pass one job's traces (one file per rank)")
    return out
