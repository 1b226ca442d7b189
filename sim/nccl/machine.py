"""What NCCL sees of a machine: its topology detection (:class:`Machine`) and topology search (:class:`Graph`).

NCCL reads the node (GPUs, NVLinks, NVSwitches, NICs, PCIe) into a graph and searches it for channels: how
many rings/trees/NVLS heads, at which speed each (``src/graph/topo.cc``, ``search.cc``). collsim reads the
same facts off a :class:`~sim.topology.Topology` (hardware presets' ``meta``, else the links) and emulates
the search with NCCL's speed lists (:mod:`sim.nccl.constants`). The tuner (:mod:`sim.nccl.tuner`) and the
plan (:mod:`sim.nccl.execution`) read only this view.

>>> from sim.presets import load_topology
>>> m = machine(load_topology("dgx-h100:nodes=2"))
>>> m.nnodes, m.ppn, m.nics, ring_graph(m).nchannels   # one 48 GB/s ring per 400G NIC
(2, 8, 8, 8)
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace

from ..errors import CollsimError
from . import calibration
from .constants import (
    ARCHS,
    DUPLICATE_AGAIN_BELOW,
    MAX_RUNTIME_CHANNELS,
    MAX_SEARCH_CHANNELS,
    NET_OVERHEAD_US,
    NVLS_CHANNELS,
    NVLS_MAX_HEADS,
    SPEEDS_INTER,
    SPEEDS_INTRA,
    DUPLICATE_AGAIN_MIN_GBps,
    NVLINK_LINK_GBps,
)


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
    fabric: str | None = None      # the scale-out network (sim.nccl.calibration.FABRICS); None off hardware presets
    gpus_per_process: int = 1      # GPUs one thread launches (nccl-tests -g N)
    nic_path: str | None = None    # GPU -> NIC (nvidia-smi: PIX | PXB | PHB | NODE | SYS); None: not known
    gpu_pcie_GBps: float = 0.0     # the GPU's PCIe x16 link in NCCL's units (width x GT/s / 80); 0: none drawn
    nvlink_full_mesh: bool = False  # every GPU pair of a node joined by its own NVLinks (hardware.nvlink_pair_GBps)

    @property
    def nic_path_GBps(self) -> float:
        """What one NIC gives a channel in NCCL's search: the NIC, or less where the GPU's PCIe link to it
        is slower (NCCL's paths take the slowest link: an 800G NIC behind a PCIe Gen5 x16 GPU link is a
        48 GB/s path, as is a 400G one)."""
        return min(self.nic_GBps, self.gpu_pcie_GBps) if self.gpu_pcie_GBps else self.nic_GBps

    @property
    def on_fabric(self) -> bool:
        """A hardware preset whose nodes meet over a scale-out network: where the fitted per-fabric software
        costs (latency, per-step overhead, rendezvous, receive copy) apply. Textbook topologies and nodes
        joined by NVLink or PCIe have none."""
        return bool(self.arch) and self.inter_class == "net"

    @property
    def net_latency_us(self) -> float:
        """NCCL's graph.latencyInter: the NIC plus the fabric's software latency (fitted, per fabric)."""
        extra = calibration.fabric_latency_us(self.fabric) if self.on_fabric else 0.0
        return self.nic_latency_us + extra

    @property
    def net_overhead_us(self) -> float:
        """What every step of a ring that crosses nodes costs at least (LL; Simple pays 3x): NCCL's
        ``getNetOverhead`` (1-2 us, tuned on InfiniBand: "inter-node rings still have to launch nsteps * net
        overhead", tuning.cc), or the fabric's own where its transport costs more per message (fitted per
        fabric, ``net_overhead.<fabric>``: Slingshot and EFA go through libfabric and the aws-ofi-nccl plugin)."""
        nccl = NET_OVERHEAD_US.get(self.cpu, 1.0)
        return max(nccl, calibration.fabric_net_overhead_us(self.fabric)) if self.on_fabric else nccl

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


MACHINES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # Topology -> Machine


def machine(topo) -> Machine:
    """Read a :class:`Machine` off a topology: hardware presets' ``meta``, else the links themselves.

    Cached per topology object in :data:`MACHINES` (topologies are immutable; the routes read here cost up
    to ~0.15 ms on large clusters, and selection and sweeps ask for the machine many times). The cache is
    a weak mapping beside the topology, not an attribute written into it."""
    cached = MACHINES.get(topo)
    if cached is None:
        cached = MACHINES[topo] = _read_machine(topo)
    return cached


def _read_machine(topo) -> Machine:
    hw = topo.hardware
    hosts = topo.hosts
    n, nnodes = topo.nranks, len(hosts)
    ppn = max(len(h) for h in hosts)
    arch = hw.gpu_arch
    intra_class, intra_wire, pair, gpu = None, 0.0, 0.0, 0.0
    if ppn > 1:
        a, b = hosts[0][0], hosts[0][1]
        intra_class, intra_wire = _route_class(topo, a, b)
        pair = topo.path_bandwidth_GBps(a, b)
        gpu_node = topo.nodes[topo.gpus[a]].name
        gpu = sum(l.bandwidth_GBps for l in topo.links if l.src == gpu_node and l.kind == intra_class)
        if intra_class == "nvlink" and hw.nvlink_links and hw.nvlink_GBps and arch in NVLINK_LINK_GBps:
            per_link = hw.nvlink_GBps / hw.nvlink_links
            scale = NVLINK_LINK_GBps[arch] / per_link  # NCCL counts an NVLink at its own speed, not the raw rate
            gpu, pair = gpu * scale, pair * scale
        elif intra_class == "pcie" and arch:
            gpu, pair = gpu * 0.75, pair * 0.75
    inter_class, inter_wire, nic, nics = None, 0.0, 0.0, 0
    if nnodes > 1:
        a, b = hosts[0][0], hosts[1][0]
        inter_class, inter_wire = _route_class(topo, a, b)
        if hw.nic_GBps:
            nic, nics = float(hw.nic_GBps), int(hw.nics_per_node or 1)
        else:  # a flat network: the GPU's own link is its NIC
            nic, nics = topo.path_bandwidth_GBps(a, b), 1
    return Machine(arch, n, nnodes, ppn, intra_class, inter_class, gpu, pair, nic, nics,
                   bool(hw.nvswitch), bool(topo.reducing_switches("nvls")), bool(topo.reducing_switches("sharp")),
                   # a textbook topology without the fact: multi-node NVLS allowed; a preset says it
                   bool(hw.nvls_sharp if hw.nvls_sharp is not None else not arch), hw.cpu or "intel",
                   float(hw.nic_latency_us or 0.0) if nnodes > 1 else 0.0,
                   intra_wire, inter_wire, (hw.fabric or ("ib" if arch else None)) if nnodes > 1 else None,
                   int(hw.gpus_per_process or 1), hw.nic_path if nnodes > 1 else None,
                   # topo.cc: a PCI link is width x GT/s / 80 GB/s (x16 Gen5: 48), 3/4 of the raw rate drawn
                   0.75 * float(hw.pcie_GBps) if hw.pcie_GBps and nnodes > 1 else 0.0,
                   bool(hw.nvlink_pair_GBps) and not hw.nvswitch)


def with_gpus_per_process(topo, gpus_per_process: int | None):
    """``topo`` run the way nccl-tests ``-g N`` runs: one thread launching ``gpus_per_process`` GPUs per
    call (the launch mode travels in ``hardware.gpus_per_process``, so every model sees it).

    >>> from sim.presets import load_topology
    >>> machine(with_gpus_per_process(load_topology("dgx-a100"), 8)).gpus_per_process
    8
    """
    from ..topology import Topology
    n = gpus_per_process
    if n is None or n == (topo.hardware.gpus_per_process or 1):
        return topo
    ppn = max(len(h) for h in topo.hosts)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= ppn:
        raise CollsimError(f"--gpus-per-process {n!r}: one process drives GPUs of its own node, so it is a whole "
                           f"number from 1 to {ppn} (the GPUs per node of {topo.name}), like nccl-tests' -g N")
    if ppn % n:   # nccl-tests starts the same -g N in every process: a node's GPUs must split into whole processes
        fits = [d for d in range(1, ppn + 1) if ppn % d == 0]
        raise CollsimError(f"--gpus-per-process {n}: the {ppn} GPUs of a node of {topo.name} do not split into processes "
                           f"of {n} (nccl-tests runs the same -g in every process): use one of {', '.join(map(str, fits))}")
    return Topology.build(topo.name, topo.nodes, topo.links, replace(topo.hardware, gpus_per_process=n))


# ---- topology search (search.cc, simplified) ---------------------------------------------------------
@dataclass(frozen=True)
class Graph:
    """One NCCL graph: ``nchannels`` channels of ``bw_intra``/``bw_inter`` GB/s each."""

    nchannels: int
    bw_intra: float
    bw_inter: float


def search_speeds(m: Machine, inter: bool) -> tuple[float, ...]:
    table = SPEEDS_INTER if inter else SPEEDS_INTRA
    return table[m.arch if m.arch in ("hopper", "blackwell") else None]


def fastest_speed(speeds, limit: float) -> float:
    """The fastest speed of NCCL's list not above ``limit`` (the slowest if none fits)."""
    for s in speeds:
        if s <= limit * (1 + 1e-9):
            return s
    return speeds[-1]


def duplicate_channels(m: Machine, nch: int, bw: float) -> tuple[int, float]:
    # ncclTopoDupChannels: fast channels are split in two, so more SMs drive the same links
    if bw < 25.0 or (m.cc_index >= 2 and bw < 50.0 and nch > 4):
        return nch, bw
    dup = min(2 * nch, 2 * MAX_SEARCH_CHANNELS)
    return dup, bw / math.ceil(dup / nch)


def ring_graph(m: Machine) -> Graph:
    """Rings: inside one node as many rings of the fastest speed as the GPU's links carry; across nodes
    as many as the NICs carry (a ring enters and leaves a node through a NIC), within the NVLink budget."""
    if m.nnodes == 1:
        s = fastest_speed(search_speeds(m, False), min(m.pair_GBps, m.gpu_GBps))
        nch = max(1, min(MAX_SEARCH_CHANNELS, int(m.gpu_GBps / s + 1e-9)))
    else:
        speeds = search_speeds(m, True)
        path = m.nic_path_GBps
        s = fastest_speed(speeds, path)
        nch = max(1, m.nics * int(path / s + 1e-9))
        if m.ppn > 1:
            if m.gpu_pcie_GBps:
                # the NICs behind one GPU's PCIe switch share its x16 link: the search spends that link's
                # bandwidth on their channels (several NICs per GPU add none beyond it)
                nch = min(nch, min(m.nics, m.ppn) * max(1, int(m.gpu_pcie_GBps / s + 1e-9)))
            while nch * s > m.gpu_GBps * (1 + 1e-9) and s > speeds[-1]:
                s = speeds[speeds.index(s) + 1]
        nch = min(nch, MAX_SEARCH_CHANNELS)
    nch, s = duplicate_channels(m, nch, s)
    return Graph(nch, s, s)


def tree_graph(m: Machine, max_channels: int = 2 * MAX_SEARCH_CHANNELS) -> Graph:
    """Trees (and CollNet): the ring's channels, then bwIntra raised up to twice bwInter where the
    node's links allow it (search.cc pass 2: "increase bwIntra for trees (2 nodes or collnet)")."""
    g = ring_graph(m)
    nch = min(g.nchannels, max_channels)
    if m.nnodes == 1 or m.ppn == 1:
        return Graph(nch, g.bw_intra, g.bw_inter)
    intra = fastest_speed(search_speeds(m, True), min(2 * g.bw_inter, m.gpu_GBps / nch))
    return Graph(nch, max(intra, g.bw_intra), g.bw_inter)


def tree_pattern(m: Machine) -> str:
    """The pattern NCCL's tree search ends with: ``"balanced_tree"`` (NCCL_TOPO_PATTERN_BALANCED_TREE, what it
    asks for first) or ``"tree"`` (NCCL_TOPO_PATTERN_TREE), which its tuner credits with 0.85 of the bandwidth.

    search.cc (2.18 to 2.29, ncclTopoCompute): a balanced tree enters a node through one NIC and leaves it
    through the same NIC from a second GPU, each counting half the NIC. With one GPU in the node the pattern
    is always TREE. On Hopper and later, a search that finds no perfect balanced tree at the current path
    type tries the simpler TREE pattern (each channel in and out through one GPU's own NIC) at the same path
    type before it allows longer paths; where every GPU has a NIC of its own (DGX H100/B200, AWS p5, GH200
    nodes) no two GPUs share a NIC at the nearest path type, so the TREE pattern is found first, and a
    balanced tree at a longer path type does not beat it (ncclTopoCompareGraphs keeps the first of equals).
    Where GPUs share their NICs (DGX A100: two GPUs and two NICs per PCIe switch), the balanced tree is
    found. Inside one node (no NIC after trimming) the balanced tree is found.

    >>> from sim.presets import load_topology
    >>> [tree_pattern(machine(load_topology(t))) for t in ("dgx-h100:nodes=4", "dgx-a100:nodes=4", "dgx-h100")]
    ['tree', 'balanced_tree', 'balanced_tree']
    """
    if m.ppn == 1:
        return "tree"
    if m.nnodes > 1 and m.cc_index >= 2 and m.nics >= m.ppn:
        return "tree"
    return "balanced_tree"


def nvls_graph(m: Machine) -> Graph:
    """NVLS: one channel (head) per GPU of the node, each at the speed the GPU's NVLinks give all heads;
    bwInter climbs to (at most) twice bwIntra inside a node, to the NIC speed across nodes."""
    nch = min(NVLS_MAX_HEADS, m.ppn)
    intra = fastest_speed(search_speeds(m, m.nnodes > 1), m.gpu_GBps / nch)
    if m.nnodes == 1:
        inter = fastest_speed(search_speeds(m, False), 2 * intra * (1 - 1e-9))
    else:
        inter = fastest_speed(search_speeds(m, True), m.nic_path_GBps)
    return Graph(nch, intra, inter)


def graph_for(m: Machine, algorithm: str) -> Graph:
    """The search graph NCCL's tuner reads for ``algorithm``: NVLS heads, trees (CollNetDirect at most 8
    channels), else rings. The one home of which graph (and so how many search channels) an algorithm gets."""
    if algorithm.startswith("nvls"):
        return nvls_graph(m)
    if algorithm in ("tree", "collnet_direct", "collnet_chain"):
        return tree_graph(m, 8 if algorithm == "collnet_direct" else 2 * MAX_SEARCH_CHANNELS)
    return ring_graph(m)


def runtime_channels(m: Machine, algorithm: str) -> int:
    """Channels NCCL runs ``algorithm`` on (``comm->nChannels`` for rings and trees), which is more than
    its search finds: ``ncclTopoPostset`` (``src/graph/connect.cc``) duplicates every ring and tree
    (``nChannels = min(MAXCHANNELS, 2 * nChannels)``), and on Hopper and later across nodes, with fast
    intra-node rings (bwIntra > 45 GB/s), doubles again up to 16. That count is what ``NCCL_DEBUG=INFO``
    prints as "coll channels" (``--explain`` says it); the tuner's bandwidth is the search's (the
    duplicates share the same links). NVLS runs its own channels (:func:`nvls_channels`).

    >>> from sim.presets import load_topology
    >>> runtime_channels(machine(load_topology("dgx-h100")), "ring"), ring_graph(machine(load_topology("dgx-h100"))).nchannels
    (24, 12)
    """
    if algorithm.startswith("nvls"):
        return nvls_channels(m)
    runs = min(MAX_RUNTIME_CHANNELS, 2 * graph_for(m, algorithm).nchannels)
    fast = ring_graph(m).bw_intra > DUPLICATE_AGAIN_MIN_GBps
    if m.arch in ("hopper", "blackwell") and m.nnodes > 1 and fast and runs < DUPLICATE_AGAIN_BELOW:
        runs = min(MAX_RUNTIME_CHANNELS, 2 * runs)            # "4 compute channels per search channel" on sm90+
    return runs


def nvls_channels(m: Machine) -> int:
    """Channels NCCL's NVLS kernels run (``NVLS_NCHANNELS``, transport/nvls.cc): 16 on Hopper; on Blackwell
    24 inside one NVLink domain, 32 across domains."""
    if m.arch == "blackwell":
        return NVLS_CHANNELS["blackwell" if m.nnodes > 1 else "blackwell_one_domain"]
    return NVLS_CHANNELS["hopper"]
