"""Read an ``NCCL_DEBUG=INFO`` log: the machine as NCCL saw it, NCCL's choice per call, and nccl-tests' table.

What is read (every item optional; NCCL prints different lines across versions):

- ``NCCL version 2.27.7+cuda13.0`` (the first one; ranks printing another release get a note: mixed NCCL
  releases are a classic cause of hangs); ``comm 0x.. rank 3 nRanks 16 nNodes 2 localRanks 8`` (or, before
  NCCL 2.12, ``comm 0x.. rank 3 nranks 16 ...``); the host of each line (``host:pid:tid [dev]``);
- ``Channel 00/24 :    0   1`` (rings), ``Trees [0] ...`` / ``Tree 0 : ...``, ``24 coll channels, 24 collnet
  channels, 0 nvls channels, 32 p2p channels``; ``NVLS multicast support is (not) available``, ``NVLS comm
  ... nHeads 8``; CollNet: a loaded and connected CollNet (SHARP) plugin, or ``Failed to find ncclCollNetPlugin``; ``Using network IB`` / ``AWS Libfabric``, ``Selected Provider is efa (found 32 nics)``,
  ``NET/IB : Using [0]mlx5_0:1/RoCE ...``;
- with ``NCCL_DEBUG_SUBSYS=TUNING`` (or ``COLL``), NCCL's choice for each call:
  ``AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}``, the ground truth a kernel
  name only hints at (older NCCL prints ``8388608 Bytes -> Algo 1 proto 2 time ...`` after the call's
  ``AllReduce: opCount ...`` line: the numbers are NCCL's ``NCCL_ALGO_*`` / ``NCCL_PROTO_*``). NCCL counts those bytes as its tuner does (the larger of the send and receive
  buffers: an all_gather's gathered output), so all_gather calls are divided by the rank count to get
  torch's per-rank input (:mod:`sim.evidence.job`);
- an nccl-tests result table printed into the same log (:func:`sim.io.nccl_tests_format.parse_nccl_tests`),
  whose rows may be cut by other ranks' lines.

Logs as machines print them are tolerated: ``[1,N]<stdout>:`` prefixes from Open MPI, lines of several
ranks interleaved or glued together, truncated lines, TRACE lines. At most :data:`MAX_LOG_BYTES` are read.

>>> log = parse_log('''h1:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.4
... h1:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 2 localRanks 4 localRank 0 MNNVL 0
... h1:1:2 [0] NCCL INFO NVLS multicast support is not available on dev 0
... h1:1:2 [0] NCCL INFO 4 coll channels, 0 collnet channels, 0 nvls channels, 4 p2p channels, 2 p2p channels per peer
... h1:1:1 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo TREE proto LL128 channel{Lo..Hi}={0..3}''', "x.log")
>>> log.version, log.nranks, log.nnodes, log.gpus_per_node, log.nvls, log.coll_channels
('2.20.5', 8, 2, 4, False, 4)
>>> [(c.op, c.nbytes, c.nccl_algorithm, c.nccl_protocol) for c in log.calls]
[('all_reduce', 1048576, 'tree', 'LL128')]
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ..collectives import COLLECTIVES
from ..errors import CollsimError
from ..io.nccl_tests_format import (
    MPI_PREFIX,
    NCCL_RECORD,
    collective_from_rows,
    parse_nccl_tests,
    parse_nccl_tests_meta,
    split_records,
)
from ..io.safe_io import read_input
from .job import Call, Job, NotEvidence
from .kineto import ALGORITHMS, PROTOCOLS

MAX_LOG_BYTES = 256 << 20
MAX_LINES = 5_000_000

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_COMM = re.compile(r"comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)")
_COMM_OLD = re.compile(r"comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+)")
_RING = re.compile(r"Channel (\d+)/(\d+) :((?:\s+\d+)+)")
_TREE = re.compile(r"\bTrees? ?\[?\d+\]? ?:?\s*-?\d+/")
_CHANNELS = re.compile(r"(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?(\d+) p2p channels")
_NVLS = re.compile(r"NVLS multicast support is (not )?available")
_NVLS_HEADS = re.compile(r"NVLS comm .*nHeads (\d+)")
_COLLNET_YES = re.compile(r"(?i)loaded coll ?net plugin|connected coll ?net|coll ?net (?:is )?(?:enabled|supported)")
_COLLNET_NO = re.compile(r"(?i)failed to find ncclCollNetPlugin|coll ?net (?:is )?(?:disabled|not supported)")
_NETWORK = re.compile(r"Using network ([A-Za-z][\w ]*?)\s*$")
_PROVIDER = re.compile(r"Selected [Pp]rovider is (\w+)(?:.*?found (\d+) nics)?")
# aws-ofi-nccl 1.7+ groups the NICs behind one GPU into one device NCCL sees ("NIC group 0 device #3"):
# a p5's 32 EFA interfaces reach NCCL as 8 devices of 4 x 100 Gb/s
_NIC_GROUP = re.compile(r"NET/OFI NIC group (\d{1,4}) device #(\d{1,4})")
# aws-ofi-nccl names the instance type it recognised ("NET/OFI Running on P4d platform"); a p4d/p4de carries 4 EFA
# interfaces of 100 Gb/s (AWS's instance table), which a log without "found N nics" does not print
_PLATFORM = re.compile(r"NET/OFI Running on (\w+) platform")
PLATFORM_NICS = {"p4d": 4, "p4de": 4}
_IB_DEVS = re.compile(r"NET/IB : Using ((?:\[\d+\]\S+\s*)+)")
_TUNING = re.compile(r"\b(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|Send|Recv|SendRecv): (\d+) Bytes -> "
                     r"Algo (\w+) proto (\w+)")
# NCCL before 2.19 (and TRACE builds of later ones) print the choice as numbers, after the call's COLL line:
# "AllReduce: opCount 0 ... count N datatype 7 ..." then "8388608 Bytes -> Algo 1 proto 2 time 123.4"
_TUNING_NUM = re.compile(r"^\s*(\d+) Bytes -> Algo (\d+) proto (\d+)")
_COLL_LINE = re.compile(r"\b(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|Send|Recv): opCount")
_ALGO_NUMBERS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")  # NCCL_ALGO_* (2.12+)
_PROTO_NUMBERS = ("LL", "LL128", "Simple")                                                     # NCCL_PROTO_*
_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter", "Broadcast": "broadcast",
        "Reduce": "reduce", "AllToAll": "all_to_all", "Send": "send", "Recv": "recv", "SendRecv": "send"}
_NVL = re.compile(r"\+ NVL\[(\d+(?:\.\d+)?)\] - GPU/")
_MAX_DEVICE_LINE = 1024
# nccl-tests prints its result table's header once per run; the lines that open a run come before it
_TABLE_HEAD = re.compile(r"#\s+size\s+count\s")
_RUN_BANNER = re.compile(r"#\s*(?:Collective test starting|nccl-tests version|nThread\s+\d+\s+nGpus|Using devices|Rank\s+0+\s)")
_GPU = re.compile(r"#\s*Rank\s+\d+ .*device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")


@dataclass
class NcclLog:
    """What one NCCL debug log says (see the module docstring). Counts are None where the log is silent."""

    source: str
    version: str | None = None
    nranks: int | None = None
    nnodes: int | None = None
    gpus_per_node: int | None = None
    hosts: tuple = ()
    rings: int | None = None
    trees: int = 0
    coll_channels: int | None = None
    collnet_channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int | None = None
    nvls: bool | None = None
    nvls_heads: int | None = None
    collnet: bool | None = None  # a CollNet (SHARP) plugin loaded and connected; False: NCCL says it is absent
    network: str | None = None
    provider: str | None = None
    nics: int | None = None
    nic_groups: dict = field(default_factory=dict)   # aws-ofi-nccl's NIC group -> the devices in it
    gpu: str | None = None
    platform: str | None = None  # the instance type aws-ofi-nccl recognised ("P4d")
    nvlink_GBps: float | None = None  # the slowest GPU-to-GPU NVLink bandwidth in NCCL's topology dump
    calls: list = field(default_factory=list)
    nccl_tests: list = field(default_factory=list)
    nccl_tests_collective: str | None = None
    notes: list = field(default_factory=list)

    def summary(self) -> dict:
        """The JSON form (no per-call lines: those become the job's calls)."""
        keys = ("source", "version", "nranks", "nnodes", "gpus_per_node", "rings", "trees", "coll_channels",
                "collnet_channels", "nvls_channels", "p2p_channels", "nvls", "nvls_heads", "collnet", "network", "provider",
                "nics", "gpu", "nvlink_GBps", "nccl_tests_collective")
        out = {k: getattr(self, k) for k in keys}
        out.update(hosts=len(self.hosts), calls_with_choice=len(self.calls), nccl_tests_rows=len(self.nccl_tests))
        return out


def looks_like_log(text: str) -> bool:
    """True when ``text`` holds NCCL debug lines (the reader accepts it)."""
    return bool(NCCL_RECORD.search(text[:1 << 20]) or re.search(r"NCCL (INFO|WARN)", text[:1 << 20]))


def read_log(path: str) -> NcclLog:
    """Parse the log file ``path`` (one clear error when it is not an NCCL log)."""
    text = read_input(path, "NCCL log", MAX_LOG_BYTES)
    if "\x00" in text[:65536]:
        raise NotEvidence(f"{path}: binary data, not an NCCL debug log")
    if not looks_like_log(text):
        raise NotEvidence(f"{path}: no 'NCCL INFO' lines: not an NCCL debug log (run with NCCL_DEBUG=INFO)")
    return parse_log(text, path)


def parse_log(text: str, source: str) -> NcclLog:
    """Parse the text of an NCCL debug log (see the module docstring)."""
    log = NcclLog(source)
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise CollsimError(f"{source}: {len(lines):,} lines, over the {MAX_LINES:,} limit: cut the log to one job")
    hosts: dict = {}
    comms: dict = {}
    ring_ids: set = set()
    last_op: dict = {}  # (host, pid, tid) -> the op of its last COLL line (numeric tuning lines name none)
    stdout: list = []  # what the program itself printed (nccl-tests' table), pieces in order
    lines = [MPI_PREFIX.sub("", raw) for raw in lines]
    _check_one_run_in_file(lines, source)
    for head, m in split_records(lines):
        if head.strip():
            stdout.append((head, m is not None))  # a piece glued to a log record continues on a later line
        if m is None:
            continue
        hosts.setdefault(m.group("host"), set()).add(m.group("dev"))
        body = m.string[m.end():]
        _read_record(log, body, comms, ring_ids, m, last_op)
    log.hosts = tuple(sorted(hosts))
    if comms:
        log.nranks = max(c[0] for c in comms.values())
        nodes = [c[1] for c in comms.values() if c[1]]
        local = [c[2] for c in comms.values() if c[2]]
        log.nnodes = max(nodes) if nodes else None
        log.gpus_per_node = max(local) if local else None
    if log.nnodes is None and log.hosts and log.nranks:
        log.nnodes = len(log.hosts)
        if log.nranks % log.nnodes == 0:
            log.gpus_per_node = log.nranks // log.nnodes
    log.rings = len(ring_ids) or None
    if log.version is None:   # nccl-tests' own banner ("# NCCL version 2.9.9+cuda11.2" or bare) is no log record
        for head, _glued in stdout:
            if v := _VERSION.search(head):
                log.version = v.group(1)
                break
    _read_table(log, stdout)
    for c in log.calls:  # NCCL's byte count is the larger buffer; torch's input of an all_gather is 1/n of it
        coll = COLLECTIVES.get(c.op)
        c.group_size = c.group_size or log.nranks
        if coll is not None and coll.input_is_shard and c.group_size:
            c.nbytes //= c.group_size
    return log


def _check_one_run_in_file(lines: list, source: str) -> None:
    """Refuse a log holding two nccl-tests runs (two result tables: logs concatenated), saying where the second
    starts. Read as one, it would take its topology from one run and its times from the other, and count every
    call twice, as two files of two runs are refused (:func:`sim.evidence.load.read_job`)."""
    heads = [i for i, line in enumerate(lines) if "size" in line and _TABLE_HEAD.search(line)]
    if len(heads) < 2:
        return
    # the second run opens at its first banner line after the first table's header (else at its own header)
    start = next((i for i in range(heads[0] + 1, heads[1]) if _RUN_BANNER.search(lines[i])), heads[1])
    n, q = start + 1, shlex.quote(source)
    raise CollsimError(f"{source}: holds {len(heads)} nccl-tests runs (a second result table at line {heads[1] + 1}; "
                       f"its run starts at line {n}: {lines[start].strip()[:50]!r}): split it there (head -n {n - 1} "
                       f"{q} > run1.log; tail -n +{n} {q} > run2.log) and pass one run per command")


def _read_network(log: NcclLog, body: str) -> None:
    """The network a record names: NCCL's net plugin, its provider, the NICs it found, and (aws-ofi-nccl)
    how it grouped them into the devices NCCL sees."""
    if n := _NETWORK.search(body):
        log.network = n.group(1)
    if p := _PROVIDER.search(body):
        log.provider = p.group(1).lower()
        if p.group(2):
            log.nics = int(p.group(2))
    for g in _NIC_GROUP.finditer(body):
        log.nic_groups.setdefault(int(g.group(1)), set()).add(int(g.group(2)))
    if (pl := _PLATFORM.search(body)) and log.nics is None and pl.group(1).lower() in PLATFORM_NICS:
        log.nics = PLATFORM_NICS[pl.group(1).lower()]
        log.platform = pl.group(1)
    if ib := _IB_DEVS.search(body):
        log.nics = max(log.nics or 0, len(re.findall(r"\[\d+\]", ib.group(1))))
        if "RoCE" in ib.group(1):
            log.provider = log.provider or "roce"


def _read_record(log: NcclLog, body: str, comms: dict, ring_ids: set, m, last_op: dict) -> None:
    if v := _VERSION.search(body):
        if log.version is None:
            log.version = v.group(1)
        elif v.group(1) != log.version and not any(n.startswith("ranks run different NCCL versions") for n in log.notes):
            # a hang's classic cause: ranks built against different NCCL releases (one note per log)
            log.notes.append(f"ranks run different NCCL versions ({log.version} and {v.group(1)}, host "
                             f"{m.group('host')}): mixed releases can hang or disagree on algorithms; "
                             f"the log's first, {log.version}, is the one reported")
    if c := _COMM.search(body):
        comms[(m.group("host"), c.group(1))] = (int(c.group(3)), int(c.group(4)), int(c.group(5)))
    elif c := _COMM_OLD.search(body):
        comms.setdefault((m.group("host"), c.group(1)), (int(c.group(3)), 0, 0))
    if r := _RING.search(body):
        ring_ids.add(int(r.group(1)))
    if _TREE.search(body):
        log.trees += 1
    if ch := _CHANNELS.search(body):
        log.coll_channels = max(log.coll_channels or 0, int(ch.group(1)))
        if ch.group(2) is not None:
            log.collnet_channels = max(log.collnet_channels or 0, int(ch.group(2)))
        if ch.group(3) is not None:
            log.nvls_channels = max(log.nvls_channels or 0, int(ch.group(3)))
        log.p2p_channels = max(log.p2p_channels or 0, int(ch.group(4)))
    if nv := _NVLS.search(body):
        log.nvls = bool(log.nvls) or not nv.group(1)
    if h := _NVLS_HEADS.search(body):
        log.nvls_heads = int(h.group(1))
    if _COLLNET_YES.search(body):
        log.collnet = True
    elif log.collnet is None and _COLLNET_NO.search(body):
        log.collnet = False
    _read_network(log, body)
    if nl := _NVL.search(body):
        bw = float(nl.group(1))
        log.nvlink_GBps = bw if log.nvlink_GBps is None else min(log.nvlink_GBps, bw)
    thread = (m.group("host"), m.group("pid"), m.group("tid"))
    if cl := _COLL_LINE.search(body):
        last_op[thread] = _OPS[cl.group(1)]
    if t := _TUNING.search(body):
        algo, proto = ALGORITHMS.get(t.group(3).upper()), PROTOCOLS.get(t.group(4).upper())
        log.calls.append(Call(source=log.source, rank=int(m.group("dev")), op=_OPS[t.group(1)], nbytes=int(t.group(2)),
                              nccl_algorithm=algo, nccl_protocol=proto, choice_source="NCCL log", backend="nccl"))
    elif (t := _TUNING_NUM.search(body)) and thread in last_op:
        ai, pi = int(t.group(2)), int(t.group(3))
        if ai < len(_ALGO_NUMBERS) and pi < len(_PROTO_NUMBERS):
            log.calls.append(Call(source=log.source, rank=int(m.group("dev")), op=last_op[thread], nbytes=int(t.group(1)),
                                  nccl_algorithm=_ALGO_NUMBERS[ai], nccl_protocol=_PROTO_NUMBERS[pi],
                                  choice_source="NCCL log", backend="nccl"))


def _read_table(log: NcclLog, stdout: list) -> None:
    """nccl-tests' rows, re-joined where log records cut them (a piece glued to a record continues)."""
    text, joined = [], ""
    for piece, glued in stdout:
        joined += piece
        if not glued:
            text.append(joined)
            joined = ""
        else:
            joined += " "
    if joined:
        text.append(joined)
    table = "\n".join(text)
    for line in text:
        # a device line is short ("#  Rank  0 Group  0 Pid 1 on h device  0 [0000:17:00] NVIDIA A100"); the
        # pattern backtracks over a long line from every '#' in it (a 550 KB line took 13 s)
        if len(line) <= _MAX_DEVICE_LINE and (g := _GPU.search(line)):
            log.gpu = g.group(1)
            break
    try:
        log.nccl_tests = parse_nccl_tests(table)
    except CollsimError as e:   # no table at all is the common case; a damaged one is said
        if "no nccl-tests result rows" not in str(e):
            log.notes.append(f"its nccl-tests table was not read: {e}")
        return
    try:
        log.nccl_tests_collective = parse_nccl_tests_meta(table)["collective"]
    except CollsimError as e:
        log.notes.append(str(e))
    if log.nccl_tests_collective is None and log.nranks:
        # the log does not name the *_perf binary: all_reduce is the one collective whose busbw/algbw is 2(n-1)/n
        n = log.nranks
        if collective_from_rows(log.nccl_tests, n) == "all_reduce":
            log.nccl_tests_collective = "all_reduce"
            log.notes.append(f"the nccl-tests table names no collective; busbw/algbw = 2(n-1)/n for n={n} says all_reduce")
        else:
            log.notes.append("the nccl-tests table names no collective (no *_perf line): its rows are not used")


def log_job(log: NcclLog) -> Job:
    """The log's calls as a :class:`~sim.evidence.job.Job`; an nccl-tests table's rows give each size's time.

    The per-call lines carry no duration. When the log also holds an nccl-tests table of the same
    collective, each call of a size in the table gets that row's out-of-place time (``time_us``, the
    average over nccl-tests' iterations), so the comparison has a measured time.
    """
    times = {}
    if log.nccl_tests_collective:
        times = {(log.nccl_tests_collective, r["nbytes"]): r["time_us"] for r in log.nccl_tests}
    calls = []
    for c in log.calls:
        coll = COLLECTIVES.get(c.op)
        size = coll.nccl_tests_bytes(c.nbytes, c.group_size or 1) if coll is not None else c.nbytes
        c.duration_us = times.get((c.op, size))
        calls.append(c)
    if not calls and log.nccl_tests_collective and log.nranks:  # a table without per-call lines
        coll = COLLECTIVES.get(log.nccl_tests_collective)
        for r in log.nccl_tests:
            nbytes = r["nbytes"] // log.nranks if coll is not None and coll.input_is_shard else r["nbytes"]
            calls.append(Call(source=log.source, rank=0, op=log.nccl_tests_collective, nbytes=nbytes,
                              group_size=log.nranks, duration_us=r["time_us"], backend="nccl"))
    notes = [f"{log.source}: {n}" for n in log.notes]
    if any(c.duration_us is not None for c in calls):
        notes.append(f"{log.source}: measured times are its nccl-tests table's out-of-place time per size (nccl-tests' "
                     "average over its iterations), not a median of the calls")
    return Job(calls=calls, logs=[log], sources=[log.source], world_size=log.nranks, notes=notes)


def topology_spec(log: NcclLog) -> tuple[str, list[str]]:
    """A collsim topology spec for the machine the log describes, and the reasons for each choice.

    GPU model (nccl-tests' device lines) and GPUs per node pick the platform preset; nodes, NICs per node,
    NVLS and the fabric (EFA, Slingshot/cxi, RoCE, IB) come from NCCL's own lines. A log that names no GPU
    model is mapped by its shape (4 GPUs per node: hgx-a100-4; 8 with NVLS: dgx-h100; 8 without: dgx-a100). A GH200
    is ``gh200-4``. An H100 log of 4 ranks per node stays an NVSwitch node's 4 GPUs: a log does not say whether the
    node is the 4-GPU HGX board (``hgx-h100-4``) or a PCIe card, and the reasons say so.
    """
    if not log.nranks:
        raise CollsimError(f"{log.source}: the log names no rank count (no 'comm ... nRanks' line): pass --topology SPEC")
    why = []
    nodes = log.nnodes or 1
    per_node = log.gpus_per_node or (log.nranks // nodes if log.nranks % nodes == 0 else log.nranks)
    gpu = (log.gpu or "").upper()
    if "GH200" in gpu:
        preset = "gh200-4"
    elif "H200" in gpu:
        preset = "dgx-h200"
    elif "H100" in gpu or "H800" in gpu:
        preset = "dgx-h100"
    elif "B200" in gpu or "B100" in gpu:
        preset = "dgx-b200"
    elif "A100" in gpu and "PCIE" in gpu and nodes == 1:
        preset = "pcie"
    elif "A100" in gpu:
        preset = "dgx-a100" if per_node > 4 else "hgx-a100-4"
    elif per_node == 4 and not log.nvls:
        preset = "hgx-a100-4"
    else:
        preset = "dgx-h100" if log.nvls else "dgx-a100"
    if preset in ("dgx-h100", "dgx-h200") and per_node <= 4:
        why.append(f"{per_node} Hopper GPUs per node read as part of an 8-GPU NVSwitch node: a 4-GPU HGX board is "
                   "hgx-h100-4 and PCIe cards are pcie; pass --topology if the node is one of those")
    why.append(f"GPU {log.gpu!r}, {per_node} per node -> {preset}" if log.gpu else
               f"no GPU model printed; {per_node} GPUs per node{', NVLS' if log.nvls else ''} -> {preset}")
    if preset == "pcie" and log.nvlink_GBps:
        why[-1] = (f"GPU {log.gpu!r}: {per_node} PCIe cards joined by NVLink ({log.nvlink_GBps:g} GB/s in NCCL's topology, "
                   "the slowest GPU pair) -> fully-connected NVLink")
        return f"fully-connected:n={per_node},bandwidth_GBps={log.nvlink_GBps:g},kind=nvlink", why
    if preset == "pcie":
        return f"pcie:gpus={per_node},gen=4,arch=ampere", why
    params = [f"nodes={nodes}"]
    if per_node != (4 if preset in ("hgx-a100-4", "gh200-4") else 8):
        params.append(f"gpus_per_node={per_node}")
    fabric = {"efa": "efa", "cxi": "slingshot", "roce": "roce"}.get(log.provider or "")
    if fabric is None and log.network == "IB":
        fabric = "ib"
    if fabric == "efa" and preset in ("dgx-h100", "dgx-h200"):
        fabric = "efa2"   # Hopper instances (p5, p5e) carry EFA's second generation
    if nodes > 1 and fabric:
        params.append(f"fabric={fabric}")
        why.append(f"network {log.network or '?'} / provider {log.provider or '-'} -> fabric={fabric}")
    per_group = max((len(d) for d in log.nic_groups.values()), default=1)
    if nodes > 1 and log.nic_groups:   # NCCL sees the plugin's groups, each as fast as its interfaces together
        params.append(f"nics_per_node={len(log.nic_groups)}")
        why.append(f"the net plugin groups {log.nics or '?'} NICs into {len(log.nic_groups)} devices of {per_group} "
                   "(NET/OFI NIC group lines): NCCL sees the groups")
    elif nodes > 1 and log.nics:
        params.append(f"nics_per_node={log.nics}")
        why.append(f"aws-ofi-nccl runs on a {log.platform} instance: {log.nics} EFA NICs per node" if log.platform else
                   f"NCCL found {log.nics} NICs per node")
    elif nodes > 1:
        why.append("the log does not say how many NICs a node has: the preset's count is assumed")
    if nodes > 1 and fabric in ("efa", "efa2"):
        params.append(f"nic_gbps={100 * per_group}")  # every EFA interface of p4d (4) and p5 (32) instances is 100 Gb/s (AWS)
        why.append("EFA interfaces are 100 Gb/s each (p4d: 4, p5: 32 per instance)"
                   + (f", {per_group} to a group" if per_group > 1 else ""))
    if nodes > 1 and log.collnet:
        params.append("sharp=1")
        why.append("NCCL loaded and connected a CollNet (SHARP) plugin")
    if log.nvls is not None and preset in ("dgx-h100", "dgx-h200", "dgx-b200"):
        params.append(f"nvls={int(log.nvls)}")
        why.append(f"NVLS {'available' if log.nvls else 'not available'} per NCCL")
    return f"{preset}:{','.join(params)}", why
