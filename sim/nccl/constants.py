"""NCCL's own constants, in one place, each with the NCCL source it comes from (NCCL 2.27.7 unless said).

Nothing here is fitted: these are NCCL's numbers (``src/include/device.h``, ``comm.h``,
``src/graph/tuning.cc``, ``search.cc``, ``topo.h``), so a change of NCCL version changes this file only.
collsim's *fitted* constants (fabric efficiencies, launch overheads) are in :mod:`sim.nccl.calibration`;
the model's own engineering choices (e.g. the engine's op budget) stay with the code that makes them.

>>> BUFFER_BYTES["Simple"] // NCCL_STEPS          # one Simple step: 512 KiB
524288
>>> round(NVLINK_EFFICIENCY["hopper"], 3)         # NCCL credits an NVLink4 link with 20.6 of 25 GB/s
0.824
"""
from __future__ import annotations

from dataclasses import dataclass

# NCCL_MAX_NVLS_ARITY shapes the NVLS program itself, so it is defined with that algorithm (a lower layer)
from ..algorithms.nvls import NVLS_MAX_HEADS  # noqa: F401 (re-exported with NCCL's other numbers)
from ..collectives import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BROADCAST,
    REDUCE,
    REDUCE_SCATTER,
    Collective,
)

# ---- NCCL's wire formats (src/include/device.h) -------------------------------------------------------
NCCL_STEPS = 8                       # slots per connection buffer
LL_LINE_BYTES, LL_DATA_BYTES = 16, 8           # ncclLLFifoLine: data1 flag1 data2 flag2 (4 B each)
# the grain at which an LL rank passes on what it receives: every line carries its own flag, so a channel's
# 512 threads (NCCL_LL_MAX_NTHREADS) read, reduce and forward one line each per loop iteration (prims_ll.h),
# 512 x 8 B of data, not a whole 32 KiB step at a time
LL_FORWARD_BYTES = 512 * LL_DATA_BYTES
LL128_LINE_BYTES, LL128_DATA_BYTES = 128, 120  # 16 uint64 per line, 15 carry data, 1 the flag
# Default buffer per connection: LL 8 lines/thread x 512 threads x 8 steps x 16 B; LL128 120 elements x
# 640 threads x 8 steps x 8 B; Simple NCCL_BUFFSIZE = 4 MiB.
BUFFER_BYTES = {"LL": 8 * 512 * NCCL_STEPS * LL_LINE_BYTES, "LL128": 120 * 640 * NCCL_STEPS * 8, "Simple": 4 << 20}
CHUNK_STEPS = NCCL_STEPS // 2        # ring all_reduce/all_gather/reduce_scatter (Simple)
# Chunk rules: CollNet chains cap the chunk at 256 KiB (enqueue.cc). For small messages the model halves a
# pipelined algorithm's chunk while a channel holds fewer than depth x 8 chunks, down to 32 KiB: one rule
# for all, where NCCL has one per algorithm and release (2.18-2.19 halve a tree/Simple chunk against the
# tree depth, 2.20+ never; LL128 trees, CollNet and NVLS by their own counts; docs/nccl-model.md).
COLLNET_CHAIN_MAX_CHUNK_BYTES = 256 << 10
MIN_CHUNKS_PER_CHANNEL = 8
MIN_CHUNK_BYTES = 32 << 10
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}      # bytes per thread before NCCL adds channels (comm.h)

NCCL_PROTOCOLS = ("LL", "LL128", "Simple")
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}   # NCCL_LL/LL128/SIMPLE_MAX_NTHREADS (device.h)
# enqueue.cc topoGetAlgoInfo: on a small message NCCL drops channels, then halves the threads while they
# are a multiple of 128, not below 64 (rings and trees only)
THREAD_HALVING_MULTIPLE, MIN_THREADS = 128, 64
SMALL_MESSAGE_ALGORITHMS = ("ring", "tree")

# ---- NCCL's latency tables (src/graph/tuning.cc, NCCL 2.27.7), microseconds ---------------------------
# Index order of NCCL's enums: algorithms Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree (PAT has
# no table in 2.27: its latency is a formula); protocols LL, LL128, Simple. ``p2p`` is not a collective
# algorithm in NCCL but how it runs all_to_all (grouped send/recv); its rows are the ring's (one hop per
# peer message), see sim/algorithms/alltoall.py.
NCCL_ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat", "p2p")
BASE_LATENCY_US = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0), "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0), "pat": (8.0, 8.0, 8.0), "p2p": (6.6, 14.0, 8.4),
}
HW_LATENCY_US = {  # [link class][algorithm] -> (LL, LL128, Simple): latency of one hop
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0.0, 0.0, 3.7),
               "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0), "nvls_tree": (0.0, 0.0, 25.0),
               "pat": (0.0, 0.0, 4.0), "p2p": (0.6, 1.9, 3.4)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0.0, 0.0, 3.7),
             "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
             "pat": (0.0, 0.0, 4.0), "p2p": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0.0, 0.0, 31.0),
            "collnet_chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 14.0),
            "pat": (0.0, 0.0, 14.0), "p2p": (2.7, 4.0, 14.0)},
}



# ---- NCCL's per-collective rules (src/enqueue.cc, src/graph/tuning.cc) --------------------------------
@dataclass(frozen=True)
class NcclRules:
    """What NCCL does differently per collective. ``algorithms``: the ones it has for it (tuning.cc's
    algorithm loops and enqueue.cc's checks; all_to_all is not an NCCL collective but grouped send/recv,
    ``p2p`` here). ``allreduce_terms``: tuning.cc applies treeCorrectionFactor and the ring "plateau"
    latency factor only when ``coll == ncclFuncAllReduce``."""

    algorithms: tuple[str, ...]
    allreduce_terms: bool = False


NCCL_RULES: dict[Collective, NcclRules] = {
    ALL_REDUCE: NcclRules(("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree"), allreduce_terms=True),
    ALL_GATHER: NcclRules(("ring", "pat", "nvls", "collnet_direct")),
    REDUCE_SCATTER: NcclRules(("ring", "pat", "nvls", "collnet_direct")),
    BROADCAST: NcclRules(("ring",)),
    REDUCE: NcclRules(("ring",)),
    ALL_TO_ALL: NcclRules(("p2p",)),
}

# ---- NCCL 2.27.7 constants (tuning.cc, search.cc, topo.h) ---------------------------------------------
ARCHS = ("volta", "ampere", "hopper", "blackwell")
NVLINK_LINK_GBps = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}  # SM70/80/90/100_NVLINK_BW
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
PER_CH_MAX_RING_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (73.4,) * 3)
PER_CH_MAX_TREE_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (73.4, 73.4, 58.0))
PER_CH_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (77.4, 82.8, 72.0))
TREE_CORRECTION = {  # treeCorrectionFactor[proto][log2(nbytes / 64)], 64 B .. 256 MiB
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
# 2.29+: the same table grown to 24 sizes (512 MiB: 1.0 / 1.0 / .9), which ncclTopoGetAlgoTime also applies to
# NVLSTree all_reduce on Blackwell with x86 hosts (trees keep the first 23)
NVLS_TREE_CORRECTION = {p: v + ({"LL": 1.0, "LL128": 1.0, "Simple": 0.9}[p],) for p, v in TREE_CORRECTION.items()}
SPEEDS_INTRA = {"hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
                None: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)}
SPEEDS_INTER = {"hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
                "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                              3.0, 2.4, 1.2, 0.24, 0.12),
                None: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
                       0.24, 0.12)}
MAX_SEARCH_CHANNELS = 32          # MAXCHANNELS / 2: what one search may find before duplication
MAX_RUNTIME_CHANNELS = 32         # connect.cc ncclTopoPostset: duplicated channels stay within this cap
# connect.cc (sm90+, several nodes): a search channel faster than 45 GB/s becomes 4 compute channels
# (doubled once more) while there are fewer than 16
DUPLICATE_AGAIN_MIN_GBps, DUPLICATE_AGAIN_BELOW = 45.0, 16
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}   # getNetOverhead; other CPUs 1.0
X86_CPUS = ("intel", "amd")                    # NCCL_TOPO_CPU_ARCH_X86 (the presets' other CPU is "arm")
NVLS_CHUNK_BYTES = 128 << 10     # NCCL_NVLS_CHUNKSIZE default (transport/nvls.cc)
# enqueue.cc: NVLS halves its chunk to ``chunk`` bytes when the size is below ``factor`` x concurrent ops x
# chunk; (factor, chunk) in order. NVLSTree from NVLS_TREE_SMALL_CHUNK_NODES nodes starts at 64 KiB.
NVLS_CHUNK_STEPS = {"nvls": ((64, 65536), (8, 32768), (2, 16384)),
                    "nvls_tree": ((16, 131072), (4, 65536), (1, 32768))}
NVLS_TREE_SMALL_CHUNK_NODES, NVLS_TREE_SMALL_CHUNK_BYTES = 4, 65536
NVLS_CHANNELS = {"hopper": 16, "blackwell": 32, "blackwell_one_domain": 24}   # NVLS_NCHANNELS_SM90/SM100/SM100_NVL
NVLS_BUS_TO_ALG = 5.0 / 6.0       # 2.21-2.27: NVLS/NVLSTree algBw = busBw * 5/6

# ---- tuning.cc's model refinements (ncclTopoTuneModel, NCCL 2.27.7): factors on busBw and latency -------
RING_LL_BW_FACTOR = 0.5           # ring (and p2p) LL: busBw x 1/2, capped by llMaxBw
RING_LL_BW_FACTORS_2_18 = (0.25, 1 / 3)   # 2.18-2.20 ring LL: across nodes or all_reduce/reduce; otherwise
NVLS_TREE_RATIO_2_18 = 0.70       # 2.18 NVLSTree busBw -> algBw: .70 nNodes / (2 (nNodes - 1))
LL128_BW_FACTOR = 0.92            # ring LL128 and tree all_reduce: busBw x 0.92, capped per channel
TREE_LL_BW_DIVISOR = 3.8          # tree LL: busBw / 3.8, capped by llMaxBw
TREE_LL128_BW_FACTOR = (7 / 9, 120 / 128)   # tree LL128: one node, several nodes
TREE_PATTERN_FACTOR = 0.85        # a tree graph of the simple TREE pattern (not BALANCED_TREE): busBw x 0.85
PAT_BW_FACTOR = 0.75              # PAT: busBw x 0.75
COLLNET_DIRECT_SM90_FACTOR = 0.85  # CollNetDirect on sm90+: busBw x 0.85
NET_SHARE_FACTOR = 0.9            # NVLS all_gather/reduce_scatter and CollNetDirect: bwInter x 0.9
TREE_BUS_TO_ALG = 0.5             # trees and CollNet: algBw = busBw / 2
RING_PLATEAU_LATENCY = (1.9, 1.4)  # ring Simple all_reduce across nodes: latency x 1.9 on Volta, x 1.4 later
RING_PLATEAU_MIN_BYTES = 64       # ... once each rank's share per channel reaches 64 bytes
P2P_LL_THRESHOLD = 16384          # NCCL_P2P_LL_THRESHOLD: p2p sends of at most this many bytes use LL

# ---- link efficiencies NCCL's model credits (tuning.cc, topo.h) ---------------------------------------
# From NCCL's model (not fitted): NCCL credits an NVLink with SMxx_NVLINK_BW GB/s against a raw 25 GB/s
# per direction (NVLink2-4) or 50 GB/s (NVLink5); PCIe with lanes x GT/s x 0.75 / 8 against x 1/8 raw.
NVLINK_EFFICIENCY = {arch: bw / (50.0 if arch == "blackwell" else 25.0) for arch, bw in NVLINK_LINK_GBps.items()}
PCIE_EFFICIENCY = 0.75
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}   # tuning.cc nvlsEfficiency (2.28+)
