"""Workloads for the flight-recorder simulator: what each rank computes and which collectives it calls.

A :class:`Workload` is ``world_size`` per-rank programs plus named process groups. A program is a list
of three kinds of items, executed in order by the rank's CPU thread:

- :class:`Compute` ``(time_us)``: the rank is busy (forward/backward kernels, data loading);
- :class:`Call`: enqueue a collective on a process group (asynchronously, as NCCL does; ``wait=True``
  blocks until it completes, like ``work.wait()`` right after the call);
- :class:`Wait`: block until every collective this rank has enqueued has completed (the optimizer step).

Sizes follow nccl-tests: ``nbytes`` is the all_reduce buffer, the all_gather *output*, the
reduce_scatter *input*. Workloads come from YAML (read with ``yaml.safe_load``), from a dict, or from the
built-ins :func:`ddp_step`, :func:`fsdp_step` and :func:`tp_dp_step`.

>>> w = ddp_step(world_size=4, buckets=2, bucket_nbytes="1M", steps=1)
>>> [c.op for c in w.calls(0)]
['all_reduce', 'all_reduce']
>>> w.group_of("0").ranks
(0, 1, 2, 3)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CollsimError
from ..io.validation import MAX_US, number, whole
from ..units import parse_size

#: torch dtype name -> (name in flight-recorder dumps, element size in bytes)
DTYPES = {
    "float32": ("Float", 4), "float": ("Float", 4), "bfloat16": ("BFloat16", 2),
    "float16": ("Half", 2), "half": ("Half", 2), "float64": ("Double", 8), "double": ("Double", 8),
    "int32": ("Int", 4), "int64": ("Long", 8), "int8": ("Char", 1), "uint8": ("Byte", 1),
    "float8_e4m3fn": ("Float8_e4m3fn", 1),
}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "barrier")
WORLD = "0"  # name of the default process group, as PyTorch names it


@dataclass(frozen=True)
class Compute:
    """The rank is busy for ``time_us`` microseconds (``note``: an injected fault, for the timeline)."""
    time_us: float
    note: str = field(default="", compare=False)


@dataclass(frozen=True)
class Call:
    """One collective: ``op`` on process group ``pg`` with ``nbytes`` (nccl-tests convention)."""
    op: str
    nbytes: int
    dtype: str = "float32"
    pg: str = WORLD
    wait: bool = False
    note: str = field(default="", compare=False)  # an injected fault, for the timeline


@dataclass(frozen=True)
class Wait:
    """Block until all collectives this rank enqueued have completed."""


@dataclass(frozen=True)
class ProcessGroup:
    """A process group: ``name`` (PyTorch's pg name, e.g. "0"), ``desc`` (e.g. "default_pg"), ranks."""
    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Workload:
    """Per-rank programs over named process groups. ``groups`` maps pg name -> ProcessGroup."""
    world_size: int
    programs: tuple[tuple, ...]
    groups: dict = field(default_factory=dict)

    def calls(self, rank: int) -> list[Call]:
        """The collectives rank ``rank`` calls, in order (fault ``call`` indices count these)."""
        return [item for item in self.programs[rank] if isinstance(item, Call)]

    def group_of(self, name: str) -> ProcessGroup:
        return self.groups[name]


# Limits of the flight simulator (it simulates every call of every rank): far above the jobs it is for
# (a hang shows with a handful of ranks and steps), and what keeps a typo from running for hours.
MAX_WORLD = 65_536
MAX_STEPS = 10_000
# A run costs about 50 us and 2.8 KB per program item (time and memory linear in the items: measured with
# ddp_step, 2 steps, 18 items per rank, on 2 cores: 16,384 ranks 14 s and 0.8 GB, 32,768 ranks 29 s and
# 1.6 GB); 600,000 items (32,768 such ranks) keep a run near 30 s and under 2 GB; 2,000,000 would take ~2 min
# and 5.6 GB.
MAX_CALLS = 600_000
WHOLE_PARAMS = {"world_size": MAX_WORLD, "steps": MAX_STEPS, "buckets": 4096, "layers": 4096, "tp": MAX_WORLD}


def _group_table(world_size: int, spec: dict | None) -> tuple[dict, dict]:
    """Build {pg name: ProcessGroup} and {(family, rank): pg name} from the ``process_groups`` spec.

    A family is either one list of ranks (one group) or a list of disjoint lists (one group per list;
    each rank uses the list that contains it, as a TP or DP group does)."""
    groups = {WORLD: ProcessGroup(WORLD, "default_pg", tuple(range(world_size)))}
    member = {(WORLD, r): WORLD for r in range(world_size)}
    member.update({("world", r): WORLD for r in range(world_size)})
    for family, lists in (spec or {}).items():
        if not isinstance(lists, list) or not lists:
            raise CollsimError(f"process group {family!r} must be a list of ranks or a list of lists of ranks")
        parts = lists if isinstance(lists[0], list) else [lists]
        for i, ranks in enumerate(parts):
            if any(not isinstance(r, int) or not 0 <= r < world_size for r in ranks) or len(set(ranks)) != len(ranks):
                raise CollsimError(f"process group {family!r} has ranks {ranks}: use distinct ranks in 0..{world_size - 1}")
            name = str(len(groups))  # PyTorch numbers groups in creation order
            groups[name] = ProcessGroup(name, family if len(parts) == 1 else f"{family}.{i}", tuple(sorted(ranks)))
            for r in ranks:
                if (family, r) in member:
                    raise CollsimError(f"rank {r} is in two groups of family {family!r}: make the lists disjoint")
                member[(family, r)] = name
    return groups, member


def _item(raw, rank: int, member: dict):
    """One program item from its YAML form (see the module docstring)."""
    if raw == "wait" or (isinstance(raw, dict) and raw.get("wait") is True and len(raw) == 1):
        return Wait()
    if not isinstance(raw, dict):
        raise CollsimError(f"program item {raw!r} is not understood: use compute_us: N, a collective, or wait")
    if "compute_us" in raw:
        return Compute(number(raw["compute_us"], "compute_us", low=0, high=MAX_US, example="1000"))
    d = dict(raw)
    op = d.pop("collective", None)
    if op is None:  # short form {all_reduce: 25M, pg: tp}
        ops = [k for k in d if k in COLLECTIVES]
        if len(ops) != 1:
            raise CollsimError(f"program item {raw!r} names no collective: use one of {', '.join(COLLECTIVES)}")
        op = ops[0]
        d["nbytes"] = d.pop(op)
    if op not in COLLECTIVES:
        raise CollsimError(f"unknown collective {op!r}: use one of {', '.join(COLLECTIVES)}")
    dtype = str(d.get("dtype", "float32"))
    if dtype not in DTYPES:
        raise CollsimError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    family = str(d.get("pg", WORLD))
    if (family, rank) not in member:
        raise CollsimError(f"rank {rank} is not in a process group {family!r}: define it under process_groups")
    nbytes = parse_size(d.get("nbytes", 0)) if op != "barrier" else 0
    if nbytes % DTYPES[dtype][1]:
        raise CollsimError(f"{op} of {nbytes} B is not a multiple of the {dtype} element size {DTYPES[dtype][1]} B")
    return Call(op, nbytes, dtype, member[(family, rank)], bool(d.get("wait", False)))


def from_dict(spec: dict) -> Workload:
    """Build a workload from its dict/YAML form::

        world_size: 4
        process_groups: {tp: [[0, 1], [2, 3]]}
        steps: 2                 # the program is repeated
        program:                 # every rank's program ...
          - compute_us: 1000
          - {all_reduce: 4M, pg: tp, wait: true}
          - all_reduce: 25M
          - wait
        rank_programs: {3: [...]}  # ... unless a rank has its own
    """
    if "builtin" in spec:
        return builtin(spec["builtin"], **{k: v for k, v in spec.items() if k != "builtin"})
    if "world_size" not in spec:
        raise CollsimError("workload needs world_size: N (an integer >= 1)")
    n = whole(spec["world_size"], "workload world_size", low=1, high=MAX_WORLD)
    steps = whole(spec.get("steps", 1), "workload steps", low=1, high=MAX_STEPS)
    overrides_raw = spec.get("rank_programs") or {}
    if not isinstance(overrides_raw, dict):
        raise CollsimError("rank_programs must be a mapping {rank: [items]}")
    overrides = {whole(k, "rank_programs rank", low=0, high=n - 1): v for k, v in overrides_raw.items()}
    # the work, counted before any of it is done: every rank's items, times the steps
    items = sum(len(v) if isinstance(v, list) else 0 for v in [spec.get("program")] * (n - len(overrides))) \
        + sum(len(v) if isinstance(v, list) else 0 for v in overrides.values())
    if items * steps > MAX_CALLS:
        raise CollsimError(f"the workload has {items * steps:,} program items ({n:,} ranks x {steps:,} steps), over the "
                           f"flight simulator's limit of {MAX_CALLS:,}: use fewer ranks or steps (a hang shows in a few)")
    groups, member = _group_table(n, spec.get("process_groups"))
    programs = []
    for r in range(n):
        raw = overrides.get(r, spec.get("program"))
        if not isinstance(raw, list):
            raise CollsimError(f"rank {r} has no program: give program: [...] (a list of items)")
        programs.append(tuple(_item(x, r, member) for x in raw) * steps)
    return Workload(n, tuple(programs), groups)


def ddp_step(world_size: int = 8, buckets: int = 4, bucket_nbytes="25M", forward_us: float = 10_000,
             backward_us: float = 20_000, optimizer_us: float = 2_000, dtype: str = "float32",
             steps: int = 2) -> Workload:
    """DDP: forward, backward in ``buckets`` slices each followed by an async all_reduce of its gradient
    bucket (so communication overlaps backward), then wait for all buckets and step the optimizer."""
    per = backward_us / buckets
    prog = [{"compute_us": forward_us}]
    for _ in range(buckets):
        prog += [{"compute_us": per}, {"collective": "all_reduce", "nbytes": bucket_nbytes, "dtype": dtype}]
    prog += ["wait", {"compute_us": optimizer_us}]
    return from_dict({"world_size": world_size, "steps": steps, "program": prog})


def fsdp_step(world_size: int = 8, layers: int = 4, layer_nbytes="64M", layer_forward_us: float = 3_000,
              layer_backward_us: float = 6_000, dtype: str = "bfloat16", steps: int = 1) -> Workload:
    """FSDP (ZeRO-3): each layer's parameters are all_gathered before its forward and again before its
    backward (the rank waits for them); its gradients are reduce_scattered asynchronously after its
    backward. ``layer_nbytes`` is one layer's full (unsharded) size."""
    prog = []
    for _ in range(layers):
        prog += [{"collective": "all_gather", "nbytes": layer_nbytes, "dtype": dtype, "wait": True},
                 {"compute_us": layer_forward_us}]
    for _ in range(layers):
        prog += [{"collective": "all_gather", "nbytes": layer_nbytes, "dtype": dtype, "wait": True},
                 {"compute_us": layer_backward_us},
                 {"collective": "reduce_scatter", "nbytes": layer_nbytes, "dtype": dtype}]
    prog += ["wait"]
    return from_dict({"world_size": world_size, "steps": steps, "program": prog})


def tp_dp_step(world_size: int = 8, tp: int = 2, layers: int = 2, activation_nbytes="8M",
               grad_nbytes="64M", layer_us: float = 2_000, dtype: str = "bfloat16", steps: int = 1) -> Workload:
    """Tensor parallel groups of ``tp`` consecutive ranks (an all_reduce of activations after each
    layer, waited on) and data-parallel groups across them (one async gradient all_reduce per step)."""
    if tp < 1 or world_size % tp:
        raise CollsimError(f"tp={tp} does not divide world_size={world_size}: pick a divisor")
    tp_groups = [list(range(i, i + tp)) for i in range(0, world_size, tp)]
    dp_groups = [list(range(j, world_size, tp)) for j in range(tp)]
    prog = []
    for _ in range(layers):
        prog += [{"compute_us": layer_us}, {"collective": "all_reduce", "nbytes": activation_nbytes,
                                            "dtype": dtype, "pg": "tp", "wait": True}]
    prog += [{"collective": "all_reduce", "nbytes": grad_nbytes, "dtype": dtype, "pg": "dp"}, "wait"]
    return from_dict({"world_size": world_size, "steps": steps, "program": prog,
                      "process_groups": {"tp": tp_groups, "dp": dp_groups}})


BUILTINS = {"ddp_step": ddp_step, "fsdp_step": fsdp_step, "tp_dp_step": tp_dp_step}


def builtin(name: str, **params) -> Workload:
    """A built-in workload by name with keyword parameters, e.g. ``builtin("ddp_step", world_size=4)``."""
    if name not in BUILTINS:
        raise CollsimError(f"unknown built-in workload {name!r}: use one of {', '.join(BUILTINS)}")
    for key, value in params.items():   # every number through sim.io.validation before it sizes any loop
        if key in WHOLE_PARAMS:
            params[key] = whole(value, f"workload {name}: {key}", low=1, high=WHOLE_PARAMS[key])
        elif key.endswith("_us"):
            params[key] = number(value, f"workload {name}: {key}", low=0, high=MAX_US, example="1000")
    try:
        return BUILTINS[name](**params)
    except TypeError as e:
        raise CollsimError(f"workload {name}: {e}; see the docstring of sim.flight.rank_workload.{name}") from None
