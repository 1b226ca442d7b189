"""NCCL's tuner as a closed form: (latency, bandwidth) per (algorithm, protocol), time = lat + S / bw.

This is NCCL's ``ncclTopoTuneModel`` + ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``) fed by a
small emulation of its topology search (``search.cc``: channels and per-channel speeds picked from NCCL's
speed lists), for the release and NCCL_* variables in force (:mod:`sim.nccl.config`,
:mod:`sim.nccl.versions`; 2.27.7's tables where a release changed nothing). It predicts what NCCL
*thinks* each pair costs, which is how NCCL chooses: the pair with the smallest predicted time wins
(:func:`rank_pairs`). The discrete-event engine then predicts what the chosen pair really costs
(contention, pipelining, the topology's links); ``docs/nccl-model.md`` says where and why the two differ.

Units: bandwidths in GB/s (1e9 B/s), latencies in us, sizes in bytes.

>>> from sim.presets import load_topology
>>> t = tuner_terms("all_reduce", 1 << 30, load_topology("dgx-h100"), "ring", "Simple")
>>> t.nchannels, t.bus_GBps, round(t.latency_us, 1)   # 12 rings x 30 GB/s; 8.4 + 14 hops x 3.4 + 3.0 us launch
(12, 360.0, 59.0)
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from ..algorithms.analytic import ring_steps
from ..collectives import Collective, get_collective
from ..errors import CollsimError
from ..topology.hardware import through_cpu
from . import calibration, tuner_plugin
from . import config as nccl_config
from .config import NcclConfig
from .constants import (
    ARCHS,
    COLLNET_DIRECT_SM90_FACTOR,
    LL128_BW_FACTOR,
    LL_MAX_BW,
    MAX_THREADS,
    MIN_THREADS,
    NCCL_ALGORITHMS,
    NCCL_PROTOCOLS,
    NCCL_RULES,
    NET_SHARE_FACTOR,
    NVLS_BUS_TO_ALG,
    NVLS_EFFICIENCY,
    NVLS_MAX_HEADS,
    NVLS_TREE_CORRECTION,
    NVLS_TREE_RATIO_2_18,
    P2P_LL_THRESHOLD,
    PER_CH_MAX_RING_LL128,
    PER_CH_MAX_TREE,
    PER_CH_MAX_TREE_LL128,
    RING_LL_BW_FACTOR,
    RING_LL_BW_FACTORS_2_18,
    RING_PLATEAU_LATENCY,
    RING_PLATEAU_MIN_BYTES,
    SMALL_MESSAGE_ALGORITHMS,
    THREAD_HALVING_MULTIPLE,
    THREAD_THRESHOLD,
    TREE_BUS_TO_ALG,
    TREE_CORRECTION,
    TREE_LL128_BW_FACTOR,
    TREE_LL_BW_DIVISOR,
    TREE_PATTERN_FACTOR,
    X86_CPUS,
)
from .context import cached
from .machine import Machine, graph_for, machine, nvls_channels, nvls_graph, runtime_channels, tree_pattern
from .protocols import base_latency_us, get_protocol, hop_latency_us


# ---- the model ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Terms:
    """One (algorithm, protocol) as NCCL's tuner sees it. ``bus_GBps`` is NCCL's busBw (before the
    bus-to-algorithm ratio), ``alg_GBps`` the bandwidth dividing the size; 0 means disabled."""

    algorithm: str
    protocol: str
    nchannels: int
    bus_GBps: float
    alg_GBps: float
    latency_us: float
    time_us: float
    detail: dict = field(default_factory=dict)


def _disabled_by_config(a: str, p: str, coll: Collective, m: Machine, cfg: NcclConfig) -> str | None:
    """Why the release or the NCCL_* variables of ``cfg`` rule (a, p) out, or None."""
    rel = cfg.release
    if coll.sharded and a not in rel.ag_rs_algorithms:
        since = {"pat": "2.23", "nvls": "2.19", "collnet_direct": "2.21"}.get(a)
        return f"NCCL {cfg.version} has no {a} {coll.name}" + (f" (since NCCL {since})" if since else "")
    if not cfg.algo_enabled(coll, a, collnet=m.sharp and m.nnodes > 1, machine_off=_nvls_off(m)):
        return f"NCCL_ALGO excludes {a} for {coll.name}"
    if not cfg.proto_enabled(coll, p):
        return f"NCCL_PROTO excludes {p} for {coll.name}"
    if a.startswith("nvls") and not cfg.nvls:
        return "NCCL_NVLS_ENABLE=0"
    if a.startswith("collnet") and not cfg.collnet:
        return "NCCL_COLLNET_ENABLE=0"
    if a == "nvls" and m.nnodes > 1 and not cfg.collnet:
        return "multi-node NVLS needs CollNet, and NCCL_COLLNET_ENABLE=0"
    if a == "pat" and not cfg.pat:
        return "NCCL_PAT_ENABLE=0"
    if p == "LL128" and m.arch == "blackwell" and not rel.ll128_blackwell and not cfg.proto_forced(coll, p):
        return f"NCCL {cfg.version} enables LL128 on Volta/Ampere/Hopper only (Blackwell from 2.25)"
    return None


def _has_nvls(m: Machine) -> bool:
    """An NVLink SHARP switch (Hopper or later): what NVLS and NVLSTree need at all."""
    return bool(m.nvls) and m.cc_index >= 2


def _nvls_layout_off(a: str, m: Machine) -> str | None:
    """Why the node count and the network rule NVLS or NVLSTree out on a machine that has NVLS, or None."""
    if a == "nvls_tree" and m.nnodes == 1:
        return "NCCL disables NVLSTree on a single node"
    if a == "nvls" and m.nnodes > 1 and not m.sharp:
        return "multi-node NVLS needs CollNet (IB SHARP)"
    if a == "nvls" and m.nnodes > 1 and not m.nvls_sharp:
        return ("multi-node NVLS (NVLS + IB SHARP) is off: it also needs NVLS buffer registration and a "
                "multicast-capable SHARP plugin; enable it with sharp=1,nvls_sharp=1")
    return None


def _nvls_off(m: Machine) -> frozenset:
    """The NVLS algorithms the machine rules out before NCCL_ALGO's fallback looks (``tuning.cc`` up to 2.23):
    both without an NVLink SHARP switch, else those :func:`_nvls_layout_off` names (the checks :func:`_disabled`
    makes)."""
    return frozenset(a for a in ("nvls", "nvls_tree") if not _has_nvls(m) or _nvls_layout_off(a, m))


SIMPLE_ONLY = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat")


def protocol_not_run(a: str, p: str) -> str | None:
    """Why NCCL never runs algorithm ``a`` with protocol ``p``, on any machine or release, or None: NVLS,
    CollNet and PAT kernels exist for Simple only, point-to-point sends for LL and Simple.

    >>> protocol_not_run("nvls", "LL"), protocol_not_run("ring", "LL")
    ('nvls runs the Simple protocol only', None)
    """
    if a == "p2p" and p == "LL128":
        return "NCCL's point-to-point sends use LL (small) or Simple"
    if a in SIMPLE_ONLY and p not in ("Simple", "ideal"):
        return f"{a} runs the Simple protocol only"
    return None


def _disabled(a: str, p: str, coll: Collective, m: Machine, cfg: NcclConfig | None = None) -> str | None:
    """Why NCCL (the release and variables of ``cfg``, default those in force) would not use (a, p) here, or None."""
    cfg = cfg or nccl_config.current()
    rel = cfg.release
    allowed = NCCL_RULES[coll].algorithms
    if a not in allowed:
        if coll.nccl_p2p:
            return f"NCCL runs {coll.name} as grouped point-to-point sends (p2p)"
        if a == "p2p":
            return "p2p is how NCCL runs all_to_all only"
        return f"NCCL has no {a} {coll.name}: it runs it with {', '.join(allowed)}"
    why = _disabled_by_config(a, p, coll, m, cfg)
    if why:
        return why
    why = protocol_not_run(a, p)
    if why:
        return why
    if a in ("nvls", "nvls_tree") and not _has_nvls(m):
        return "NVLS needs an NVLink SHARP switch (Hopper or later)"
    if a in ("nvls", "nvls_tree") and rel.nvls_efficiency_model and nvls_graph(m).nchannels < 2:
        # tuning.cc: "NVLS/NVLStree needs at least 2 channels", of its search's graph (the run's bounds do not move it)
        return f"NCCL {cfg.version} needs at least 2 NVLS channels (its search found {nvls_graph(m).nchannels})"
    if a == "nvls" and coll.sharded and m.ppn > NVLS_MAX_HEADS:
        return f"NCCL runs NVLS {coll.name} only with at most {NVLS_MAX_HEADS} GPUs per NVLink domain (enqueue.cc)"
    why = _nvls_layout_off(a, m)
    if why:
        return why
    if a.startswith("collnet") and (not m.sharp or m.nnodes == 1):
        return "CollNet needs IB SHARP between nodes"
    if a == "collnet_direct" and (not m.nvswitch or m.ppn > 8):
        return "CollNetDirect needs an NVSwitch and at most 8 GPUs per node"
    if a == "pat" and m.ppn != 1:
        return "PAT needs one GPU per node"
    if p == "LL128" and cfg.proto_forced(coll, p):
        return None   # NCCL_PROTO named it: NCCL skips its hardware check (NcclConfig.proto_forced)
    if p == "LL128" and m.ppn > 1 and m.intra_class != "nvlink":
        return "LL128 is enabled only over NVLink inside a node"
    if p == "LL128" and m.nnodes > 1 and through_cpu(m.nic_path):
        # tuning.cc (2.18 .. 2.29; v2.18.5-1 line 285, v2.21.5-1 line 308): typeInter <= PATH_PXB (PATH_PXN on
        # Hopper+, still nearer than PHB)
        return (f"NCCL enables LL128 across nodes only when the GPU reaches its NIC through PCIe switches (PXB or "
                f"nearer); here the NIC is {m.nic_path} (behind the CPU)")
    return None


def _once_per_inputs(fn):
    """Compute ``fn`` once per (collective, size, algorithm, protocol, machine) and settings in force
    (:mod:`sim.nccl.context`): selection ranks every pair, the plan, the payload share and ``--explain``
    ask for the same terms again (a 2-node sweep asked 726 times for 279 distinct terms)."""
    @cached(maxsize=8192)
    def terms(coll: str, nbytes: int, topo, algorithm: str, p: str, m: Machine) -> Terms:
        return fn(coll, nbytes, topo, algorithm, p, m)

    @functools.wraps(fn)
    def once(collective, nbytes: int, topo, algorithm: str, protocol: str, m: Machine | None = None) -> Terms:
        return terms(get_collective(collective).name, nbytes, topo, algorithm, get_protocol(protocol).name,
                     m or machine(topo))
    once.cache = terms     # type: ignore[attr-defined]
    return once


@_once_per_inputs
def tuner_terms(collective, nbytes: int, topo, algorithm: str, protocol: str, m: Machine | None = None) -> Terms:
    """NCCL's (latency, bandwidth, time) for one pair; ``alg_GBps == 0`` when NCCL would not use it."""
    coll = get_collective(collective)
    p = get_protocol(protocol).name
    if p not in NCCL_PROTOCOLS:
        raise CollsimError(f"the tuner models NCCL's protocols ({', '.join(NCCL_PROTOCOLS)}), not {p!r}")
    if algorithm not in NCCL_ALGORITHMS:
        raise CollsimError(f"the tuner models NCCL's algorithms ({', '.join(NCCL_ALGORITHMS)}), not {algorithm!r}")
    m = m or machine(topo)
    cfg = nccl_config.current()
    why = _disabled(algorithm, p, coll, m, cfg)
    if algorithm == "p2p" and not why and (p == "LL") != (nbytes / m.nranks <= P2P_LL_THRESHOLD):
        why = f"NCCL's p2p uses LL up to {P2P_LL_THRESHOLD} B per peer (NCCL_P2P_LL_THRESHOLD), Simple above"
    if why:
        return Terms(algorithm, p, 0, 0.0, 0.0, math.inf, math.inf, {"disabled": why})
    bus, nch, detail = _bus_bandwidth(coll, algorithm, p, m, cfg)
    n = m.nranks
    nsteps = n if coll.rooted else coll.ring_steps(n)   # tuning.cc: broadcast/reduce count n steps
    alg = bus
    if not (algorithm != "ring" and coll.sharded):
        nvls_ratio = n / nsteps if cfg.release.nvls_efficiency_model else NVLS_BUS_TO_ALG   # 2.28+: as rings
        alg = bus * (n / nsteps if algorithm in ("ring", "p2p") else nvls_ratio if algorithm.startswith("nvls") else TREE_BUS_TO_ALG)
        if algorithm == "nvls_tree" and cfg.release.nvls_tree_ratio_old and m.nnodes > 1:
            alg = bus * NVLS_TREE_RATIO_2_18 * m.nnodes / (2 * (m.nnodes - 1))   # 2.18: ratio = .70 nNodes / (2 (nNodes-1))
    if "kernel_cap_bus_GBps" in detail and bus > 0:   # the kernels' bound as algBw, by the same ratio as the rest
        detail["kernel_cap_alg_GBps"] = detail.pop("kernel_cap_bus_GBps") * alg / bus
    lat = base_lat = _latency(coll, algorithm, p, m, nsteps, cfg)
    plateau = 1.0
    bw = alg
    log_size = int(math.log2(nbytes >> 6)) if nbytes >> 6 else -1
    allreduce_terms = NCCL_RULES[coll].allreduce_terms
    if algorithm == "tree" and allreduce_terms and 0 <= log_size < len(TREE_CORRECTION[p]):
        bw *= TREE_CORRECTION[p][log_size]
        detail["tree_correction"] = TREE_CORRECTION[p][log_size]
    if (algorithm == "nvls_tree" and allreduce_terms and cfg.release.nvls_tree_correction_x86 and m.arch == "blackwell"
            and m.cpu in X86_CPUS and 0 <= log_size < len(NVLS_TREE_CORRECTION[p])):
        # 2.29+: "minCompCap >= 100 && cpuArch == X86"; like the tree's, the engine takes the factor too
        bw *= NVLS_TREE_CORRECTION[p][log_size]
        detail["tree_correction"] = NVLS_TREE_CORRECTION[p][log_size]
    if algorithm == "ring" and p == "Simple" and m.nnodes > 1 and allreduce_terms and nbytes / (nch * n) >= RING_PLATEAU_MIN_BYTES:
        plateau = RING_PLATEAU_LATENCY[0 if m.cc_index == 0 else 1]   # "plateau effect of ring"
        lat *= plateau
        detail["ring_plateau"] = True
    rdzv = _rendezvous_us(algorithm, p, m, nbytes, nch, nsteps, cfg)
    if rdzv:
        lat += rdzv
        detail["rendezvous_us"] = rdzv
    copy = _recv_copy_us(algorithm, p, m, nbytes, nch, nsteps, cfg)
    if copy:
        lat += copy
        detail["recv_copy_us"] = copy
    if algorithm == "ring" and not coll.rooted and m.nnodes > 1 and bw > 0:
        hidden = _ring_software_hidden_us(coll, p, m, nsteps, cfg, base_lat, rdzv + copy, nbytes / (1000 * bw) / nsteps,
                                          plateau)
        if hidden:
            lat -= hidden
            detail["software_overlap_us"] = hidden   # a model charging its own data time hides no more than that
            # (sim.nccl.execution.software_overlap_shift_us)
    lat += m.call_overhead_us
    if coll.rooted and nsteps > 1:
        detail["loop_latency_us"] = _loop_latency_us(coll, algorithm, p, m, nbytes, nch, cfg)
    time = lat + nbytes / (1000 * bw) if bw > 0 else math.inf
    return Terms(algorithm, p, nch, bus, alg, lat, time, detail)


def _loop_latency_us(coll: Collective, a: str, p: str, m: Machine, nbytes: int, nch: int, cfg: NcclConfig) -> float:
    """A rooted chain's latency per call when calls run back to back, as nccl-tests times them.

    nccl-tests launches ``-n`` calls without waiting between them and divides each rank's elapsed time by
    their number (``common.cu``: the timed loop, then ``Allreduce(args, &deltaSec, average)``). A broadcast or
    reduce runs as a chain from the root, and a rank's next call needs only its own previous call and the
    next message from upstream, so calls follow each other down the chain: the root starts call i+1 while
    call i is still travelling. The hops' latencies then only set how far each rank runs behind the one
    before it (the chain fills once per timed loop); what each rank pays per call is NCCL's fixed cost
    (``baseLat``), the launch, and on a chain that crosses nodes the proxy's work on one message (the net
    overhead, and a transport's rendezvous or receive copy where it has one). NCCL's own model, which
    chooses, counts the chain's n hops (``latency_us``).

    Published: ABCI's broadcast over 2 to 16 nodes of 8 A100 (16-128 ranks, InfiniBand) takes 7.5-7.8 us at
    4 B at every node count, where NCCL's n-hop latency is 60-430 us and this rule gives 11.6 (10.6 with the
    launch cost fitted without ABCI's cases); nccl-tests #82 reports the root's time running ahead of its
    peers'."""
    lat = base_latency_us(a, p) + m.call_overhead_us
    if m.nnodes > 1:
        lat += _ring_step_floor_us(m, p)
        lat += _rendezvous_us(a, p, m, nbytes, nch, 1, cfg) + _recv_copy_us(a, p, m, nbytes, nch, 1, cfg)
    return lat


def _rendezvous_us(a: str, p: str, m: Machine, nbytes: int, nch: int, nsteps: int, cfg: NcclConfig) -> float:
    """What the transport's rendezvous adds to the collective's critical path: on a fabric whose transport
    sends messages of at least a threshold by rendezvous (Slingshot's cxi provider: 16 KiB), each network
    message of a ring step or a tree hop at or above it pays ``rendezvous_us.<fabric>``.

    The evidence is the shape of ALCF's Polaris sweeps: a ring step costs ~9 us while each rank's share
    per step is 4 KiB or less and ~30 us from 16 KiB, at every node count from 2 to 540, so where the share
    crosses a size, not the node count, sets the jump; 16 KiB of LL wire (8 KiB of data) is cxi's default
    threshold. That the rendezvous is the cause is the hypothesis this encodes: all_to_all's sends show no
    such jump at the same message sizes (C6-8-A2A, C6-540-A2A-221) and do not pay it. A run's
    FI_CXI_RDZV_THRESHOLD is not an input: only cxi's default is modelled.

    Runs with hybrid tag matching (``FI_CXI_RX_MATCH_MODE=hybrid``) pay none. Both public ones show no jump:
    NERSC Perlmutter's rings run 9.4 us a step at 1 MiB over 8 ranks (16 KiB of data a step, above the
    threshold), where ALCF Polaris's pay 23 us with hardware matching and with software matching alike, and
    CSCS Alps's 66 with software matching (NCCL 2.23); Sigma2 Olivia sends every message by rendezvous
    (threshold 0) and its small sizes are not slow (22 us for 16 B). Why hybrid differs from hardware
    matching is not known (the provider's documentation says only that hybrid falls back to software
    matching when the NIC's match resources run out); the two runs are the evidence, and the default
    (hardware) keeps the cost Polaris's setup (4) measured. The cost is fitted (no public figure; prior 0).
    """
    if not cfg.pays_rendezvous or m.nnodes <= 1 or not m.on_fabric:
        return 0.0
    cost = calibration.fabric_rendezvous_us(m.fabric)
    if not cost:
        return 0.0
    threshold = calibration.get_fabric(m.fabric).rdzv_threshold_bytes
    if a not in ("ring", "tree"):   # all_to_all's sends show no jump (above)
        return 0.0
    share, messages = _network_messages(a, p, m, nbytes, nch, nsteps)
    return messages * cost if get_protocol(p).wire_bytes(share) >= threshold else 0.0


def used_channels(nbytes: float, nranks: int, algorithm: str, p: str, nchannels: int) -> tuple[int, int]:
    """(channels, threads per channel) NCCL runs a ring or tree of ``nbytes`` on (enqueue.cc
    ``topoGetAlgoInfo``): it drops channels while the message is smaller than channels x threads x
    ``THREAD_THRESHOLD`` bytes (x nranks for ring LL), then halves the threads while they are a multiple of
    128, not below 64. Other algorithms keep ``nchannels``.

    >>> used_channels(4096, 16, "tree", "LL", 8), used_channels(32 << 10, 16, "tree", "LL", 8)
    ((1, 512), (8, 512))
    """
    if algorithm not in SMALL_MESSAGE_ALGORITHMS or p not in MAX_THREADS:
        return nchannels, MAX_THREADS.get(p, 512)
    thr = THREAD_THRESHOLD[p] * (nranks if (algorithm == "ring" and p == "LL") else 1)
    nc, nt = nchannels, MAX_THREADS[p]
    while nbytes < nc * nt * thr and nc >= 2:
        nc -= 1
    while nbytes < nc * nt * thr and nt % THREAD_HALVING_MULTIPLE == 0 and nt > MIN_THREADS:
        nt //= 2
    return nc, nt


def _network_messages(a: str, p: str, m: Machine, nbytes: int, nch: int, nsteps: int) -> tuple[float, int]:
    """(bytes of one network message, messages on the critical path) of a ring step, a tree hop or an
    all_to_all's remote peers: a ring's steps are synchronised end to end, so each of its ``nsteps`` waits for
    one network message; a tree crosses ceil(log2 nodes) levels up and as many down; all_to_all's proxy
    handles its remote peers one after the other. (0, 0) for the algorithms without such messages.

    A message is a share of the channels NCCL actually runs (:func:`used_channels`), not of all ``nch``:
    on a small message NCCL drops channels until each carries about ``THREAD_THRESHOLD`` x threads bytes
    (4 KiB of data for LL), so a tree's messages stay near 4 KiB until every channel is in use. This is
    what puts CSCS Alps's jump where it is measured: with GDRCopy (which copies received messages of at
    most 4 KiB of wire cheaply) an 8-node tree all_reduce runs 51 us at 512 B and 158 us at 4 KiB, where
    one channel carries the whole 4 KiB (8 KiB of LL wire, past GDRCopy) and not a quarter of it; without
    GDRCopy, every message is copied the slow way and there is no such jump (92 -> 109 us)."""
    n, ch = m.nranks, used_channels(nbytes, m.nranks, a, p, max(nch, 1))[0]   # other algorithms keep all
    if a == "ring":
        return nbytes / (n * ch), nsteps
    if a == "tree":
        return nbytes / ch, 2 * max(1, math.ceil(math.log2(m.nnodes)))
    if a == "p2p":
        return nbytes / n, n - m.ppn
    return 0.0, 0


def _recv_copy_us(a: str, p: str, m: Machine, nbytes: int, nch: int, nsteps: int, cfg: NcclConfig) -> float:
    """What copying received small messages into GPU memory adds (a ring step: only what the copy costs
    beyond the net-overhead floor the step already pays, see below): with software tag matching
    (``FI_CXI_RX_MATCH_MODE=software`` on Slingshot's cxi provider) a message below the rendezvous threshold
    (an eager one) lands in one of the provider's host buffers and is copied into the GPU buffer NCCL posted:
    by GDRCopy (a CPU store through the GPU's BAR, ~0.1 us for a few KiB: nothing at this model's scale) when
    the run enabled it and the message is at most ``FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD`` (4 KiB by default),
    by cudaMemcpy otherwise (``recv_copy_us.<fabric>`` per message). With hardware matching the NIC writes
    the message straight into GPU memory and there is no copy.

    The evidence is two pairs of sweeps that change only that: CSCS Alps with FI_HMEM_CUDA_USE_GDRCOPY=1
    and =0 (boeschf/nccl-benchmark-on-alps-2025; software matching; 8 B to 1 KiB all_reduce at 2 to 512
    nodes 11 to 120 us slower without GDRCopy, about 6 us per tree hop, and no slower from 8 KiB, above the
    4 KiB GDRCopy threshold), and ALCF Polaris's setups (4) and (5) (argonne-lcf/alcf-nccl-tests; hardware
    against software matching, GDRCopy not set: 13 to 83 us slower at 2 to 256 nodes). Fitted; prior 0.
    """
    if cfg.rx_match != "software" or m.nnodes <= 1 or not m.on_fabric:
        return 0.0
    cost = calibration.fabric_recv_copy_us(m.fabric)
    if not cost:
        return 0.0
    size, messages = _network_messages(a, p, m, nbytes, nch, nsteps)
    if not messages:
        return 0.0
    wire = get_protocol(p).wire_bytes(size)
    threshold = calibration.get_fabric(m.fabric).rdzv_threshold_bytes
    if threshold and wire >= threshold:
        return 0.0   # a rendezvous: the data is fetched into the posted buffer, no copy (_rendezvous_us)
    if cfg.gdrcopy and wire <= cfg.safe_devmem_copy:
        return 0.0
    if a == "ring":
        # a ring step already pays at least the net overhead (NCCL's floor under every step of a ring across
        # nodes, x3 for Simple: the proxy's work on the step's message); the copy is more of the same
        # proxy's work on that message, so a step pays the larger of the two, not both. Measured: ALCF
        # Polaris's all_gather over 1,024 ranks costs 8 us a step with software matching and without
        # (setups (5) and (4): 8.02 and 8.18 ms at 16 KiB), while at 2 nodes, where the floor is low, the
        # copy shows (67 against 23 us for 7 steps)
        return messages * max(0.0, cost - _ring_step_floor_us(m, p))
    return messages * cost


def _ring_software_hidden_us(coll: Collective, p: str, m: Machine, nsteps: int, cfg: NcclConfig, ring_lat_us: float,
                             per_message_us: float, step_wire_us: float, plateau: float = 1.0) -> float:
    """How much of a ring's fitted software cost per step hides behind the step's own transfer.

    What a fabric's software costs a ring step beyond NCCL's own figures (the net overhead above NCCL's
    ``getNetOverhead``, the rendezvous, the receive copy: ``per_message_us`` is the last two, summed over the
    steps) is the proxy's work on the step's message, done while the NIC moves the previous one (NCCL keeps
    NCCL_STEPS = 8 slots in flight per connection). So a step costs the larger of that work and its own
    transfer time (``step_wire_us``), not their sum (``ring_lat_us``: the ring's latency before the plateau): at small sizes the work shows whole (the floor the
    small- and mid-size rows measure), at large sizes none of it. NCCL's own model adds its latencies to the
    transfer whatever the size; its own figures are kept whole here too, and NCCL's choice (made under
    :func:`sim.nccl.calibration.nccl_view`) does not see any of this.

    Measured: CSCS Alps (GH200, Slingshot) runs rings at 0.89-0.92 of its NICs from 512 MiB at 32 nodes
    (11.9 ms for 512 MiB over 128 ranks), where the per-step floor and rendezvous fitted on Polaris's small
    sizes, added whole over 254 steps, would make it 24 ms."""
    sw = per_message_us
    if calibration.fabric_net_overhead_us(m.fabric):   # the fitted floor's excess over NCCL's own
        with calibration.override({f"net_overhead.{calibration.get_fabric(m.fabric).name}": 0.0}):
            own = _latency(coll, "ring", p, m, nsteps, cfg)
        sw += plateau * max(0.0, ring_lat_us - own)   # as the latency took it
    if sw <= 0:
        return 0.0
    return nsteps * min(sw / nsteps, step_wire_us)


def _ring_step_floor_us(m: Machine, p: str) -> float:
    """What every step of a ring across nodes costs at least (tuning.cc: ``intraLat = max(intraLat,
    netOverhead)``, x3 for Simple): the net overhead, the proxy's work on the step's message."""
    return m.net_overhead_us * (3 if p == "Simple" else 1)


def nvls_runs(a: str, m: Machine, cfg: NcclConfig) -> tuple[int, int]:
    """(the NVLS channels NCCL runs, NVLS_NCHANNELS): ``transport/nvls.cc`` bounds them by NCCL_MIN/MAX_CTAS only, and
    from 2.28 NVLS across nodes takes at most the rings' channels too (``enqueue.cc``: ``nc = min(nvlsChannels,
    nChannels)``, which NCCL_MIN/MAX_NCHANNELS bound)."""
    full = nvls_channels(m)
    runs = cfg.nvls_channels(full)
    if a == "nvls" and m.nnodes > 1 and cfg.release.nvls_efficiency_model:
        runs = min(runs, cfg.channels(runtime_channels(m, "ring")))
    return runs, full


def _bus_bandwidth(coll: Collective, a: str, p: str, m: Machine, cfg: NcclConfig) -> tuple[float, int, dict]:
    graph = graph_for(m, a)
    # tuning.cc: busBw = graphs[a]->nChannels x bw, the channels NCCL's search found. NCCL_MIN/MAX_NCHANNELS
    # and NCCL_MIN/MAX_CTAS bound the channels it runs (connect.cc, after the search), not its estimate:
    # ``nch`` (what runs) bounds the kernels below, ``found`` is what NCCL's tuner counts
    found = graph.nchannels
    if a.startswith("nvls"):   # NVLS runs channels of its own: the share of them the run's bounds leave
        nch, full = nvls_runs(a, m, cfg)
    else:                      # the rings' and trees': the share of the search's channels that run
        nch, full = cfg.channels(found), found
    run_share = nch / full
    rel = cfg.release
    # the row of NCCL's per-architecture tables this release reads (before 2.25 a Blackwell GPU reads Hopper's)
    ppn, ci, col = m.ppn, (ARCHS.index("hopper") if rel.table_arch(m.arch) != m.arch else m.cc_index), m.node_column
    caps = {"ring_ll128": PER_CH_MAX_RING_LL128[ci][col], "tree_ll128": PER_CH_MAX_TREE_LL128[ci][col],
            "tree": PER_CH_MAX_TREE[ci][col]}
    if m.arch == "blackwell":
        caps.update({k: v[col] for k, v in rel.blackwell_caps.items()})
    bw = graph.bw_intra if (m.nnodes <= 2 or a.startswith("collnet")) else graph.bw_inter
    if a == "nvls":
        bw = min(graph.bw_intra, graph.bw_inter) if not coll.sharded else \
            min(graph.bw_intra * (ppn - 1) / ppn, graph.bw_inter * NET_SHARE_FACTOR)
    if a == "nvls_tree":
        bw = min(graph.bw_intra, graph.bw_inter if m.nnodes <= 2 else graph.bw_inter / 2)
    if a.startswith("nvls") and rel.nvls_efficiency_model:
        # 2.28+: busBw per channel = bwIntra x nvlsEfficiency x (nch-1)/nch, x2 for all_reduce (two
        # operations pipelined), x (ppn-1)/ppn otherwise; NVLSTree capped by perChMaxNVLSTreeBw
        intra = graph.bw_intra * NVLS_EFFICIENCY.get(m.arch or "", 0.0) * (graph.nchannels - 1) / graph.nchannels
        intra *= 2.0 if coll.full_reduction and not coll.rooted else (ppn - 1) / ppn
        inter = graph.bw_inter * (2 if m.nnodes <= 2 and a == "nvls_tree" else 1)
        cap = rel.nvls_tree_caps.get(m.arch, (math.inf,) * 3)[col] if a == "nvls_tree" else math.inf
        bw = min(intra, inter, cap)
    bus = found * bw
    links = found * bw * run_share
    row = ci if m.nnodes == 1 else int(m.cpu == "amd")
    ll_max = rel.ll_max_hopper[col] if row == 2 else LL_MAX_BW[row][col]
    if a in ("ring", "p2p") and p == "LL":
        # 2.18-2.20: 1/4 across nodes or for all_reduce/reduce, 1/3 otherwise; 2.21 on: 1/2
        quarter, third = RING_LL_BW_FACTORS_2_18
        share = (quarter if m.nnodes > 1 or coll.full_reduction else third) if rel.ring_ll_quarter else RING_LL_BW_FACTOR
        bus = min(ll_max, bus * share)
    if a == "ring" and p == "LL128":
        bus = min(bus * (rel.ring_ll128_one_gpu if ppn < 2 else LL128_BW_FACTOR), found * caps["ring_ll128"])
    detail: dict = {}
    if a == "tree" and NCCL_RULES[coll].allreduce_terms:
        bus = min(bus * LL128_BW_FACTOR, found * caps["tree"])
        # perChMaxTreeBw: what one channel's tree kernel moves at most, whatever the links (the engine
        # honours it too: sim.nccl.execution.kernel_cap_us)
        detail["kernel_cap_bus_GBps"] = nch * caps["tree"]      # a cap of the kernels that run
    if a == "tree" and p == "LL":
        bus = min(bus / TREE_LL_BW_DIVISOR, ll_max)
    if a == "tree" and p == "LL128":
        bus = min(bus * TREE_LL128_BW_FACTOR[0 if m.nnodes == 1 else 1], found * caps["tree_ll128"])
    if a == "tree" and tree_pattern(m) == "tree":
        # tuning.cc: "if (a == NCCL_ALGO_TREE && pattern == NCCL_TOPO_PATTERN_TREE) busBw *= .85" (NCCL's own
        # view of the simpler tree; not a kernel bound, so the engine does not honour it)
        bus *= TREE_PATTERN_FACTOR
        detail["tree_pattern"] = "tree"
    if a == "pat":
        bus *= rel.pat_bus_factor
    if a == "collnet_direct":
        if coll.sharded:
            bus = ppn * min(graph.bw_intra, graph.bw_inter * NET_SHARE_FACTOR)
        else:
            factor = ppn / found
            bus /= factor - (factor - 1) / 2
            if ci >= 2:
                bus *= COLLNET_DIRECT_SM90_FACTOR
            # NCCL's model of CollNetDirect's kernels: every GPU of the node scatters and gathers through
            # the channels at the search's intra-node speed (x0.85 on Hopper+); the engine honours it as a
            # bound (sim.nccl.execution.kernel_cap_us)
            detail["kernel_cap_bus_GBps"] = bus
    if run_share < 1:
        # NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS below the search's channels: the channels left move at most
        # their search speed each, whatever the links could carry (the engine's links assume channels
        # enough to fill them, so it honours this bound: sim.nccl.execution.kernel_cap_us)
        detail["kernel_cap_bus_GBps"] = min(detail.get("kernel_cap_bus_GBps", math.inf), links)
    return bus, nch, {"graph": graph, **detail}


def _latency(coll: Collective, a: str, p: str, m: Machine, nsteps: int, cfg: NcclConfig) -> float:
    # NCCL's per-hop latencies. On hardware presets they stand for the whole hop (NCCL measured them on
    # such machines); a textbook topology's own wire latency counts where it is larger.
    textbook = m.arch is None
    intra = 0.0
    if m.intra_class:
        intra = hop_latency_us(m.intra_class, a if a != "pat" else "ring", p)
        intra = max(intra, m.intra_wire_us) if textbook else intra
        if m.intra_class == "nvlink" and m.arch == "blackwell":
            # a Blackwell GPU's NVLink hop is slower than the table NCCL measured on earlier GPUs (nccl #1940:
            # an 8-byte all_reduce 3.0 us on 8 B200 against 2.3 on 8 H200); NCCL's tuner does not know it
            intra += calibration.value("blackwell_nvlink_hop_us")
    inter = 0.0
    if m.nnodes > 1:
        row = "tree" if m.ppn == 1 and (cfg.release.net_tree_row_one_gpu or a == "pat") else a
        inter = hop_latency_us(m.inter_class or "net", row, p)
        inter = max(inter, m.inter_wire_us) if textbook else inter
        inter += m.net_latency_us   # NCCL's graph.latencyInter (the net plugin's latency)
        if p == "Simple":
            inter += m.net_latency_us  # flush
    lat = base_latency_us(a, p)
    nodes, ppn, n = m.nnodes, m.ppn, m.nranks
    if a == "ring":
        if coll.rooted:
            hw = inter if nodes > 1 else intra
            if p == "Simple":
                hw = max(hop_latency_us((m.inter_class or "net") if nodes > 1 else (m.intra_class or "nvlink"), "tree", p), hw)
            return lat + nsteps * hw
        if nodes > 1:
            intra = max(intra, _ring_step_floor_us(m, p))
        # all_reduce's rings cross the network 2 nNodes times before 2.23, 2 (nNodes - 1) after
        per_pass = nodes if coll.passes > 1 and cfg.release.ring_ar_inter_steps_2n else nodes - 1
        inter_steps = 0 if nodes == 1 else coll.passes * per_pass
        return lat + (nsteps - inter_steps) * intra + inter_steps * inter
    lg = int(math.log2(nodes)) if nodes > 1 else 0
    if a == "tree":
        return lat + 2 * ((ppn - 1) * intra + lg * inter)
    if a == "collnet_direct":
        return lat + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
    if a == "collnet_chain":
        return lat + 2 * (ppn - 1) * intra + inter
    if a == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if a == "nvls_tree":
        return lat + intra + 2 * lg * inter
    if a == "p2p":
        # one message per peer: a hop inside the node; across it one network hop (the peers' messages fly
        # together) plus what the proxy thread spends on each remote peer, one after the other (posting and
        # completing its send/recv pair). Not the fabric's latency per peer: that made a 256-rank p5
        # all_to_all 16 ms of latency where the whole 32 MiB call took 1.7 ms (HP-P5-32-A2A).
        remote = n - ppn if nodes > 1 else 0
        per_peer = calibration.fabric_p2p_peer_us(m.fabric)
        return lat + intra + (inter + remote * per_peer if remote else 0.0)
    return 8.0 + lg * (inter / 3.5) + n * 2.8   # pat (2.27: a formula)


def rank_pairs(collective, nbytes: int, topo, algorithms, protocols=NCCL_PROTOCOLS) -> list[Terms]:
    """Every usable (algorithm, protocol) among those given, fastest first by NCCL's model. Ties keep
    NCCL's enum order (tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat; LL, LL128, Simple).

    Ranked under NCCL's own view of the network (:func:`sim.nccl.calibration.nccl_view`): the latency the net
    plugin reports, none of the fitted costs NCCL does not know of. The terms returned are that view's."""
    m = machine(topo)
    out = []
    with calibration.override(calibration.nccl_view(m.fabric if m.on_fabric else None)):
        for a in sorted((a for a in algorithms if a in NCCL_ALGORITHMS), key=NCCL_ALGORITHMS.index):
            for p in protocols:
                t = tuner_terms(collective, nbytes, topo, a, p, m)
                if t.alg_GBps > 0:
                    out.append(t)
    out.sort(key=lambda t: t.time_us)   # stable: ties keep enum order, as NCCL's strict "<" does
    return _plugin_first(collective, nbytes, m, out)


def _plugin_first(collective, nbytes: int, m: Machine, ranked: list[Terms]) -> list[Terms]:
    """``ranked`` with the tuner plugin's pick first, as NCCL takes the pair a plugin priced at 0. The plugin
    passes over pairs NCCL cannot run here (not in ``ranked``) to its next region, as the plugin skips pairs
    NCCL marked "ignore"."""
    cfg = nccl_config.current()
    if not cfg.tuner_plugin or not ranked:
        return ranked
    name = collective if isinstance(collective, str) else collective.name
    for pair in tuner_plugin.plugin_pairs(cfg.tuner_plugin, cfg.release.key(), name, nbytes, m):
        for i, t in enumerate(ranked):
            if (t.algorithm, t.protocol) == pair:
                chosen = replace(t, detail={**t.detail, "chosen_by": cfg.tuner_plugin})
                return [chosen] + ranked[:i] + ranked[i + 1:]
    return ranked


def tuner_result(coll, nbytes: int, topo, algorithm: str, proto):
    """The tuner's prediction for one pair as a :class:`~sim.engine.result.Result` (model ``"tuner"``)."""
    from ..engine.result import Result
    coll = get_collective(coll)
    p = get_protocol(proto).name
    t = tuner_terms(coll, nbytes, topo, algorithm, p)
    if t.alg_GBps <= 0:
        raise CollsimError(f"NCCL would not run {algorithm}/{p} for {coll.name} on {topo.name}: {t.detail['disabled']}")
    steps = _steps(coll.name, algorithm, topo)
    explain = {"selected_by": f"tuner (NCCL {nccl_config.current().version} model)", "latency_us": t.latency_us,
               "bandwidth_term_us": nbytes / (1000 * t.alg_GBps) if nbytes else 0.0,
               "nccl_busbw_GBps": t.bus_GBps, "nccl_algbw_GBps": t.alg_GBps, "nchannels": t.nchannels}
    g = t.detail.get("graph")
    if g is not None:
        explain["graph"] = f"{g.nchannels} channels x {g.bw_intra:g}/{g.bw_inter:g} GB/s (intra/inter)"
    for k in ("tree_correction", "ring_plateau", "rendezvous_us", "recv_copy_us"):
        if k in t.detail:
            explain[k] = t.detail[k]
    time = t.time_us
    if "loop_latency_us" in t.detail:   # nccl-tests' back-to-back calls overlap down a rooted chain
        time = t.detail["loop_latency_us"] + (nbytes / (1000 * t.alg_GBps) if nbytes else 0.0)
        explain.update(latency_us=t.detail["loop_latency_us"], single_call_us=t.time_us)
    return Result.of(coll, nbytes, topo.nranks, algorithm, p, time, steps, model="tuner", topology=topo.name,
                     nchannels=t.nchannels, pipeline=1, explain=explain)


def _steps(coll: str, algorithm: str, topo) -> int:
    n = topo.nranks
    if algorithm == "ring":
        return ring_steps(coll, n)
    from ..algorithms import build_program
    return build_program(algorithm, coll, n, topology=topo).steps
