"""Training-step workloads: a model, a parallelism and a compute speed, from YAML, a dict or code.

A workload says what one optimizer step of data-parallel (and optionally tensor/pipeline-parallel)
training does; :func:`sim.planning.plan_step` turns it into collectives on a topology. The YAML form
(read with ``yaml.safe_load`` only)::

    name: gpt-1b-ddp
    topology: dgx-h100              # default when no --topology is given
    model:
      params: 1B                    # parameter count (K/M/B/T are decimal: 1B = 1e9)
      layers: 24                    # transformer blocks; parameters are split evenly over them
      dtype: bfloat16               # dtype of parameters and gradients on the wire
      hidden: 2048                  # hidden size: only needed for tp > 1 or pp > 1 (activations)
    parallelism:
      strategy: ddp                 # ddp | zero1 | zero2 | zero3 (= fsdp)
      bucket_mb: 25                 # DDP/ZeRO-1/2 gradient buckets, MiB as torch's bucket_cap_mb
      shard_group: 8                # ZeRO/FSDP: ranks a shard spans (default: the whole DP group)
      tp: 1                         # tensor-parallel ranks (consecutive ranks, Megatron order)
      pp: 1                         # pipeline stages
      microbatches: 1               # per optimizer step (gradient accumulation / pipeline)
      prefetch: true                # FSDP: gather layer i+1 while layer i computes
    compute:                        # either per-layer times ...
      layer_forward_ms: 1.0         # one layer, one microbatch, on one GPU
      layer_backward_ms: 2.0        # default 2x forward
      optimizer_ms: 0.0
      # ... or a throughput: 6 * params * tokens FLOPs per step / (peak TFLOP/s * MFU)
      # tokens_per_step: 1M ; peak_tflops: 989 (or gpu: H100) ; mfu: 0.4

>>> w = from_dict({"model": {"params": "1B", "layers": 20}, "parallelism": {"strategy": "fsdp"},
...                "compute": {"layer_forward_ms": 1}})
>>> w.parallel.strategy, w.model.params, w.compute.layer_backward_ms
('zero3', 1000000000, 2.0)
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace

from ..errors import CollsimError

#: element sizes (bytes) of the dtypes a model's parameters and gradients travel in
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "float8": 1, "fp8": 1}
STRATEGIES = ("ddp", "zero1", "zero2", "zero3")
_ALIASES = {"fsdp": "zero3", "full_shard": "zero3", "zero-1": "zero1", "zero-2": "zero2", "zero-3": "zero3",
            "shard_grad_op": "zero2"}
#: dense bf16 peak TFLOP/s per GPU from the vendors' datasheets (SXM parts, no sparsity); V100 has no bf16: its
#: fp16 tensor rate (V100 SXM2 datasheet, 125); GH200's GPU is an H100 (GH200 datasheet: 1,979 with sparsity)
PEAK_TFLOPS = {"v100": 125.0, "a100": 312.0, "h100": 989.0, "h200": 989.0, "gh200": 989.0, "b200": 2250.0, "gb200": 2500.0}
_COUNT = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
MAX_FILE_BYTES = 1 << 20
# parameter and token counts: a thousand times the largest models trained (about 2e12 parameters) and far
# above any batch; beyond it a number is a typo that plans nonsense
MAX_COUNT = 1e15


def parse_count(value, what: str) -> int:
    """``"1B"`` -> 1_000_000_000, ``"1.5e9"`` -> 1_500_000_000, ``512`` -> 512 (decimal suffixes)."""
    if isinstance(value, bool):
        raise CollsimError(f"{what}={value!r} is not a number: give e.g. 1B, 7e9 or 512")
    if isinstance(value, (int, float)):
        number = float(value) if abs(value) < 1e300 else math.nan  # a 300-digit int does not fit a float
    else:
        text = str(value).strip().upper().replace("_", "")
        mult = _COUNT.get(text[-1:], None) if text[-1:].isalpha() else 1
        try:
            number = float(text[:-1] if text[-1:].isalpha() else text) * (mult if mult else math.nan)
        except ValueError:
            number = math.nan
    if not math.isfinite(number) or number <= 0 or number != int(number):
        raise CollsimError(f"{what}={value!r} is not a positive whole number: give e.g. 1B, 7e9 or 512")
    if number > MAX_COUNT:   # 1e30 parameters planned a step and advised a 7.6e18 MB gradient bucket
        raise CollsimError(f"{what}={value!r} is more than any model or batch ({MAX_COUNT:.0e} at most; the largest models "
                           "have about 2e12 parameters): give e.g. 70B or 2T")
    return int(number)


# the least model FLOP utilisation a workload may give: a millionth of the peak is already far below any real step
MIN_MFU = 1e-6


def _positive(value, what: str, allow_zero: bool = False) -> float:
    if isinstance(value, bool):
        raise CollsimError(f"{what}={value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise CollsimError(f"{what}={str(value)[:40]!r} is not a usable number") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise CollsimError(f"{what}={value!r} must be {'zero or more' if allow_zero else 'positive'}")
    return x


def _whole(value, what: str) -> int:
    x = _positive(value, what)
    if x != int(x):
        raise CollsimError(f"{what}={value!r} must be a whole number")
    return int(x)


@dataclass(frozen=True)
class Model:
    """``params`` parameters in ``layers`` equal blocks, carried as ``dtype``; ``hidden`` is the
    hidden size (activations per token = ``hidden`` elements), needed for tensor/pipeline parallelism."""

    params: int
    layers: int = 24
    dtype: str = "bfloat16"
    hidden: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "params", parse_count(self.params, "model.params"))
        object.__setattr__(self, "layers", _whole(self.layers, "model.layers"))
        if self.dtype not in DTYPE_BYTES:
            raise CollsimError(f"model.dtype={self.dtype!r} is unknown: use one of {', '.join(DTYPE_BYTES)}")
        if self.hidden is not None:
            object.__setattr__(self, "hidden", _whole(self.hidden, "model.hidden"))
        if self.layers > self.params:
            raise CollsimError(f"model.layers={self.layers} exceeds model.params={self.params}: each layer needs parameters")

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def nbytes(self) -> int:
        """Bytes of all parameters (= of all gradients) in ``dtype``."""
        return self.params * self.elem_bytes

    def layer_params(self) -> list[int]:
        """Parameters of each layer: an even split, the remainder spread over the first layers."""
        base, extra = divmod(self.params, self.layers)
        return [base + (1 if i < extra else 0) for i in range(self.layers)]


@dataclass(frozen=True)
class Parallel:
    """How ranks share the work. ``strategy``: ``ddp`` (replicate, all_reduce gradients in buckets),
    ``zero1``/``zero2`` (shard optimizer state [and gradients]: reduce_scatter gradient buckets, then
    all_gather the updated parameters), ``zero3`` (FSDP: all_gather each layer's parameters before its
    forward and its backward, reduce_scatter its gradients). ``bucket_mb`` and ``first_bucket_mb`` are
    MiB like torch's ``bucket_cap_mb`` (torch makes the first bucket 1 MiB unless a cap is given).
    ``shard_group``: ranks that share one copy of the sharded state (HSDP when smaller than the DP group:
    shards are also all_reduced across the replicas)."""

    strategy: str = "ddp"
    bucket_mb: float | None = None
    first_bucket_mb: float | None = None
    shard_group: int | None = None
    tp: int = 1
    pp: int = 1
    microbatches: int = 1
    prefetch: bool = True
    broadcast_bucket_mb: float = 250.0   # DDP's broadcast of module states at construction

    def __post_init__(self):
        s = _ALIASES.get(str(self.strategy).strip().lower(), str(self.strategy).strip().lower())
        if s not in STRATEGIES:
            raise CollsimError(f"parallelism.strategy={self.strategy!r} is unknown: use one of {', '.join(STRATEGIES)} (or fsdp)")
        object.__setattr__(self, "strategy", s)
        for name in ("tp", "pp", "microbatches"):
            object.__setattr__(self, name, _whole(getattr(self, name), f"parallelism.{name}"))
        for name in ("bucket_mb", "first_bucket_mb"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _positive(getattr(self, name), f"parallelism.{name}"))
        object.__setattr__(self, "broadcast_bucket_mb", _positive(self.broadcast_bucket_mb, "parallelism.broadcast_bucket_mb"))
        if self.shard_group is not None:
            if s == "ddp":
                raise CollsimError("parallelism.shard_group applies to zero1/zero2/zero3: remove it or change the strategy")
            object.__setattr__(self, "shard_group", _whole(self.shard_group, "parallelism.shard_group"))
        if not isinstance(self.prefetch, bool):
            raise CollsimError(f"parallelism.prefetch={self.prefetch!r} must be true or false")
        if s == "zero3" and self.pp > 1:
            raise CollsimError("zero3/FSDP with pp > 1 is not modelled: use pp: 1, or zero1 with pipeline stages")

    @property
    def bucket_bytes(self) -> int:
        return int((25.0 if self.bucket_mb is None else self.bucket_mb) * (1 << 20))

    @property
    def first_bucket_bytes(self) -> int:
        """torch's rule: 1 MiB first bucket with the default cap, else the cap itself."""
        if self.first_bucket_mb is not None:
            return int(self.first_bucket_mb * (1 << 20))
        return (1 << 20) if self.bucket_mb is None else self.bucket_bytes


@dataclass(frozen=True)
class Compute:
    """How long the GPUs compute. Per layer and microbatch on one GPU (``layer_forward_ms``,
    ``layer_backward_ms`` default 2x forward), or from a throughput: a step is
    ``6 * params * tokens_per_step`` FLOPs shared by all GPUs, at ``peak_tflops * mfu`` each
    (``gpu: H100`` picks the datasheet peak). ``tokens_per_step`` (global batch in tokens) also sizes
    activations for tp/pp."""

    layer_forward_ms: float | None = None
    layer_backward_ms: float | None = None
    tokens_per_step: int | None = None
    peak_tflops: float | None = None
    gpu: str | None = None
    mfu: float = 0.4
    optimizer_ms: float = 0.0

    def __post_init__(self):
        if self.tokens_per_step is not None:
            object.__setattr__(self, "tokens_per_step", parse_count(self.tokens_per_step, "compute.tokens_per_step"))
        if self.layer_forward_ms is not None:
            object.__setattr__(self, "layer_forward_ms", _positive(self.layer_forward_ms, "compute.layer_forward_ms", True))
            if self.layer_backward_ms is None:
                object.__setattr__(self, "layer_backward_ms", 2.0 * self.layer_forward_ms)
        if self.layer_backward_ms is not None:
            object.__setattr__(self, "layer_backward_ms", _positive(self.layer_backward_ms, "compute.layer_backward_ms", True))
            if self.layer_forward_ms is None:
                raise CollsimError("compute.layer_backward_ms needs compute.layer_forward_ms too")
        elif self.tokens_per_step is None:
            raise CollsimError("compute needs layer_forward_ms, or tokens_per_step with peak_tflops (or gpu) and mfu")
        if self.peak_tflops is not None:
            object.__setattr__(self, "peak_tflops", _positive(self.peak_tflops, "compute.peak_tflops"))
        if self.gpu is not None and (not isinstance(self.gpu, str) or self.gpu.lower() not in PEAK_TFLOPS):
            raise CollsimError(f"compute.gpu={self.gpu!r} is unknown: use one of {', '.join(PEAK_TFLOPS)} or give peak_tflops")
        mfu = _positive(self.mfu, "compute.mfu")
        if mfu > 1:
            raise CollsimError(f"compute.mfu={self.mfu} is above 1: it is a fraction of the peak, e.g. 0.4")
        if mfu < MIN_MFU:   # 5e-324 made every step infinite (JSON cannot carry it), 1e-300 a 300-digit time
            raise CollsimError(f"compute.mfu={self.mfu} is below {MIN_MFU:g}: no GPU runs that slowly; give a fraction "
                               "of the peak, e.g. 0.4")
        object.__setattr__(self, "mfu", mfu)
        object.__setattr__(self, "optimizer_ms", _positive(self.optimizer_ms, "compute.optimizer_ms", True))

    def peak(self, topology_meta: dict | None = None) -> float:
        """Peak TFLOP/s per GPU: ``peak_tflops``, else ``gpu``'s datasheet value, else the topology's
        ``meta['gpu']`` (hardware presets name their GPU)."""
        if self.peak_tflops is not None:
            return self.peak_tflops
        name = self.gpu or str((topology_meta or {}).get("gpu", "") or "")
        key = name.lower().split("-")[0].split(" ")[0]
        if key in PEAK_TFLOPS:
            return PEAK_TFLOPS[key]
        raise CollsimError("compute.tokens_per_step needs the GPU's speed: give compute.peak_tflops (e.g. 989) or "
                           f"compute.gpu (one of {', '.join(PEAK_TFLOPS)})")


@dataclass(frozen=True)
class Workload:
    """A model, its parallelism and its compute speed; ``topology`` is an optional default spec."""

    model: Model
    parallel: Parallel = field(default_factory=Parallel)
    compute: Compute = field(default_factory=lambda: Compute(layer_forward_ms=1.0))
    name: str = "workload"
    topology: str | None = None

    def with_value(self, key: str, value) -> "Workload":
        """A copy with one field changed, found by its name in model/parallelism/compute
        (``bucket_mb``, ``shard_group``, ``tp``, ``mfu``, ...). Used by sweeps."""
        for part in ("model", "parallel", "compute"):
            obj = getattr(self, part)
            names = {f.name for f in fields(obj)}
            if key in names:
                typ = type(getattr(obj, key))
                if isinstance(value, str) and typ is bool:
                    value = value.strip().lower() in ("1", "true", "yes", "on")
                return replace(self, **{part: replace(obj, **{key: value})})
        raise CollsimError(f"workload has no parameter {key!r}: use one of {', '.join(sweepable())}")


def sweepable() -> list[str]:
    """Every workload parameter name that :meth:`Workload.with_value` accepts."""
    return [f.name for cls in (Model, Parallel, Compute) for f in fields(cls)]


def _section(spec: dict, key: str, cls) -> dict:
    raw = spec.get(key) or {}
    if not isinstance(raw, dict):
        raise CollsimError(f"workload section {key!r} must be a mapping of names to values")
    known = {f.name for f in fields(cls)}
    unknown = set(raw) - known
    if unknown:
        raise CollsimError(f"workload section {key!r} has unknown key(s) {', '.join(sorted(map(str, unknown)))}: "
                           f"use {', '.join(sorted(known))}")
    return raw


def from_dict(spec: dict) -> Workload:
    """A :class:`Workload` from its dict/YAML form (see the module docstring)."""
    if not isinstance(spec, dict):
        raise CollsimError("a workload is a mapping with model, parallelism and compute sections")
    unknown = set(spec) - {"name", "topology", "model", "parallelism", "compute"}
    if unknown:
        raise CollsimError(f"workload has unknown key(s) {', '.join(sorted(map(str, unknown)))}: "
                           "use name, topology, model, parallelism, compute")
    if "params" not in (spec.get("model") or {}):
        raise CollsimError("workload needs model.params (the parameter count, e.g. 1B)")
    try:
        return Workload(model=Model(**_section(spec, "model", Model)),
                        parallel=Parallel(**_section(spec, "parallelism", Parallel)),
                        compute=Compute(**_section(spec, "compute", Compute)),
                        name=str(spec.get("name", "workload")),
                        topology=str(spec["topology"]) if spec.get("topology") else None)
    except TypeError as e:  # a dataclass refused an argument
        raise CollsimError(f"workload: {e}") from None


def load_workload(source) -> Workload:
    """A workload from a Workload (as is), a dict, or a ``.yaml``/``.yml``/``.json`` file path."""
    if isinstance(source, Workload):
        return source
    if isinstance(source, dict):
        return from_dict(source)
    path = str(source)
    if not os.path.exists(path):
        raise CollsimError(f"workload file {path!r} does not exist: give a .yaml file such as examples/workloads/ddp-1b.yaml")
    from ..io.safe_io import load_yaml, read_input  # JSON is YAML, so one safe loader reads both
    w = from_dict(load_yaml(read_input(path, "workload file", MAX_FILE_BYTES), path))
    if w.name == "workload":
        w = replace(w, name=os.path.splitext(os.path.basename(path))[0])
    return w
