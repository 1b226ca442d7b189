"""Hardware presets: DGX/HGX servers, the GB200 NVL72 rack, PCIe boxes, and rail-optimised clusters of them.

Every number is a public hardware fact (NVLink generation and link count, PCIe generation, NIC speed)
named with its source in the preset's docstring; nothing is fitted to a benchmark. The facts go into
``topology.meta`` (keys below) for the NCCL-style model; the links carry the same numbers.

Model of one node (a *host*: GPUs that share NVLink):

* NVSwitch systems: one ``nvswitch`` node per host; every GPU has one link up to it and one down, each
  at the GPU's full NVLink bandwidth per direction (links x per-link GB/s), latency 0.35 us per hop
  (so 0.7 us GPU to GPU, close to the 0.6 us NVLink per-hop latency in NCCL's own tables; a modelling
  choice, not a measurement). ``nvls=1`` makes it an NVLink SHARP switch (``reduce="nvls"``).
* Multi-node (``nodes >= 2``): NIC k and the GPUs that use it (GPU i uses NIC ``i * nics // gpus``)
  share PCIe switch k, and the switches hang off the host CPU (so every GPU reaches every NIC). One
  switch per NIC makes each GPU's own NIC its unique nearest one, which is NCCL's GPU/NIC affinity;
  the real DGX boards put two GPU/NIC pairs on one switch, which changes nothing while every GPU has
  its own NIC. NIC k of every host plugs into leaf switch k (rail k) of its scalable unit
  (``nodes_per_leaf`` hosts: 20 for DGX A100, 32 for H100-class SuperPODs), leaves into the spine. The
  spine layer is drawn as one aggregated switch whose links carry the sum of the real spine cables
  (``oversubscription`` divides them): what ideal ECMP/adaptive routing gives; a single flow is still
  capped by its NIC.
  ``sharp=1`` makes leaves and spine SHARP switches (``reduce="sharp"``).
* Single node (``nodes=1``): only GPUs and NVLink (no NIC carries collective traffic inside a node),
  so the topology is symmetric under GPU i -> i+1 and the engine can use its fast path.

Latencies (modelling estimates, not measurements): PCIe hop 0.5 us (GPU <-> PCIe switch, switch <->
CPU), PCIe switch <-> NIC 0.25 us, NIC <-> leaf ``nic_latency_us`` = 0.6 us (ConnectX product briefs
quote "sub 0.6 usec" latency), leaf <-> spine 0.2 us (one more switch traversal and cable). PCIe
bandwidth is the raw x16 rate per direction: gen3 16, gen4 32, gen5 64, gen6 128 GB/s (8/16/32/64 GT/s x 16 lanes / 8).

``topology.meta`` keys (the NCCL model relies on them): ``gpu_arch`` (volta|ampere|hopper|blackwell),
``gpu``, ``nvlink_GBps`` (per GPU per direction, raw), ``nvlink_links``, ``intra`` (nvlink|pcie),
``nvswitch``, ``pcie_gen``, ``p2p``, ``nodes``, ``gpus_per_node``, ``nics_per_node``, ``nic_GBps`` (per NIC
per direction = nic_gbps/8), ``nic_gbps``, ``sharp``, ``nvls``, ``cpu`` (intel|amd|arm), ``nic_latency_us``.

>>> from sim.presets import load_topology
>>> t = load_topology("dgx-h100:nodes=2")
>>> t.nranks, t.nhosts, t.meta["nvlink_GBps"], t.meta["nic_GBps"]
(16, 2, 450.0, 50.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import CollsimError
from ..io.validation import GPU_LIMIT, MAX_GPUS
from ..topology import Link, Node, Topology, paused_gc
from ..topology.fabrics import get_fabric
from ..topology.hardware import NIC_PATHS, Hardware
from . import register

NVLINK_HOP_US = 0.35      # GPU <-> NVSwitch, per hop
PCIE_HOP_US = 0.5         # GPU <-> PCIe switch, PCIe switch <-> CPU
PCIE_NIC_US = 0.25        # PCIe switch <-> NIC
NIC_LATENCY_US = 0.6      # NIC <-> leaf (ConnectX-6/7 product briefs: "sub 0.6 usec latency")
SPINE_HOP_US = 0.2        # leaf <-> spine
PCIE_GBPS = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}  # raw x16 per direction: GT/s x 16 lanes / 8
MAX_NICS_PER_NODE = 32    # NCCL: one channel per NIC, at most MAXCHANNELS/2 = 32 per topology search


@dataclass(frozen=True, kw_only=True)
class Platform:
    """Public facts about one server model (per node), and the preset's text: ``summary`` (the line of
    ``collsim topo``) and ``sources`` (the builder's docstring: where each fact comes from). Rows are
    keyword-only: thirteen facts in a row read only by name."""

    preset: str
    gpu: str
    gpu_arch: str
    gpus: int
    nvlink_links: int
    nvlink_link_GBps: float   # per link per direction
    nvswitch: bool
    nvls_capable: bool
    pcie_gen: int
    nics: int
    nic_gbps: float
    cpu: str
    nodes_per_leaf: int       # scalable unit: hosts on one rail leaf
    summary: str = ""
    sources: str = ""
    mesh_links: int = 0       # no NVSwitch: NVLink links between each pair of GPUs (a direct mesh)
    default_fabric: str = "ib"
    # GPU -> its NIC as ``nvidia-smi topo -m`` prints it: PXB where GPU and NIC share a PCIe switch (DGX/HGX
    # 8-GPU boards), PHB where the NIC hangs off the CPU's root complex. NCCL enables LL128 across nodes only
    # up to PXB (src/graph/tuning.cc), so this decides a protocol, not only a route.
    nic_path: str = "PXB"
    # GPUs (local indices) whose nearest NIC lies beyond the host bridge (NODE or SYS in ``nvidia-smi topo
    # -m``): NCCL gives them no GPUDirect RDMA even at NCCL_NET_GDR_LEVEL=PHB and no PXN relay (the relay
    # must sit at PXB or nearer), so their sends and receives are staged through host memory. Rings and
    # trees enter a node at the GPUs nearest its NICs and never use them; an all_to_all does.
    far_gpus: tuple[int, ...] = ()

    @property
    def nvlink_GBps(self) -> float:
        return self.nvlink_links * self.nvlink_link_GBps


# NVLink3: 25 GB/s per link per direction (A100: 12 links = 300 GB/s/dir, "600 GB/s" bidirectional).
# NVLink4: 25 GB/s per link per direction (H100/H200: 18 links = 450 GB/s/dir, "900 GB/s").
# NVLink5: 50 GB/s per link per direction (B200: 18 links = 900 GB/s/dir, "1.8 TB/s").
DGX_A100 = Platform(
    preset="dgx-a100", gpu="A100-SXM4", gpu_arch="ampere", gpus=8, nvlink_links=12, nvlink_link_GBps=25.0,
    nvswitch=True, nvls_capable=False, pcie_gen=4, nics=8, nic_gbps=200.0, cpu="amd", nodes_per_leaf=20,
    summary="NVIDIA DGX A100: 8 A100 on NVSwitch (NVLink3 300 GB/s/dir), 8x 200G ConnectX-6",
    sources="""DGX A100 nodes. Source: NVIDIA DGX A100 datasheet and System Architecture whitepaper: 8x A100-SXM4,
    6 second-generation NVSwitches, 12 NVLink3 links per GPU (600 GB/s bidirectional = 300 GB/s per
    direction), 8x ConnectX-6 HDR 200 Gb/s compute NICs, PCIe Gen4 switches, 2x AMD
    EPYC 7742. No NVLink SHARP (nvls=1 is refused). SuperPOD scalable unit: 20 nodes per rail leaf.

    >>> from sim.presets import load_topology
    >>> load_topology("dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100").meta["nic_GBps"]
    12.5
    """)
DGX_H100 = Platform(
    preset="dgx-h100", gpu="H100-SXM", gpu_arch="hopper", gpus=8, nvlink_links=18, nvlink_link_GBps=25.0,
    nvswitch=True, nvls_capable=True, pcie_gen=5, nics=8, nic_gbps=400.0, cpu="intel", nodes_per_leaf=32,
    summary="NVIDIA DGX H100: 8 H100 on NVSwitch (NVLink4 450 GB/s/dir, NVLS), 8x 400G ConnectX-7",
    sources="""DGX H100 nodes. Source: NVIDIA DGX H100 datasheet / user guide: 8x H100-SXM5, 4 third-generation
    NVSwitches (NVLink SHARP), 18 NVLink4 links per GPU (900 GB/s bidirectional = 450 GB/s per direction),
    8x ConnectX-7 400 Gb/s NDR compute NICs, PCIe Gen5, 2x Intel Xeon Platinum 8480C. SuperPOD reference
    architecture: 32 nodes per scalable unit (one QM9700 leaf per rail).
    """)
DGX_H200 = Platform(
    preset="dgx-h200", gpu="H200-SXM", gpu_arch="hopper", gpus=8, nvlink_links=18, nvlink_link_GBps=25.0,
    nvswitch=True, nvls_capable=True, pcie_gen=5, nics=8, nic_gbps=400.0, cpu="intel", nodes_per_leaf=32,
    summary="NVIDIA DGX H200: 8 H200 on NVSwitch (NVLink4 450 GB/s/dir, NVLS), 8x 400G ConnectX-7",
    sources="""DGX H200 nodes. Source: NVIDIA DGX H200 datasheet: 8x H200 (141 GB), 4 NVSwitches, NVLink4 900 GB/s
    bidirectional per GPU (18 links, 450 GB/s per direction), 8x ConnectX-7 400 Gb/s, PCIe Gen5, 2x Intel
    Xeon Platinum 8480C. The interconnect is the DGX H100's; only the GPU (memory) differs.
    """)
DGX_B200 = Platform(
    preset="dgx-b200", gpu="B200", gpu_arch="blackwell", gpus=8, nvlink_links=18, nvlink_link_GBps=50.0,
    nvswitch=True, nvls_capable=True, pcie_gen=5, nics=8, nic_gbps=400.0, cpu="intel", nodes_per_leaf=32,
    summary="NVIDIA DGX B200: 8 B200 on NVSwitch (NVLink5 900 GB/s/dir, NVLS), 8x 400G ConnectX-7",
    sources="""DGX B200 nodes. Source: NVIDIA DGX B200 datasheet / user guide: 8x B200, 2 fifth-generation NVLink
    switch chips, 18 NVLink5 links per GPU (1.8 TB/s bidirectional = 900 GB/s per direction), 8x ConnectX-7
    400 Gb/s compute NICs, PCIe Gen5, 2x Intel Xeon Platinum 8570.
    """)
GB200_NVL72 = Platform(
    preset="gb200-nvl72", gpu="GB200", gpu_arch="blackwell", gpus=72, nvlink_links=18, nvlink_link_GBps=50.0,
    nvswitch=True, nvls_capable=True, pcie_gen=5, nics=72, nic_gbps=400.0, cpu="arm", nodes_per_leaf=32,
    summary="NVIDIA GB200 NVL72: a rack of 72 Blackwell GPUs on NVLink5 switches (900 GB/s/dir), a 400G NIC per GPU",
    sources="""GB200 NVL72 racks; a node is one NVLink domain (a rack). Source: NVIDIA GB200 NVL72 product page and
    datasheet: 72 Blackwell GPUs and 36 Grace (Arm) CPUs, 18 NVLink5 switch chips in 9 trays, 1.8 TB/s
    bidirectional NVLink per GPU (900 GB/s per direction, 18 links), one 400 Gb/s ConnectX-7 per GPU for the
    scale-out network. ``gpus_per_node=8`` uses 8 GPUs of the rack (and their 8 NICs).

    >>> from sim.presets import load_topology
    >>> load_topology("gb200-nvl72:gpus_per_node=8").meta["nvlink_GBps"]
    900.0
    """)
HGX_A100_4 = Platform(
    preset="hgx-a100-4", gpu="A100-SXM4", gpu_arch="ampere", gpus=4, nvlink_links=12, nvlink_link_GBps=25.0,
    nvswitch=False, nvls_capable=False, pcie_gen=4, nics=2, nic_gbps=200.0, cpu="amd", nodes_per_leaf=32,
    summary="4 A100 on a direct NVLink3 mesh (4 links = 100 GB/s/dir per pair), 2x 200G NICs (ALCF Polaris-like)",
    sources="""HGX A100 4-GPU nodes, as in ALCF Polaris. Sources: NVIDIA HGX A100 datasheet (4-GPU board: A100s
    joined directly by NVLink3, no NVSwitch; each A100 has 12 links of 25 GB/s per direction, 4 to each
    of its 3 peers = 100 GB/s per direction per pair); ALCF Polaris machine overview (per node 4x A100-SXM4,
    1x AMD EPYC 7543P "Milan", PCIe Gen4, 2x HPE Slingshot 11 NICs at 200 Gb/s). The NICs sit on the CPU's
    PCIe root, not behind the GPUs' switches (``nic_path=PHB``: ALCF's and NERSC's NCCL setups set
    NCCL_NET_GDR_LEVEL=PHB, which GPUDirect RDMA needs only on such a path). ALCF's published affinity
    table (Polaris machine overview, ``nvidia-smi topo -m``) has GPU1 and GPU3 at PHB to one NIC each and
    GPU0 and GPU2 at SYS to both (the CPU runs as four NUMA nodes): those two are ``far_gpus``, without
    GPUDirect RDMA or a PXN relay, which rings and trees never use (they enter the node at the GPUs nearest
    the NICs) but an all_to_all does (``no_gdr_p2p_share``; docs/accuracy-at-scale.md, seventeenth pass).
    The table is Polaris's: with more NICs per node or another ``nic_path`` no GPU is taken to be far.
    Polaris' Slingshot is a dragonfly; here, like every multi-node preset, the nodes sit on a rail-optimised
    fat tree.

    >>> from sim.presets import load_topology
    >>> load_topology("hgx-a100-4:nodes=2,nics_per_node=2,nic_gbps=200").nranks
    8
    """,
    mesh_links=4, default_fabric="slingshot", nic_path="PHB", far_gpus=(0, 2))


HGX_V100_4 = Platform(
    preset="hgx-v100-4", gpu="V100-SXM2", gpu_arch="volta", gpus=4, nvlink_links=6, nvlink_link_GBps=25.0,
    nvswitch=False, nvls_capable=False, pcie_gen=3, nics=2, nic_gbps=100.0, cpu="intel", nodes_per_leaf=32,
    summary="4 V100 on a direct NVLink2 mesh (2 links = 50 GB/s/dir per pair), 2x 100G NICs on the CPUs (ABCI (V)-like)",
    sources="""Four V100-SXM2 joined all-to-all by NVLink2 on the board, no NVSwitch, on a two-socket Xeon host, as in
    ABCI's Compute Node (V) (FUJITSU PRIMERGY CX2570 M4). Sources: NVIDIA V100 datasheet (SXM2: six NVLink2
    links of 25 GB/s per direction, "300 GB/s" bidirectional; PCIe Gen3); ABCI's system overview
    (aistabci/abci-docs ``en/docs/system-overview.md`` and its block diagram ``img/compute-node-v-diagram.png``:
    "NVLink2 x2" between every pair of the four GPUs = 50 GB/s per direction per pair, two GPUs behind a
    PCIe switch on each Xeon Gold 6148, and one InfiniBand EDR 100 Gb/s HCA on each CPU's own x16 root
    port). The NICs are not behind the GPUs' switches (``nic_path=PHB``): each GPU's nearest NIC is its own
    socket's, so no GPU is far, but NCCL's default NCCL_NET_GDR_LEVEL (PXB), which ABCI's runs set (2),
    gives this path no GPUDirect RDMA, and NCCL stages the network through host memory.

    >>> from sim.presets import load_topology
    >>> t = load_topology("hgx-v100-4:nodes=2")
    >>> t.nranks, t.meta["gpu_arch"], t.meta["nic_GBps"]
    (8, 'volta', 12.5)
    """,
    mesh_links=2, nic_path="PHB")

HGX_H100_4 = Platform(
    preset="hgx-h100-4", gpu="H100-SXM", gpu_arch="hopper", gpus=4, nvlink_links=18, nvlink_link_GBps=25.0,
    nvswitch=False, nvls_capable=False, pcie_gen=5, nics=4, nic_gbps=400.0, cpu="amd", nodes_per_leaf=32,
    summary="4 H100 on a direct NVLink4 mesh (6 links = 150 GB/s/dir per pair), x86 host, 4x 400G NICs",
    sources="""HGX H100 4-GPU nodes: four H100-SXM5 joined all-to-all by NVLink on the board, no NVSwitch, on an x86
    host (NREL Kestrel's GPU nodes, MareNostrum 5's accelerated partition). Sources: NVIDIA HGX H100
    datasheet (the 4-GPU board: "fully connected" H100s, 900 GB/s NVLink per GPU bidirectional = 18 links of
    25 GB/s per direction, 6 to each of its 3 peers = 150 GB/s per direction per pair, PCIe Gen5 to the
    host); NREL's Kestrel system configuration (132 nodes of 4 H100 SXM 80 GB and 2 AMD Genoa sockets, two
    200 Gb/s HPE Slingshot 11 NICs each: ``nics_per_node=2,nic_gbps=200,fabric=slingshot,nic_path=PHB``).
    The default of four 400 Gb/s NICs behind the GPUs' PCIe switches (``nic_path=PXB``) is one per GPU, as
    on InfiniBand builds of the board; say the cluster's own NICs. Unlike ``gh200-4`` (a Grace host, each
    NIC reached over NVLink-C2C) the GPUs reach their NICs and host over PCIe, and the host is x86.

    >>> from sim.presets import load_topology
    >>> t = load_topology("hgx-h100-4:nodes=2,nics_per_node=2,nic_gbps=200,fabric=slingshot,nic_path=PHB")
    >>> t.nranks, t.meta["cpu"], t.meta["nvswitch"]
    (8, 'amd', False)
    """,
    mesh_links=6)

GH200_4 = Platform(
    preset="gh200-4", gpu="GH200", gpu_arch="hopper", gpus=4, nvlink_links=18, nvlink_link_GBps=25.0,
    nvswitch=False, nvls_capable=False, pcie_gen=5, nics=4, nic_gbps=200.0, cpu="arm", nodes_per_leaf=32,
    summary="4 GH200 (Grace Hopper) on a direct NVLink4 mesh (6 links = 150 GB/s/dir per pair), 4x 200G NICs (CSCS Alps-like)",
    sources="""HPE Cray EX nodes of four NVIDIA GH200 superchips, as in CSCS Alps and Sigma2 Olivia. Sources: CSCS Alps
    hardware documentation (docs.cscs.ch, GH200 node schematic: four Grace-Hopper modules joined all-to-all by
    NVLink at 150 GB/s per GPU pair, one 200 Gb/s HPE Slingshot 11 NIC per module); NVIDIA GH200 datasheet
    (H100 GPU, 18 NVLink4 links of 25 GB/s per direction: 6 to each of the 3 peers). Each NIC hangs off its
    Grace CPU's PCIe (the GPU reaches it over NVLink-C2C), so ``nic_path=PHB``: CSCS and Sigma2 set
    NCCL_NET_GDR_LEVEL=PHB for it.

    >>> from sim.presets import load_topology
    >>> load_topology("gh200-4:nodes=2").nranks
    8
    """,
    mesh_links=6, default_fabric="slingshot", nic_path="PHB")


PLATFORMS = (DGX_A100, DGX_H100, DGX_H200, DGX_B200, GB200_NVL72, HGX_A100_4, HGX_H100_4, GH200_4, HGX_V100_4)
# platforms whose node is an NVLink domain of more GPUs than one 8-GPU server (a GB200 NVL72 rack): their
# nodes= counts domains joined by the network, not hosts (sim.presets.spec_notes says so where it may mislead)
RACK_SCALE_GPUS = {pf.preset: pf.gpus for pf in PLATFORMS if pf.gpus > 8}


def _far_gpus(pf: Platform, nodes: int, gpn: int, nics: int, path: str) -> int | None:
    """How many of a node's ``gpn`` GPUs reach no NIC within the host bridge (``Hardware.gpus_without_gdr``;
    None for none) by the platform's published affinity table (``far_gpus``), which holds for its own NIC
    layout only: with more NICs than the platform gives those GPUs, or another ``nic_path``, the node is
    another machine (a 4-GPU A100 node with a NIC per GPU behind its PCIe switch, as many InfiniBand
    clusters have), and no GPU is taken to be far. None on one node, where no GPU sends through a NIC. A
    spec's ``gpus_without_gdr`` (the NODE and SYS entries of the GPUs' NIC columns in ``nvidia-smi topo -m``)
    overrides it."""
    own_nics = max(1, pf.nics * gpn // pf.gpus)
    if nodes < 2 or path != pf.nic_path or nics > own_nics:
        return None
    return sum(g < gpn for g in pf.far_gpus) or None


def _positive_int(preset: str, key: str, value, lo: int = 1, hi: int = MAX_GPUS) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise CollsimError(f"preset {preset!r}: {key}={value!r} must be a whole number from {lo} to {hi}")
    return value


def _node_topology(pf: Platform, nodes: int, gpus_per_node: int | None, nics_per_node: int | None,
                   nic_gbps: float | None, sharp: bool, nvls: bool | None, oversubscription: float,
                   nodes_per_leaf: int | None, nvls_sharp: bool = False, fabric: str | None = None,
                   nic_path: str | None = None, gpus_without_gdr: int | None = None) -> Topology:
    """Build ``nodes`` hosts of platform ``pf`` (see the module docstring for the model).

    ``nvls_sharp``: allow NCCL's multi-node NVLS (NVLink SHARP inside each node, IB SHARP between them).
    It needs NVLS buffer registration and a SHARP plugin with multicast support on top of ``sharp=1``,
    so it is not assumed: with plain ``sharp=1`` NCCL-style selection uses CollNet between nodes.
    """
    with paused_gc():   # millions of Link/Node objects and no cycles: see paused_gc
        return _build_nodes(pf, nodes, gpus_per_node, nics_per_node, nic_gbps, sharp, nvls, oversubscription,
                            nodes_per_leaf, nvls_sharp, pf.default_fabric if fabric is None else fabric,
                            pf.nic_path if nic_path is None else nic_path, gpus_without_gdr)


def _build_nodes(pf: Platform, nodes, gpus_per_node, nics_per_node, nic_gbps, sharp, nvls, oversubscription,
                 nodes_per_leaf, nvls_sharp, fabric, nic_path, gpus_without_gdr=None) -> Topology:
    name = pf.preset
    mesh_GBps, default_fabric = pf.mesh_links * pf.nvlink_link_GBps, pf.default_fabric
    gpn = _positive_int(name, "gpus_per_node", pf.gpus if gpus_per_node is None else gpus_per_node, 1, pf.gpus)
    # one way to say the limit everywhere (README, errors): GPUs, with the nodes it allows at this node size
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= MAX_GPUS // gpn:
        raise CollsimError(f"preset {name!r}: nodes={nodes!r} must be a whole number from 1 to {MAX_GPUS // gpn} "
                           f"({gpn} GPUs per node; {GPU_LIMIT})")
    if nodes * gpn < 2:
        raise CollsimError(f"preset {name!r}: {nodes} node(s) x {gpn} GPU(s) is one GPU: a collective needs at least 2")
    # Using part of a node keeps the GPU:NIC ratio (GPU i keeps its own NIC), at least one NIC.
    nics = max(1, pf.nics * gpn // pf.gpus) if nics_per_node is None else nics_per_node
    max_nics = max(MAX_NICS_PER_NODE, gpn)   # beyond 32 only one NIC per GPU (GB200 NVL72: 72 per rack)
    if isinstance(nics, int) and not isinstance(nics, bool) and nics > max_nics:
        raise CollsimError(f"preset {name!r}: nics_per_node={nics} is more than {max_nics}: NCCL's topology search "
                           f"finds at most {MAX_NICS_PER_NODE} channels (MAXCHANNELS/2) per GPU's rings and needs one "
                           f"per NIC, so more NICs than that (or than one per GPU) cannot all carry traffic; "
                           f"use {max_nics} or fewer")
    nics = _positive_int(name, "nics_per_node", nics, 1, max_nics)
    if nics > gpn and nics % gpn:
        raise CollsimError(f"preset {name!r}: nics_per_node={nics} on {gpn} GPUs per node: with more NICs than GPUs "
                           f"each GPU needs the same number (a multiple of {gpn}, e.g. {gpn * (nics // gpn)} or "
                           f"{gpn * (nics // gpn + 1)})")
    fab = get_fabric(fabric).name
    path = str(nic_path).strip().upper()
    if path not in NIC_PATHS:
        raise CollsimError(f"preset {name!r}: nic_path={nic_path!r} is not a GPU-to-NIC path: use one of {', '.join(NIC_PATHS)} "
                           f"(the GPU's NIC column of `nvidia-smi topo -m`)")
    gbps = pf.nic_gbps if nic_gbps is None else nic_gbps
    if not (isinstance(gbps, (int, float)) and math.isfinite(gbps) and gbps > 0):
        raise CollsimError(f"preset {name!r}: nic_gbps={gbps} must be a positive NIC speed in Gb/s (e.g. 200, 400)")
    if not (isinstance(oversubscription, (int, float)) and math.isfinite(oversubscription) and oversubscription >= 1):
        raise CollsimError(f"preset {name!r}: oversubscription={oversubscription} must be 1 (non-blocking) or more (e.g. 2 for 2:1)")
    per_leaf = _positive_int(name, "nodes_per_leaf", pf.nodes_per_leaf if nodes_per_leaf is None else nodes_per_leaf)
    use_nvls = pf.nvls_capable if nvls is None else bool(nvls)
    if use_nvls and not pf.nvls_capable:
        why = "it has no NVSwitch" if not pf.nvswitch else f"{pf.gpu}'s NVSwitch generation has no NVLink SHARP"
        raise CollsimError(f"preset {name!r}: nvls=1 but {why}: NVLS needs third-generation NVSwitch (Hopper or later, "
                           f"e.g. dgx-h100); drop nvls=1")
    if sharp and nodes < 2:
        raise CollsimError(f"preset {name!r}: sharp=1 with nodes=1: SHARP reduces in the network switches between "
                           f"nodes; use nodes=2 or more")
    if nvls_sharp and not (sharp and use_nvls):   # it used to change nothing, without a word
        need = "sharp=1 (IB SHARP between the nodes)" if not sharp else "NVLS (an NVSwitch with NVLink SHARP, nvls=1)"
        raise CollsimError(f"preset {name!r}: nvls_sharp=1 needs {need}: NVLS inside each node joined by IB SHARP "
                           f"between them; add sharp=1{'' if use_nvls else ' on a preset with NVLS (e.g. dgx-h100)'}, or drop nvls_sharp=1")
    far = table_far = _far_gpus(pf, nodes, gpn, nics, path)
    if gpus_without_gdr is not None:   # the spec's count (nvidia-smi's NODE/SYS entries) over the table's
        given = _positive_int(name, "gpus_without_gdr", gpus_without_gdr, 0, gpn)
        far = (given or None) if nodes > 1 else None
    nic_GBps = gbps / 8
    # NIC ports the engine draws: several NICs behind one GPU's PCIe switch (p5: 4 x 100G per GPU) are one
    # port of their summed speed, as NCCL spreads that GPU's channels over them; fewer NICs than GPUs are
    # shared (GPU i uses NIC i * nics // gpn). ``ports`` PCIe switches, one per port.
    ports = min(nics, gpn)
    port_GBps = nic_GBps * nics / ports
    pcie_GBps = PCIE_GBPS[pf.pcie_gen]
    nvl = pf.nvlink_GBps

    node_list: list[Node] = []
    links: list[Link] = []

    def duplex(pairs, bw: float, lat: float, kind: str) -> None:
        _duplex(links, pairs, bw, lat, kind)

    nsu = (nodes + per_leaf - 1) // per_leaf     # scalable units: one leaf per rail in each
    per_port = nics // ports
    nic_labels = [f"NIC{k}" if per_port == 1 else f"NIC{k * per_port}-{k * per_port + per_port - 1} ({per_port} x {gbps:g}G)"
                  for k in range(ports)]
    nic_of_gpu = [i * ports // gpn for i in range(gpn)]
    for h in range(nodes):
        pre = f"h{h}."
        gpus = [f"{pre}gpu{i}" for i in range(gpn)]
        pcie = [f"{pre}pcie{s}" for s in range(ports)] if nodes > 1 else []
        node_list.extend([Node(g, "gpu", host=h) for g in gpus])
        if nodes > 1:  # PCIe switches, the NVSwitch listed amid them (it is drawn in the middle of its host)
            node_list.extend([Node(pcie[s], "switch", host=h, label=f"PCIe{s}") for s in range(ports // 2)])
        if pf.nvswitch:
            sw = pre + "nvswitch"
            node_list.append(Node(sw, "switch", host=h, reduce="nvls" if use_nvls else None, label="NVSwitch"))
            duplex([(g, sw) for g in gpus], nvl, NVLINK_HOP_US, "nvlink")
        else:  # direct NVLink mesh (HGX A100 4-GPU): every pair gets mesh_GBps each way
            duplex([(gpus[i], gpus[j]) for i in range(gpn) for j in range(i + 1, gpn)], mesh_GBps, 2 * NVLINK_HOP_US, "nvlink")
        if nodes == 1:
            continue
        node_list.extend([Node(pcie[s], "switch", host=h, label=f"PCIe{s}") for s in range(ports // 2, ports)])
        cpu = pre + "cpu"
        node_list.append(Node(cpu, "cpu", host=h, label="CPU"))
        duplex([(p, cpu) for p in pcie], pcie_GBps, PCIE_HOP_US, "pcie")
        duplex([(g, pcie[nic_of_gpu[i]]) for i, g in enumerate(gpus)], pcie_GBps, PCIE_HOP_US, "pcie")
        su = h // per_leaf
        for k in range(ports):
            nic = f"{pre}nic{k}"
            node_list.append(Node(nic, "nic", host=h, label=nic_labels[k]))
            duplex([(nic, pcie[k])], pcie_GBps * per_port, PCIE_NIC_US, "pcie")
            duplex([(nic, _leaf(su, k, nsu))], port_GBps, NIC_LATENCY_US, "net")
    if nodes > 1:
        reduce = "sharp" if sharp else None
        for su in range(nsu):
            hosts_here = min(per_leaf, nodes - su * per_leaf)
            up = hosts_here * port_GBps / oversubscription
            for k in range(ports):
                leaf = _leaf(su, k, nsu)
                node_list.append(Node(leaf, "switch", reduce=reduce, label=f"leaf rail{k}" if nsu == 1 else f"leaf su{su} rail{k}"))
                duplex([(leaf, "spine")], up, SPINE_HOP_US, "net")
        node_list.append(Node("spine", "switch", reduce=reduce, label="spine (aggregated)"))

    hardware = Hardware(
        gpu_arch=pf.gpu_arch, gpu=pf.gpu, nvlink_GBps=nvl, nvlink_links=pf.nvlink_links,
        intra="nvlink", nvswitch=pf.nvswitch, pcie_gen=pf.pcie_gen, p2p=True,
        nodes=nodes, gpus_per_node=gpn, nics_per_node=nics, nic_GBps=nic_GBps, nic_gbps=float(gbps),
        nic_path=path if nodes > 1 else None, gpus_without_gdr=far,
        sharp=bool(sharp), nvls=use_nvls, nvls_sharp=bool(nvls_sharp and sharp and use_nvls), cpu=pf.cpu,
        nic_latency_us=NIC_LATENCY_US, pcie_GBps=pcie_GBps, nvlink_latency_us=2 * NVLINK_HOP_US,
        oversubscription=float(oversubscription), nodes_per_leaf=per_leaf, fabric=fab, nic_ports=ports if nodes > 1 else 0,
        nvlink_pair_GBps=None if pf.nvswitch else mesh_GBps,
        # only GPU<->NVSwitch links (or a full mesh): GPU i -> i+1 maps links onto links
        symmetry="rotation" if nodes == 1 else None)
    params = [f"nodes={nodes}"] if nodes > 1 else []
    if gpn != pf.gpus:
        params.append(f"gpus_per_node={gpn}")
    if nodes > 1:  # the network that the name's reader needs to compare clusters
        params += [f"nics_per_node={nics}", f"nic_gbps={gbps:g}"]
    params += [f"fabric={fab}"] if fab != default_fabric else []
    params += [f"nic_path={path}"] if path != pf.nic_path and nodes > 1 else []
    params += [f"gpus_without_gdr={far or 0}"] if far != table_far else []
    params += ["sharp=1"] if sharp else []
    params += [f"nvls={int(use_nvls)}"] if use_nvls != pf.nvls_capable else []
    params += ["nvls_sharp=1"] if nvls_sharp else []
    params += [f"oversubscription={oversubscription:g}"] if oversubscription != 1 else []
    # the leaves decide which flows cross the spine: a name that dropped them named two clusters alike
    # (only where it splits them otherwise than the default: 8 nodes of 16 or of 32 per leaf are one leaf either way)
    params += [f"nodes_per_leaf={per_leaf}"] if per_leaf != pf.nodes_per_leaf and nodes > min(per_leaf, pf.nodes_per_leaf) else []
    return Topology.build(name + (":" + ",".join(params) if params else ""), node_list, links, hardware)


def _duplex(links: list[Link], pairs, bw: float, lat: float, kind: str) -> None:
    """Append a link each way between every pair (the builders' cables are full duplex)."""
    for a, b in pairs:
        links.append(Link(a, b, bw, lat, kind))
        links.append(Link(b, a, bw, lat, kind))


def _leaf(su: int, rail: int, nsu: int) -> str:
    return f"leaf{rail}" if nsu == 1 else f"su{su}.leaf{rail}"


def _preset_builder(pf: Platform):
    """The preset function of platform ``pf``: its keyword parameters are the spec's keys (``register``
    reads them, their types and defaults from the signature), its docstring the platform's sources."""
    def build(nodes: int = 1, gpus_per_node: int | None = None, nics_per_node: int | None = None,
              nic_gbps: float | None = None, sharp: bool = False, nvls: bool | None = None,
              oversubscription: float = 1.0, nodes_per_leaf: int | None = None,
              nvls_sharp: bool = False, fabric: str = pf.default_fabric, nic_path: str = pf.nic_path,
              gpus_without_gdr: int | None = None) -> Topology:
        return _node_topology(pf, nodes, gpus_per_node, nics_per_node, nic_gbps, sharp, nvls, oversubscription,
                              nodes_per_leaf, nvls_sharp, fabric, nic_path, gpus_without_gdr)
    build.__name__ = build.__qualname__ = pf.preset.replace("-", "_")
    build.__doc__ = pf.sources
    return build


# One preset per platform, under its own module-level name (dgx_h100, ...), where doctest finds its examples.
globals().update({pf.preset.replace("-", "_"): register(pf.preset, pf.summary)(_preset_builder(pf)) for pf in PLATFORMS})


_ARCHS = ("volta", "ampere", "hopper", "blackwell")
# NCCL_P2P_LEVEL's path names, nearest first (src/graph/topo.h PATH_LOC..PATH_SYS; NCCL's default for P2P is PXB)
P2P_LEVELS = ("LOC", "PIX", "PXB", "PHB", "NODE", "SYS")
_CPUS = ("intel", "amd", "arm")


# The link between the two CPU sockets of a PCIe server, GB/s per direction, as the CPUs are built (the
# simulated link is physical; NCCL's graph credits it with far less, src/graph/topo.h: SKL_QPI_BW 10, AMD_BW
# 16, ARM_BW 6, figures for its search that no bus runs at):
# * intel: two UPI links at 10.4 GT/s (Xeon Scalable from Skylake: 2 or 3 links; 20.8 GB/s per link and
#   direction), the least a two-socket Xeon server has;
# * amd: three x16 xGMI links at 16 GT/s (2P EPYC 7002/7003 platforms run three or four; 32 GB/s per link and
#   direction);
# * arm: NCCL's own figure (no public figure for a two-socket Arm server's link).
# Either x86 link is wider than a GPU's x16 port, so a ring across the sockets runs at its GPUs' PCIe path,
# as published: 8 RTX 4090 on their own root ports of two EPYC 7542 reach 14.5-15 GB/s busbw through host
# memory (public case PCIE-4090x8-SHM; NCCL's 16 GB/s would hold that ring to 8.5).
SOCKET_GBPS = {"intel": 2 * 20.8, "amd": 3 * 32.0, "arm": 6.0}


@register("pcie", "PCIe GPUs: one switch, or root ports on one or two sockets (sockets=2, gpus_per_switch=1); p2p=0 bounces through host memory")
def pcie(gpus: int = 2, gen: int = 4, p2p: bool = True, arch: str = "ampere", cpu: str = "intel", sockets: int = 1,
         gpus_per_switch: int = 0, socket_GBps: float = 0.0, p2p_level: str = "PXB") -> Topology:
    """One host whose GPUs sit under a PCIe switch with an x16 uplink to the CPU (raw x16 per direction:
    gen3 16, gen4 32, gen5 64 GB/s; PCI-SIG transfer rates 8/16/32 GT/s x 16 lanes / 8).

    ``p2p=1``: GPUs talk through the switch (GPU -> switch -> GPU). ``p2p=0`` (no peer-to-peer, e.g.
    consumer GPUs or ACS redirecting peer traffic upstream): every transfer is written to host memory
    and read back, so it crosses the switch's single upstream port twice: drawn as a ``pcie.up`` (GPU to
    host) and a ``pcie.down`` (host to GPU) half, both shared by all GPUs. Two GPUs sending at once then
    each get half the uplink: the lower bandwidth of the host bounce. ``arch`` and ``cpu`` only fill
    ``meta`` (the NCCL model's tables depend on them). ``p2p_level``: the run's ``NCCL_P2P_LEVEL`` (LOC, PIX,
    PXB, PHB, NODE, SYS; NCCL's default PXB), the farthest path peer-to-peer may take on a server of root
    ports and sockets (``sockets``, ``gpus_per_switch``): with ``p2p=1`` and ``p2p_level=SYS`` every pair
    talks directly, through the CPUs, instead of through host memory.

    >>> from sim.presets import load_topology
    >>> t = load_topology("pcie:gpus=2,gen=3,p2p=0")
    >>> [t.links[i].dst for i in t.route(0, 1)]
    ['pcie.up', 'cpu', 'pcie.down', 'gpu1']
    """
    if not isinstance(gpus, int) or not 2 <= gpus <= 64:
        raise CollsimError(f"preset 'pcie': gpus={gpus} must be 2..64 GPUs")
    if gen not in PCIE_GBPS:
        raise CollsimError(f"preset 'pcie': gen={gen} is not a PCIe generation collsim knows: use 3, 4, 5 or 6")
    if arch not in _ARCHS:
        raise CollsimError(f"preset 'pcie': arch={arch!r}: use one of {', '.join(_ARCHS)}")
    if cpu not in _CPUS:
        raise CollsimError(f"preset 'pcie': cpu={cpu!r}: use one of {', '.join(_CPUS)}")
    bw = PCIE_GBPS[gen]
    level = str(p2p_level).upper()
    if level not in P2P_LEVELS:
        raise CollsimError(f"preset 'pcie': p2p_level={p2p_level!r}: use one of {', '.join(P2P_LEVELS)} "
                           f"(NCCL_P2P_LEVEL's path names; NCCL's default is PXB)")
    if sockets != 1 or gpus_per_switch:
        return _pcie_server(gpus, gen, bool(p2p), arch, cpu, sockets, gpus_per_switch, socket_GBps, level)
    gpu_nodes = [Node(f"gpu{i}", "gpu", host=0) for i in range(gpus)]
    links: list[Link] = []
    if p2p:
        extra = [Node("pcie", "switch", host=0, label=f"PCIe gen{gen} switch"), Node("cpu", "cpu", host=0, label="CPU")]
        for g in gpu_nodes:
            links += [Link(g.name, "pcie", bw, PCIE_HOP_US, "pcie"), Link("pcie", g.name, bw, PCIE_HOP_US, "pcie")]
        links += [Link("pcie", "cpu", bw, PCIE_HOP_US, "pcie"), Link("cpu", "pcie", bw, PCIE_HOP_US, "pcie")]
    else:
        extra = [Node("pcie.up", "switch", host=0, label="PCIe switch (to host)"),
                 Node("pcie.down", "switch", host=0, label="PCIe switch (from host)"), Node("cpu", "cpu", host=0, label="CPU + memory")]
        for g in gpu_nodes:
            links += [Link(g.name, "pcie.up", bw, PCIE_HOP_US, "pcie"), Link("pcie.down", g.name, bw, PCIE_HOP_US, "pcie")]
        links += [Link("pcie.up", "cpu", bw, PCIE_HOP_US, "pcie"), Link("cpu", "pcie.down", bw, PCIE_HOP_US, "pcie")]
    hardware = Hardware(gpu_arch=arch, gpu=f"PCIe GPU ({arch})", nvlink_GBps=0.0, nvlink_links=0, intra="pcie",
                        nvswitch=False, pcie_gen=gen, p2p=bool(p2p), nodes=1, gpus_per_node=gpus, nics_per_node=0,
                        nic_GBps=0.0, nic_gbps=0.0, sharp=False, nvls=False, cpu=cpu, nic_latency_us=NIC_LATENCY_US,
                        pcie_GBps=bw)
    return Topology.build(f"pcie:gpus={gpus},gen={gen},p2p={int(bool(p2p))}", gpu_nodes + extra, links, hardware)


def _pcie_server(gpus: int, gen: int, p2p: bool, arch: str, cpu: str, sockets: int, gpus_per_switch: int,
                 socket_GBps: float, p2p_level: str = "PXB") -> Topology:
    """A PCIe server as built: ``sockets`` CPUs joined by their socket link, each with ``gpus / sockets``
    GPUs under PCIe switches of ``gpus_per_switch`` GPUs (1: every GPU on its own CPU root port).

    Peer-to-peer follows NCCL's default (``ncclTopoCheckP2p``, src/graph/paths.cc in current releases:
    ``p2pLevel = PATH_PXB``, "don't use P2P across CPU Host Bridges and further apart", except two GPUs on
    an AMD CPU): GPUs under one switch talk through it; every other pair goes through host memory (NCCL's
    SHM transport), and so does every pair with ``p2p=0``. A run that set ``NCCL_P2P_LEVEL`` at or beyond
    the farthest pair's path (NODE between host bridges of one socket, SYS across sockets) is ``p2p_level=``
    that: its pairs talk directly through the CPUs (the same links, without the host bounce). Each GPU has
    one x16 port; a switch's uplink is drawn as an ``up`` and a ``down`` half, the CPUs' socket link at the CPUs' own rate (:data:`SOCKET_GBPS`,
    not NCCL's search figure) unless ``socket_GBps`` says otherwise.

    >>> from sim.presets import load_topology
    >>> t = load_topology("pcie:gpus=8,sockets=2,gpus_per_switch=1,p2p=1")
    >>> [t.links[i].dst for i in t.route(0, 7)]
    ['gpu0.port', 'sw0.up', 'cpu0', 'cpu1', 'sw7.down', 'gpu7.port', 'gpu7']
    >>> t.path_bandwidth_GBps(0, 7), t.hardware.p2p      # Intel: no P2P through the CPU; the GPU's x16 port binds
    (32.0, False)
    """
    if sockets not in (1, 2):
        raise CollsimError(f"preset 'pcie': sockets={sockets} must be 1 or 2 (CPU sockets of one server)")
    if gpus % sockets:
        raise CollsimError(f"preset 'pcie': gpus={gpus} do not split evenly over sockets={sockets}: use a multiple of {sockets}")
    per_socket = gpus // sockets
    per_switch = gpus_per_switch or per_socket
    if not isinstance(per_switch, int) or per_switch < 1 or per_socket % per_switch:
        raise CollsimError(f"preset 'pcie': gpus_per_switch={gpus_per_switch} must divide the {per_socket} GPUs of a socket "
                           f"(1: every GPU on its own root port)")
    link_GBps = socket_GBps or SOCKET_GBPS[cpu]
    if not (isinstance(link_GBps, (int, float)) and math.isfinite(link_GBps) and link_GBps > 0):
        raise CollsimError(f"preset 'pcie': socket_GBps={socket_GBps} must be a positive bandwidth in GB/s per direction")
    bw = PCIE_GBPS[gen]
    switches = gpus // per_switch
    through_cpu = p2p and cpu == "amd" and gpus <= 2     # NCCL's P2P level: PXB, through the CPU for 2 GPUs on AMD
    # the farthest path between two GPUs, as nvidia-smi and NCCL name it: one switch, host bridges of one socket, sockets
    farthest = "PIX" if switches == 1 else "SYS" if sockets == 2 else "NODE"
    allowed = P2P_LEVELS.index(farthest) <= P2P_LEVELS.index(p2p_level)   # NCCL_P2P_LEVEL (the run's, as a parameter)
    all_p2p = p2p and (switches == 1 or through_cpu or allowed)
    nodes = [Node(f"gpu{i}", "gpu", host=0) for i in range(gpus)]
    nodes += [Node(f"gpu{i}.port", "switch", host=0, label=f"GPU{i} x16") for i in range(gpus)]
    nodes += [Node(f"cpu{k}", "cpu", host=0, label=f"CPU{k}") for k in range(sockets)]
    links: list[Link] = []

    def duplex(a: str, b: str, bandwidth: float, lat: float) -> None:
        _duplex(links, [(a, b)], bandwidth, lat, "pcie")

    for k in range(switches):
        cpu_k = f"cpu{k * per_switch // per_socket}"
        members = range(k * per_switch, (k + 1) * per_switch)
        nodes += [Node(f"sw{k}.up", "switch", host=0, label=f"PCIe{k} up"), Node(f"sw{k}.down", "switch", host=0, label=f"PCIe{k} down")]
        links += [Link(f"sw{k}.up", cpu_k, bw, PCIE_HOP_US, "pcie"), Link(cpu_k, f"sw{k}.down", bw, PCIE_HOP_US, "pcie")]
        if p2p and per_switch > 1:      # peers under one switch: through it, never up to the CPU
            nodes.append(Node(f"sw{k}", "switch", host=0, label=f"PCIe{k} switch"))
        for i in members:
            duplex(f"gpu{i}", f"gpu{i}.port", bw, 0.0)
            links += [Link(f"gpu{i}.port", f"sw{k}.up", bw, PCIE_HOP_US, "pcie"), Link(f"sw{k}.down", f"gpu{i}.port", bw, PCIE_HOP_US, "pcie")]
            if p2p and per_switch > 1:
                duplex(f"gpu{i}.port", f"sw{k}", bw, PCIE_HOP_US / 2)
    if sockets == 2:
        duplex("cpu0", "cpu1", link_GBps, PCIE_HOP_US)
    hardware = Hardware(gpu_arch=arch, gpu=f"PCIe GPU ({arch})", nvlink_GBps=0.0, nvlink_links=0, intra="pcie",
                        nvswitch=False, pcie_gen=gen, p2p=all_p2p, nodes=1, gpus_per_node=gpus, nics_per_node=0,
                        nic_GBps=0.0, nic_gbps=0.0, sharp=False, nvls=False, cpu=cpu, nic_latency_us=NIC_LATENCY_US,
                        pcie_GBps=bw, p2p_level=p2p_level if p2p else None)
    params = [f"gpus={gpus}", f"gen={gen}", f"p2p={int(p2p)}", f"sockets={sockets}", f"gpus_per_switch={per_switch}"]
    params += [f"cpu={cpu}"] if cpu != "intel" else []
    params += [f"socket_GBps={link_GBps:g}"] if socket_GBps else []
    params += [f"p2p_level={p2p_level}"] if p2p_level != "PXB" else []
    return Topology.build("pcie:" + ",".join(params), nodes, links, hardware)
