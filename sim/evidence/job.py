"""The common record of a real job's communication: one :class:`Call` per collective call on one rank.

Every reader of :mod:`sim.evidence` (profiler traces, NCCL debug logs, flight-recorder dumps) turns what
it reads into these records, and :mod:`sim.evidence.job_compare` sets them against the model. Times are in
microseconds, on the clock of the rank that recorded them (profiler traces: microseconds since the epoch
or since the trace started; flight recorder: converted from nanoseconds).

**Byte convention.** ``Call.nbytes`` is the size of the buffer one rank passes *in*, as torch counts it
(``In msg nelems`` x element size, or the input tensor's shape): an all_reduce of a 4 MiB tensor is
4,194,304; an ``all_gather`` of 64 KiB per rank is 65,536 whatever the world size. The prediction uses
nccl-tests' ``size`` column instead (for all_gather the gathered output, ``nbytes x group size``; see
:meth:`sim.collectives.Collective.nccl_tests_bytes`), which the report shows as ``nccl_tests_nbytes``.

>>> c = Call(source="r0.json", rank=0, op="all_gather", nbytes=65536, group_size=2)
>>> c.nccl_tests_nbytes
131072
>>> dtype_bytes("c10::BFloat16"), dtype_bytes("Float"), dtype_bytes("datatype 7")
(2, 4, None)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..collectives import COLLECTIVES
from ..errors import CollsimError

# torch / c10 / NCCL spellings of element types -> bytes per element
_DTYPES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
           "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1, "signed char": 1,
           "unsigned char": 1, "byte": 1, "uint8": 1, "int8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
           "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "complexfloat": 8, "complexdouble": 16, "int8_t": 1,
           "uint64": 8, "uint32": 4, "uint16": 2, "long int": 8, "long long": 8,
           "unsigned long": 8, "unsigned int": 4, "c10::half": 2}
# torch op names (c10d, nccl:*, gloo:*, record_param_comms' "Collective name", flight recorder) -> ours.
# Point-to-point calls keep their own names; anything else ("barrier", "coalesced") is not a collective.
_OPS = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
        "all_reduce_coalesced": "all_reduce", "multimem_all_reduce": "all_reduce", "one_shot_all_reduce": "all_reduce",
        "two_shot_all_reduce": "all_reduce", "allgather": "all_gather", "all_gather": "all_gather",
        "allgather_base": "all_gather", "all_gather_base": "all_gather", "all_gather_into_tensor": "all_gather",
        "allgather_into_tensor_coalesced": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
        "allgather_coalesced": "all_gather", "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
        "reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
        "reduce_scatter_tensor_coalesced": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
        "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_all": "all_to_all", "all_to_allv": "all_to_all",
        "all_to_all_single": "all_to_all", "send": "send", "recv": "recv", "recv_any_source": "recv"}
P2P = ("send", "recv")
# The longest time one recorded event may last: a day. No profiled step, kernel or call comes near it
# (PyTorch's NCCL watchdog aborts a collective after 10 minutes by default), so a longer one is a damaged
# value (1e300), not a slow job.
MAX_EVENT_US = 86_400e6


class NotEvidence(CollsimError):
    """A file that is no profiler trace or NCCL log at all (a config, notes, collsim's own report), as opposed to
    a damaged one: named on the command line it is refused like any bad input; found in a folder of traces it
    is skipped and listed in a note (sim.evidence.load)."""


_GPU_MODEL = re.compile(r"([A-Z])(\d{3})")  # A100, V100, H100, B200 (GB200's B200): the chip, not the board


def other_chip(recorded: str | None, modelled: str | None) -> bool:
    """Whether the GPU a job recorded (``NVIDIA B200``) and the one a topology models (``A100-SXM4``) are
    different chips; False where either does not say.

    >>> other_chip("Tesla V100-SXM2-32GB", "A100-SXM4"), other_chip("NVIDIA GB200", "B200"), other_chip(None, "H100")
    (True, False, False)
    """
    a = _GPU_MODEL.search((recorded or "").upper())
    b = _GPU_MODEL.search((modelled or "").upper())
    return bool(a and b and a.group(0) != b.group(0))


def op_of(name: str) -> str | None:
    """Our name for a torch communication op name, or ``None`` when it is not a collective or p2p call.

    >>> [op_of(n) for n in ("nccl:_all_gather_base", "c10d::allreduce_", "gloo:all_to_all", "nccl:send 0->3", "barrier")]
    ['all_gather', 'all_reduce', 'all_to_all', 'send', None]
    """
    base = str(name or "").split("::")[-1].split(":")[-1].strip().split(" ")[0].strip("_").lower()
    return _OPS.get(base)


def dtype_bytes(name) -> int | None:
    """Bytes per element of a torch/c10 dtype name (``c10::BFloat16``, ``Float``, ``float``), else None."""
    key = str(name or "").strip().lower().replace("c10::", "").replace("torch.", "")
    return _DTYPES.get(key)


@dataclass
class Call:
    """One collective (or point-to-point) call on one rank, as a real job recorded it.

    ``op``: ``all_reduce``... or ``send``/``recv``; ``nbytes``: per-rank input bytes (module docstring);
    ``launch_us``: when the rank issued it (the CPU op); ``start_us`` / ``duration_us``: when its work
    (GPU kernel, gloo worker) started and how long it ran; ``nccl_algorithm`` / ``nccl_protocol``: NCCL's
    choice in collsim's names (``ring``, ``tree``, ``nvls``...; ``LL``, ``LL128``, ``Simple``) with
    ``choice_source`` saying where it was read (a kernel name is only a hint: see docs/traces.md).
    """

    source: str
    rank: int
    op: str
    nbytes: int | None = None
    group_size: int | None = None
    group_ranks: tuple | None = None
    dtype: str | None = None
    seq: int = 0
    launch_us: float | None = None
    start_us: float | None = None
    duration_us: float | None = None
    nccl_algorithm: str | None = None
    nccl_protocol: str | None = None
    choice_source: str | None = None
    backend: str | None = None
    kernel: str | None = None
    device: object = None
    # the call's identity across ranks where the evidence records one (flight recorder: the process group's
    # name and its collective_seq_id): the same call on every rank of the group, whatever each rank's
    # buffer kept. None: matched as the k-th call of the same kind on each rank
    match: tuple | None = None
    # "flight": read from a flight-recorder dump, whose launch time is its host's wall clock (hosts' clocks differ
    # by milliseconds), so lateness across ranks is judged as `collsim flight analyze` judges it
    recorder: str | None = None

    @property
    def collective(self):
        """The :class:`~sim.collectives.Collective`, or None for send/recv."""
        return COLLECTIVES.get(self.op)

    @property
    def nccl_tests_nbytes(self) -> int | None:
        """The size nccl-tests would print for this call (what the model is asked about)."""
        coll = self.collective
        if coll is None or self.nbytes is None:
            return self.nbytes
        return coll.nccl_tests_bytes(self.nbytes, self.group_size or 1)


@dataclass
class Job:
    """What the readers found: calls of every rank, plus what the files say about the job.

    ``spans``: rank -> (first, last) microsecond of the recorded window (the step, for the shares);
    ``compute``: rank -> list of (start, end) of non-communication GPU kernels (for exposed time);
    ``logs``: parsed NCCL logs (:class:`sim.evidence.nccl_log.NcclLog`); ``notes``: what was skipped and why;
    ``world_size``, ``device`` (the GPU model) and ``nccl_version``: what the files say about the job, where
    they say it.
    """

    calls: list = field(default_factory=list)
    spans: dict = field(default_factory=dict)
    compute: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)
    logs: list = field(default_factory=list)
    sources: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    world_size: int | None = None
    device: str | None = None
    nccl_version: str | None = None   # the NCCL release the files record (a trace's distributedInfo, a dump)

    def extend(self, other: Job) -> None:
        """Merge another reader's findings (ranks are global ranks in both)."""
        self.calls += other.calls
        self.spans.update(other.spans)
        self.steps.update(other.steps)
        for rank, intervals in other.compute.items():
            self.compute.setdefault(rank, []).extend(intervals)
        self.logs += other.logs
        self.sources += other.sources
        self.notes += other.notes
        self.world_size = max(filter(None, (self.world_size, other.world_size)), default=None)
        self.device = self.device or other.device
        self.nccl_version = self.nccl_version or other.nccl_version

    def ranks(self) -> list[int]:
        return sorted({c.rank for c in self.calls})

