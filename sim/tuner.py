"""NCCL's tuner as a closed form: (latency, bandwidth) per (algorithm, protocol), time = lat + S / bw.

This is NCCL 2.27.7's ``ncclTopoTuneModel`` + ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``) fed by a
small emulation of its topology search (``search.cc``: channels and per-channel speeds picked from NCCL's
speed lists). It predicts what NCCL *thinks* each pair costs, which is how NCCL chooses: the pair with
the smallest predicted time wins (:func:`rank_pairs`). The discrete-event engine then predicts what the
chosen pair really costs (contention, pipelining, the topology's links); ``docs/nccl-model.md`` says
where and why the two differ.

Units: bandwidths in GB/s (1e9 B/s), latencies in us, sizes in bytes.

>>> from sim.presets import load_topology
>>> t = tuner_terms("all_reduce", 1 << 30, load_topology("dgx-h100"), "ring", "Simple")
>>> t.nchannels, t.bus_GBps, round(t.latency_us, 1)   # 12 rings x 30 GB/s; 8.4 + 14 hops x 3.4 + 3.0 us launch
(12, 360.0, 59.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import calibration
from .analytic import ring_steps
from .collectives import get_collective
from .errors import CollsimError
from .protocols import NCCL_ALGORITHMS, NCCL_PROTOCOLS, base_latency_us, get_protocol, hop_latency_us

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
SPEEDS_INTRA = {"hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
                None: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)}
SPEEDS_INTER = {"hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
                "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                              3.0, 2.4, 1.2, 0.24, 0.12),
                None: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
                       0.24, 0.12)}
MAX_SEARCH_CHANNELS = 32          # MAXCHANNELS / 2: what one search may find before duplication
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}   # getNetOverhead; other CPUs 1.0
NVLS_BUS_TO_ALG = 5.0 / 6.0       # 2.21-2.27: NVLS/NVLSTree algBw = busBw * 5/6
P2P_LL_THRESHOLD = 16384          # NCCL_P2P_LL_THRESHOLD: p2p sends of at most this many bytes use LL
# Global calibration (hardware presets only; fitted on the public cases, see sim/calibration.py and
# docs/nccl-model.md): the per-call launch overhead, the per-GPU cost of one thread launching several GPUs
# (nccl-tests -g N) and each fabric's software latency per network hop (net plugin, proxy thread), which
# NCCL counts in graph.latencyInter. The names below are the in-sample values, kept for reference; the
# model reads sim.calibration.VALUES, which --cross-validate refits per fold.
LAUNCH_OVERHEAD_US = calibration.DEFAULTS["launch_overhead_us"]
NET_SOFTWARE_LATENCY_US = calibration.DEFAULTS["latency.slingshot"]


# ---- the machine as NCCL sees it ---------------------------------------------------------------------
@dataclass(frozen=True)
class Machine:
    """What NCCL's topology detection would report, in NCCL's units (GB/s, us).

    ``gpu_GBps``: a GPU's total intra-node bandwidth (NVLinks x NCCL's per-link speed, or PCIe at 3/4 of
    raw); ``pair_GBps``: the best GPU-to-GPU path inside a node; ``nic_GBps``: one NIC (Gb/s / 8);
    ``intra_wire_us``/``inter_wire_us``: the topology's own GPU-to-GPU route latency inside / across nodes.
    """

    arch: str | None
    nranks: int
    nnodes: int
    ppn: int
    intra_class: str | None       # nvlink | pcie | None (one GPU per node)
    inter_class: str | None       # link class between nodes: net | pcie | nvlink
    gpu_GBps: float
    pair_GBps: float
    nic_GBps: float
    nics: int
    nvswitch: bool
    nvls: bool
    sharp: bool
    nvls_sharp: bool              # multi-node NVLS (NVLS + IB SHARP) enabled: preset nvls_sharp=1
    cpu: str
    nic_latency_us: float
    intra_wire_us: float
    inter_wire_us: float
    fabric: str | None = None      # the scale-out network (sim.calibration.FABRICS); None off hardware presets
    gpus_per_process: int = 1      # GPUs one thread launches (nccl-tests -g N)

    @property
    def net_latency_us(self) -> float:
        """NCCL's graph.latencyInter: the NIC plus the fabric's software latency (fitted, per fabric)."""
        extra = calibration.fabric_latency_us(self.fabric) if self.arch and self.inter_class == "net" else 0.0
        return self.nic_latency_us + extra

    @property
    def call_overhead_us(self) -> float:
        """What one nccl-tests call costs beyond NCCL's latency: launch, and one more enqueue and launch
        per further GPU the same thread drives (``-g N``). Hardware presets only."""
        if self.arch is None:
            return 0.0
        return calibration.value("launch_overhead_us") + (self.gpus_per_process - 1) * calibration.value("per_gpu_launch_us")

    @property
    def cc_index(self) -> int:
        """Row of NCCL's per-architecture tables (unknown hardware uses Ampere's)."""
        return ARCHS.index(self.arch) if self.arch in ARCHS else 1

    @property
    def node_column(self) -> int:
        """NCCL's ``index2``: 0 one node, 1 two nodes, 2 more."""
        return min(self.nnodes, 3) - 1


def _route_class(topo, a: int, b: int) -> tuple[str, float]:
    kinds = {topo.links[i].kind for i in topo.route(a, b)}
    cls = "net" if "net" in kinds else "pcie" if "pcie" in kinds else "nvlink"
    return cls, topo.path_latency_us(a, b)


def machine(topo) -> Machine:
    """Read a :class:`Machine` off a topology: hardware presets' ``meta``, else the links themselves.

    Cached on the topology object (topologies are immutable; the routes read here cost up to ~0.15 ms
    on large clusters, and selection and sweeps ask for the machine many times)."""
    cached = topo.__dict__.get("_nccl_machine")
    if cached is None:
        cached = topo.__dict__["_nccl_machine"] = _read_machine(topo)
    return cached


def _read_machine(topo) -> Machine:
    meta = topo.meta
    hosts = topo.hosts
    n, nnodes = topo.nranks, len(hosts)
    ppn = max(len(h) for h in hosts)
    arch = meta.get("gpu_arch")
    intra_class, intra_wire, pair, gpu = None, 0.0, 0.0, 0.0
    if ppn > 1:
        a, b = hosts[0][0], hosts[0][1]
        intra_class, intra_wire = _route_class(topo, a, b)
        pair = topo.path_bandwidth_GBps(a, b)
        gpu_node = topo.nodes[topo.gpus[a]].name
        gpu = sum(l.bandwidth_GBps for l in topo.links if l.src == gpu_node and l.kind == intra_class)
        if intra_class == "nvlink" and meta.get("nvlink_links") and arch in NVLINK_LINK_GBps:
            per_link = meta["nvlink_GBps"] / meta["nvlink_links"]
            scale = NVLINK_LINK_GBps[arch] / per_link  # NCCL counts an NVLink at its own speed, not the raw rate
            gpu, pair = gpu * scale, pair * scale
        elif intra_class == "pcie" and arch:
            gpu, pair = gpu * 0.75, pair * 0.75
    inter_class, inter_wire, nic, nics = None, 0.0, 0.0, 0
    if nnodes > 1:
        a, b = hosts[0][0], hosts[1][0]
        inter_class, inter_wire = _route_class(topo, a, b)
        if meta.get("nic_GBps"):
            nic, nics = float(meta["nic_GBps"]), int(meta.get("nics_per_node") or 1)
        else:  # a flat network: the GPU's own link is its NIC
            nic, nics = topo.path_bandwidth_GBps(a, b), 1
    return Machine(arch, n, nnodes, ppn, intra_class, inter_class, gpu, pair, nic, nics,
                   bool(meta.get("nvswitch")), bool(topo.reducing_switches("nvls")), bool(topo.reducing_switches("sharp")),
                   bool(meta.get("nvls_sharp", not meta.get("gpu_arch"))), str(meta.get("cpu", "intel")),
                   float(meta.get("nic_latency_us", 0.0)) if nnodes > 1 else 0.0,
                   intra_wire, inter_wire, meta.get("fabric", "ib" if arch else None) if nnodes > 1 else None,
                   int(meta.get("gpus_per_process", 1)))


def with_gpus_per_process(topo, gpus_per_process: int | None):
    """``topo`` run the way nccl-tests ``-g N`` runs: one thread launching ``gpus_per_process`` GPUs per
    call (the launch mode travels in ``meta['gpus_per_process']``, so every model sees it).

    >>> from sim.presets import load_topology
    >>> machine(with_gpus_per_process(load_topology("dgx-a100"), 8)).gpus_per_process
    8
    """
    from .topology import Topology
    n = gpus_per_process
    if n is None or n == topo.meta.get("gpus_per_process", 1):
        return topo
    ppn = max(len(h) for h in topo.hosts)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= ppn:
        raise CollsimError(f"--gpus-per-process {n!r}: one process drives GPUs of its own node, so it is a whole "
                           f"number from 1 to {ppn} (the GPUs per node of {topo.name}), like nccl-tests' -g N")
    return Topology.build(topo.name, topo.nodes, topo.links, {**topo.meta, "gpus_per_process": n})


# ---- topology search (search.cc, simplified) ---------------------------------------------------------
@dataclass(frozen=True)
class Graph:
    """One NCCL graph: ``nchannels`` channels of ``bw_intra``/``bw_inter`` GB/s each."""

    nchannels: int
    bw_intra: float
    bw_inter: float


def _speeds(m: Machine, inter: bool) -> tuple[float, ...]:
    table = SPEEDS_INTER if inter else SPEEDS_INTRA
    return table.get(m.arch if m.arch in ("hopper", "blackwell") else None)


def _fastest(speeds, limit: float) -> float:
    """The fastest speed of NCCL's list not above ``limit`` (the slowest if none fits)."""
    for s in speeds:
        if s <= limit * (1 + 1e-9):
            return s
    return speeds[-1]


def _dup(m: Machine, nch: int, bw: float) -> tuple[int, float]:
    # ncclTopoDupChannels: fast channels are split in two, so more SMs drive the same links
    if bw < 25.0 or (m.cc_index >= 2 and bw < 50.0 and nch > 4):
        return nch, bw
    dup = min(2 * nch, 2 * MAX_SEARCH_CHANNELS)
    return dup, bw / math.ceil(dup / nch)


def ring_graph(m: Machine) -> Graph:
    """Rings: inside one node as many rings of the fastest speed as the GPU's links carry; across nodes
    as many as the NICs carry (a ring enters and leaves a node through a NIC), within the NVLink budget."""
    if m.nnodes == 1:
        s = _fastest(_speeds(m, False), min(m.pair_GBps, m.gpu_GBps))
        nch = max(1, min(MAX_SEARCH_CHANNELS, int(m.gpu_GBps / s + 1e-9)))
    else:
        speeds = _speeds(m, True)
        s = _fastest(speeds, m.nic_GBps)
        nch = max(1, m.nics * int(m.nic_GBps / s + 1e-9))
        if m.ppn > 1:
            while nch * s > m.gpu_GBps * (1 + 1e-9) and s > speeds[-1]:
                s = speeds[speeds.index(s) + 1]
        nch = min(nch, MAX_SEARCH_CHANNELS)
    nch, s = _dup(m, nch, s)
    return Graph(nch, s, s)


def tree_graph(m: Machine, max_channels: int = 2 * MAX_SEARCH_CHANNELS) -> Graph:
    """Trees (and CollNet): the ring's channels, then bwIntra raised up to twice bwInter where the
    node's links allow it (search.cc pass 2: "increase bwIntra for trees (2 nodes or collnet)")."""
    g = ring_graph(m)
    nch = min(g.nchannels, max_channels)
    if m.nnodes == 1 or m.ppn == 1:
        return Graph(nch, g.bw_intra, g.bw_inter)
    intra = _fastest(_speeds(m, True), min(2 * g.bw_inter, m.gpu_GBps / nch))
    return Graph(nch, max(intra, g.bw_intra), g.bw_inter)


def nvls_graph(m: Machine) -> Graph:
    """NVLS: one channel (head) per GPU of the node, each at the speed the GPU's NVLinks give all heads;
    bwInter climbs to (at most) twice bwIntra inside a node, to the NIC speed across nodes."""
    nch = min(32, m.ppn)
    intra = _fastest(_speeds(m, m.nnodes > 1), m.gpu_GBps / nch)
    if m.nnodes == 1:
        inter = _fastest(_speeds(m, False), 2 * intra * (1 - 1e-9))
    else:
        inter = _fastest(_speeds(m, True), m.nic_GBps)
    return Graph(nch, intra, inter)


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


def _disabled(a: str, p: str, coll: str, m: Machine) -> str | None:
    """Why NCCL would not use (a, p) here, or None."""
    if coll in ("broadcast", "reduce") and a != "ring":
        return "NCCL runs broadcast/reduce with rings only"
    if coll in ("all_gather", "reduce_scatter") and a not in ("ring", "pat", "nvls", "collnet_direct"):
        return f"NCCL has no {a} {coll}"
    if (coll == "all_to_all") != (a == "p2p"):
        return ("NCCL runs all_to_all as grouped point-to-point sends (p2p)" if coll == "all_to_all"
                else "p2p is how NCCL runs all_to_all only")
    if a == "p2p" and p == "LL128":
        return "NCCL's point-to-point sends use LL (small) or Simple"
    if coll == "all_reduce" and a == "pat":
        return "PAT serves all_gather/reduce_scatter only"
    if a in ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat") and p != "Simple":
        return f"{a} runs the Simple protocol only"
    if a in ("nvls", "nvls_tree") and (not m.nvls or m.cc_index < 2):
        return "NVLS needs an NVLink SHARP switch (Hopper or later)"
    if a == "nvls_tree" and m.nnodes == 1:
        return "NCCL disables NVLSTree on a single node"
    if a == "nvls" and m.nnodes > 1 and not m.sharp:
        return "multi-node NVLS needs CollNet (IB SHARP)"
    if a == "nvls" and m.nnodes > 1 and not m.nvls_sharp:
        return "multi-node NVLS (NVLS + IB SHARP) is off: it also needs NVLS buffer registration and a multicast-capable SHARP plugin; enable it with nvls_sharp=1"
    if a.startswith("collnet") and (not m.sharp or m.nnodes == 1):
        return "CollNet needs IB SHARP between nodes"
    if a == "collnet_direct" and (not m.nvswitch or m.ppn > 8):
        return "CollNetDirect needs an NVSwitch and at most 8 GPUs per node"
    if a == "pat" and m.ppn != 1:
        return "PAT needs one GPU per node"
    if p == "LL128" and m.ppn > 1 and m.intra_class != "nvlink":
        return "LL128 is enabled only over NVLink inside a node"
    return None


def tuner_terms(collective, nbytes: int, topo, algorithm: str, protocol: str, m: Machine | None = None) -> Terms:
    """NCCL's (latency, bandwidth, time) for one pair; ``alg_GBps == 0`` when NCCL would not use it."""
    coll = get_collective(collective).name
    p = get_protocol(protocol).name
    if p not in NCCL_PROTOCOLS:
        raise CollsimError(f"the tuner models NCCL's protocols ({', '.join(NCCL_PROTOCOLS)}), not {p!r}")
    if algorithm not in NCCL_ALGORITHMS:
        raise CollsimError(f"the tuner models NCCL's algorithms ({', '.join(NCCL_ALGORITHMS)}), not {algorithm!r}")
    m = m or machine(topo)
    why = _disabled(algorithm, p, coll, m)
    if algorithm == "p2p" and not why and (p == "LL") != (nbytes / m.nranks <= P2P_LL_THRESHOLD):
        why = f"NCCL's p2p uses LL up to {P2P_LL_THRESHOLD} B per peer (NCCL_P2P_LL_THRESHOLD), Simple above"
    if why:
        return Terms(algorithm, p, 0, 0.0, 0.0, math.inf, math.inf, {"disabled": why})
    bus, nch, detail = _bus_bandwidth(coll, algorithm, p, m)
    n = m.nranks
    nsteps = ring_steps(coll, n) if coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") else n
    alg = bus
    if not (algorithm != "ring" and coll in ("all_gather", "reduce_scatter")):
        alg = bus * (n / nsteps if algorithm in ("ring", "p2p") else NVLS_BUS_TO_ALG if algorithm.startswith("nvls") else 0.5)
    lat = _latency(coll, algorithm, p, m, nsteps)
    bw = alg
    log_size = int(math.log2(nbytes >> 6)) if nbytes >> 6 else -1
    if algorithm == "tree" and coll == "all_reduce" and 0 <= log_size < len(TREE_CORRECTION[p]):
        bw *= TREE_CORRECTION[p][log_size]
        detail["tree_correction"] = TREE_CORRECTION[p][log_size]
    if algorithm == "ring" and p == "Simple" and m.nnodes > 1 and coll == "all_reduce" and nbytes / (nch * n) >= 64:
        lat *= 1.9 if m.cc_index == 0 else 1.4   # "plateau effect of ring"
        detail["ring_plateau"] = True
    lat += m.call_overhead_us
    time = lat + nbytes / (1000 * bw) if bw > 0 else math.inf
    return Terms(algorithm, p, nch, bus, alg, lat, time, detail)


def _bus_bandwidth(coll: str, a: str, p: str, m: Machine) -> tuple[float, int, dict]:
    graph = (nvls_graph(m) if a.startswith("nvls") else
             tree_graph(m, 8 if a == "collnet_direct" else 2 * MAX_SEARCH_CHANNELS) if a in ("tree", "collnet_direct", "collnet_chain")
             else ring_graph(m))
    nch, ppn, ci, col = graph.nchannels, m.ppn, m.cc_index, m.node_column
    bw = graph.bw_intra if (m.nnodes <= 2 or a.startswith("collnet")) else graph.bw_inter
    if a == "nvls":
        bw = min(graph.bw_intra, graph.bw_inter) if coll == "all_reduce" else \
            min(graph.bw_intra * (ppn - 1) / ppn, graph.bw_inter * 0.9)
    if a == "nvls_tree":
        bw = min(graph.bw_intra, graph.bw_inter if m.nnodes <= 2 else graph.bw_inter / 2)
    bus = nch * bw
    ll_max = LL_MAX_BW[ci if m.nnodes == 1 else int(m.cpu == "amd")][col]
    if a in ("ring", "p2p") and p == "LL":
        bus = min(ll_max, bus * 0.5)
    if a == "ring" and p == "LL128":
        bus = min(bus * 0.92, nch * PER_CH_MAX_RING_LL128[ci][col])
    if a == "tree" and coll == "all_reduce":
        bus = min(bus * 0.92, nch * PER_CH_MAX_TREE[ci][col])
    if a == "tree" and p == "LL":
        bus = min(bus / 3.8, ll_max)
    if a == "tree" and p == "LL128":
        bus = min(bus * (7 / 9 if m.nnodes == 1 else 120 / 128), nch * PER_CH_MAX_TREE_LL128[ci][col])
    if a == "pat":
        bus *= 0.75
    if a == "collnet_direct":
        if coll in ("all_gather", "reduce_scatter"):
            bus = ppn * min(graph.bw_intra, graph.bw_inter * 0.9)
        else:
            factor = ppn / nch
            bus /= factor - (factor - 1) / 2
            if ci >= 2:
                bus *= 0.85
    return bus, nch, {"graph": graph}


def _latency(coll: str, a: str, p: str, m: Machine, nsteps: int) -> float:
    # NCCL's per-hop latencies. On hardware presets they stand for the whole hop (NCCL measured them on
    # such machines); a textbook topology's own wire latency counts where it is larger.
    textbook = m.arch is None
    intra = 0.0
    if m.intra_class:
        intra = hop_latency_us(m.intra_class, a if a != "pat" else "ring", p)
        intra = max(intra, m.intra_wire_us) if textbook else intra
    inter = 0.0
    if m.nnodes > 1:
        row = "tree" if m.ppn == 1 else a
        inter = hop_latency_us(m.inter_class, row, p)
        inter = max(inter, m.inter_wire_us) if textbook else inter
        inter += m.net_latency_us   # NCCL's graph.latencyInter (the net plugin's latency)
        if p == "Simple":
            inter += m.net_latency_us  # flush
    lat = base_latency_us(a, p)
    nodes, ppn, n = m.nnodes, m.ppn, m.nranks
    if a == "ring":
        if coll in ("broadcast", "reduce"):
            hw = inter if nodes > 1 else intra
            if p == "Simple":
                hw = max(hop_latency_us(m.inter_class if nodes > 1 else (m.intra_class or "nvlink"), "tree", p), hw)
            return lat + nsteps * hw
        if nodes > 1:
            intra = max(intra, NET_OVERHEAD_US.get(m.cpu, 1.0) * (3 if p == "Simple" else 1))
        inter_steps = 0 if nodes == 1 else 2 * (nodes - 1) if coll == "all_reduce" else nodes - 1
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
    if a == "p2p":   # one message per peer: a hop inside the node; across it one per remote peer (proxy progress)
        remote = n - ppn if nodes > 1 else 0
        per_peer = calibration.value("p2p_peer_latency_us") + (calibration.fabric_latency_us(m.fabric) if m.arch else 0.0)
        return lat + intra + (inter + remote * per_peer if remote else 0.0)
    return 8.0 + lg * (inter / 3.5) + n * 2.8   # pat (2.27: a formula)


def rank_pairs(collective, nbytes: int, topo, algorithms, protocols=NCCL_PROTOCOLS) -> list[Terms]:
    """Every usable (algorithm, protocol) among those given, fastest first by NCCL's model. Ties keep
    NCCL's enum order (tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat; LL, LL128, Simple)."""
    m = machine(topo)
    out = []
    for a in sorted((a for a in algorithms if a in NCCL_ALGORITHMS), key=NCCL_ALGORITHMS.index):
        for p in protocols:
            t = tuner_terms(collective, nbytes, topo, a, p, m)
            if t.alg_GBps > 0:
                out.append(t)
    out.sort(key=lambda t: t.time_us)   # stable: ties keep enum order, as NCCL's strict "<" does
    return out


def tuner_result(coll, nbytes: int, topo, algorithm: str, proto):
    """The tuner's prediction for one pair as a :class:`~sim.result.Result` (model ``"tuner"``)."""
    from . import analytic
    from .result import Result
    coll = get_collective(coll)
    p = get_protocol(proto).name
    t = tuner_terms(coll, nbytes, topo, algorithm, p)
    if t.alg_GBps <= 0:
        raise CollsimError(f"NCCL would not run {algorithm}/{p} for {coll.name} on {topo.name}: {t.detail['disabled']}")
    steps = _steps(coll.name, algorithm, topo)
    explain = {"selected_by": "tuner (NCCL 2.27 model)", "latency_us": t.latency_us,
               "bandwidth_term_us": nbytes / (1000 * t.alg_GBps) if nbytes else 0.0,
               "nccl_busbw_GBps": t.bus_GBps, "nccl_algbw_GBps": t.alg_GBps, "nchannels": t.nchannels}
    g = t.detail.get("graph")
    if g is not None:
        explain["graph"] = f"{g.nchannels} channels x {g.bw_intra:g}/{g.bw_inter:g} GB/s (intra/inter)"
    for k in ("tree_correction", "ring_plateau"):
        if k in t.detail:
            explain[k] = t.detail[k]
    return Result(coll.name, nbytes, topo.nranks, algorithm, p, t.time_us, analytic.algbw_GBps(nbytes, t.time_us),
                  analytic.busbw_GBps(coll.name, topo.nranks, nbytes, t.time_us), steps, "tuner", topo.name,
                  t.nchannels, 1, explain=explain)


def _steps(coll: str, algorithm: str, topo) -> int:
    n = topo.nranks
    if algorithm == "ring":
        return ring_steps(coll, n)
    from .algorithms import build_program
    return build_program(algorithm, coll, n, topology=topo).steps
