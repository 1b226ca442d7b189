"""NCCL topology XML (``NCCL_TOPO_FILE`` input, ``NCCL_TOPO_DUMP_FILE`` output) as a collsim topology.

NCCL describes a node as ``<system><cpu><pci ...><gpu sm= ><nvlink target= count= tclass=/></gpu></pci>
... <pci><nic><net name= speed= /></nic></pci></cpu></system>``. What collsim reads from it:

* GPU architecture from ``<gpu sm="90">`` (70 Volta, 80 Ampere, 90 Hopper, 100 Blackwell);
* NVLink: the ``count`` of a GPU's ``<nvlink>`` rows summed is its link count; a target of class
  ``0x068000`` (a bridge: NVSwitch) means an NVSwitch node, including the collapsed form VMs dump
  (one ``<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>``); GPU targets (``0x030200``)
  mean a direct NVLink mesh, which must join every pair of GPUs (NVLink between some pairs only is refused:
  every NVLink preset joins every pair);
* NICs from ``<net>`` rows, speed in Mb/s (``speed="400000"`` = 400 Gb/s); NICs slower than the fastest
  (a 10G management port beside 400G rails) are left out and said so;
* PCIe placement: which GPU shares a PCIe switch (``class="0x060400"``) with which NIC.

Input files that cloud providers ship (e.g. Azure's ``ndv4-topo.xml``) list only ``<pci>`` devices by class
(``0x0302xx`` GPU, ``0x0207xx``/``0x0200xx`` NIC): they name no architecture, so the spec must
(``FILE.xml:gpu=a100``), and the NIC speed, when no ``<net>`` gives it, is the platform's.

The node becomes the matching hardware preset (Ampere/Hopper/Blackwell on NVSwitch: ``dgx-a100``,
``dgx-h100``, ``dgx-b200``; no NVLink: ``pcie``) with the file's GPU count, NIC count and NIC speed, so
a file for the same hardware simulates exactly as the preset. Other spec keys (``nodes=2``,
``fabric=roce``, ...) go to the preset: ``FILE.xml:nodes=4`` is a cluster of four such nodes. The file is
parsed by ``defusedxml`` (no DTDs, entities or external references: refused with a clear error) and
must be under 8 MiB.

>>> import os
>>> here = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "nccl_topo")
>>> from sim.presets import load_topology
>>> t = load_topology(os.path.join(here, "azure-ndv5-topo.xml") + ":gpu=h100")
>>> t.meta["gpu_arch"], t.meta["nics_per_node"], t.meta["nic_gbps"], t.nranks
('hopper', 8, 400.0, 8)
"""
from __future__ import annotations

import itertools
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from ..errors import CollsimError
from .hardware import NIC_PATHS, through_cpu

MAX_XML_BYTES = 8 << 20
SM_ARCH = {7: "volta", 8: "ampere", 9: "hopper", 10: "blackwell", 12: "blackwell"}
# gpu= names for files without <gpu sm=>: the architecture and the preset of that platform
GPU_NAMES = {"v100": "volta", "a100": "ampere", "a800": "ampere", "h100": "hopper", "h200": "hopper", "h800": "hopper",
             "h20": "hopper", "gh200": "hopper",
             "b200": "blackwell", "gb200": "blackwell", "ampere": "ampere", "hopper": "hopper", "blackwell": "blackwell"}
NVSWITCH_PRESET = {"ampere": "dgx-a100", "hopper": "dgx-h100", "blackwell": "dgx-b200"}
H200_NAMES = ("h200",)
# direct-mesh boards (no NVSwitch) of at most MESH_GPUS GPUs: the preset of each architecture's board. A Hopper
# mesh is a Grace Hopper node (gh200-4) unless gpu= names a PCIe Hopper (H100, H200, ...: hgx-h100-4, an x86 host)
MESH_PRESET = {"volta": "hgx-v100-4", "ampere": "hgx-a100-4", "hopper": "gh200-4"}
PCIE_HOPPER_MESH = "hgx-h100-4"
PCIE_HOPPER_NAMES = ("h100", "h200", "h800", "h20")
SUPERCHIP_NAMES = ("gh200",)
MESH_GPUS = 4
# NVLinks between each pair of GPUs on those boards (sim/presets/hardware.py ``mesh_links``, from the datasheets):
# a mesh with another count gets each pair's bandwidth scaled to its own links, or a note where the caller keeps
# the preset's (``preset_for(scales_mesh=...)``)
MESH_PAIR_LINKS = {"hgx-v100-4": 2, "hgx-a100-4": 4, "hgx-h100-4": 6, "gh200-4": 6}
# meshes whose GPUs reach their NICs over PCIe, so the matrix's GPU-to-NIC paths are GPUDirect's paths; a
# Grace Hopper superchip reaches its NIC through its Grace CPU over NVLink-C2C, which no PCIe path describes
MESH_PCIE_NICS = ("hgx-v100-4", "hgx-a100-4", "hgx-h100-4")
PRESET_LINKS = {"dgx-a100": 12, "dgx-h100": 18, "dgx-h200": 18, "dgx-b200": 18}   # NVLinks per GPU (datasheets)
BRIDGE_CLASS = "0x0680"     # NVSwitch (PCI class "other bridge")
GPU_CLASS = "0x0302"        # 3D controller (also 0x0300 VGA)
NIC_CLASSES = ("0x0207", "0x0200")   # InfiniBand, Ethernet
PCI_SWITCH_CLASS = "0x0604"


@dataclass
class XmlNode:
    """What one NCCL topology file says about a node."""

    # {"busid", "sm", "links", "nvswitch", "mesh", "switch", "nv_peers"}; nv_peers: the GPUs it has NVLinks to, where
    # the source says (None: not said)
    gpus: list[dict] = field(default_factory=list)
    nics: list[dict] = field(default_factory=list)      # {"busid", "name", "mbps", "switch"}
    cpus: int = 0
    notes: list[str] = field(default_factory=list)
    nvlink_listed: bool = False   # the source lists every NVLink (nvidia-smi topo -m): none listed means none
    nic_path: str | None = None   # GPU -> nearest NIC as nvidia-smi prints it (PIX/PXB/PHB/NODE/SYS), where the source says
    sockets: int = 1              # CPU sockets the GPUs hang off (nvidia-smi: SYS between two GPUs)
    gpus_per_switch: int = 0      # GPUs under one PCIe switch (PIX/PXB between them); 0: not said
    gpu_nic_paths: list[str] = field(default_factory=list)   # each GPU's nearest NIC (nvidia-smi), where the source says
    cpu_arch: str | None = None   # <cpu arch=...> of an NCCL XML (x86_64, arm64); None where the source does not say


def parse_topology_xml(text: str, source: str = "<xml>") -> XmlNode:
    """Read NCCL's topology XML (see the module docstring) safely."""
    import defusedxml
    import defusedxml.ElementTree as DET
    _check_depth(text, source)   # before parsing: the walk below recurses per level
    try:
        root = DET.fromstring(text, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except (defusedxml.DTDForbidden, defusedxml.EntitiesForbidden, defusedxml.ExternalReferenceForbidden) as e:
        raise CollsimError(f"{source}: refused: the XML declares a DTD, entities or external references ({type(e).__name__}), "
                           "which NCCL topology files never need (and which can expand without bound): remove them") from None
    except DET.ParseError as e:
        raise CollsimError(f"{source} is not well-formed XML ({e}): pass the file NCCL_TOPO_DUMP_FILE wrote") from None
    if root.tag != "system":
        raise CollsimError(f"{source}: the root element is <{root.tag}>, not <system>: this is not an NCCL topology file")
    node = XmlNode(cpus=len(root.findall("cpu")),
                   cpu_arch=next((str(c.get("arch")).lower() for c in root.findall("cpu") if c.get("arch")), None))
    _walk(root, None, node)
    if not node.gpus:
        raise CollsimError(f"{source} lists no GPU (no <gpu> and no <pci class=\"0x0302..\">): nothing to simulate")
    return node


# NCCL's dumps nest system > cpu > pci (switches, a few levels) > gpu/nic > nvlink/net: under 12 levels
MAX_XML_DEPTH = 64
_TAG = re.compile(r"<(/?)[A-Za-z_][^\s/>]*[^>]*?(/?)>|<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>", re.S)


def _check_depth(text: str, source: str) -> None:
    """Refuse elements nested deeper than :data:`MAX_XML_DEPTH`, counted in one pass without recursion."""
    depth = 0
    for m in _TAG.finditer(text):
        if m.group(0).startswith(("<!", "<?")):
            continue
        if m.group(1):
            depth -= 1
        elif not m.group(2):
            depth += 1
            if depth > MAX_XML_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise CollsimError(f"{source}: elements nested deeper than {MAX_XML_DEPTH} levels (line {line}): NCCL topology "
                                   "files nest about 10; pass the file NCCL_TOPO_DUMP_FILE wrote")


def _walk(elem, switch, node: XmlNode) -> None:
    for child in elem:
        if child.tag != "pci":
            if child.tag in ("cpu", "nic"):
                _walk(child, switch if child.tag == "nic" else None, node)
            continue
        cls = (child.get("class") or "").lower()
        busid = (child.get("busid") or "").lower()
        if cls.startswith(PCI_SWITCH_CLASS):
            _walk(child, busid, node)   # devices below share this switch
            continue
        gpu = child.find("gpu")
        if gpu is not None or cls.startswith(GPU_CLASS) or cls.startswith("0x0300"):
            node.gpus.append(_gpu(gpu, busid, switch))
            node.gpus[-1]["gts"] = _number((child.get("link_speed") or "").split(" ")[0], f"<pci busid={busid!r}> link_speed")
        nets = [net for nic in child.findall("nic") for net in nic.findall("net")]
        if nets:
            node.nics += [{"busid": busid, "name": n.get("name", ""), "mbps": _speed(n), "switch": switch}
                          for n in nets]
        elif gpu is None and cls.startswith(NIC_CLASSES):
            node.nics.append({"busid": busid, "name": "", "mbps": None, "switch": switch})
        _walk(child, switch, node)
    for nic in elem.findall("nic") if elem.tag == "cpu" else ():   # a NIC right under <cpu> (socket NICs in dumps)
        for n in nic.findall("net"):
            node.nics.append({"busid": "", "name": n.get("name", ""), "mbps": _speed(n), "switch": None})


def _gpu(gpu, busid: str, switch) -> dict:
    info = {"busid": busid, "sm": None, "links": 0, "nvswitch": False, "mesh": False, "switch": switch, "gts": None,
            "collapsed": False, "nv_peers": None}
    if gpu is None:
        return info
    peers = set()
    sm = _number(gpu.get("sm"), f"<gpu busid={busid!r}> sm")
    if sm is not None and not 0 < sm < 10_000:
        raise CollsimError(f"<gpu busid={busid!r}> has sm={gpu.get('sm')!r}: the compute capability is a number such as 80 or 90")
    info["sm"] = int(sm) if sm is not None else None
    for link in gpu.findall("nvlink"):
        raw = _number(link.get("count"), f"<nvlink> of GPU {busid!r} count")
        if raw is not None and not (raw.is_integer() and 0 <= raw <= 64):
            raise CollsimError(f"<nvlink> of GPU {busid!r} has count={link.get('count')!r}: a whole number of links from 0 to 64")
        count = int(raw or 0)
        info["links"] += count
        tclass = (link.get("tclass") or "").lower()
        collapsed = (link.get("target") or "").lower().startswith("fffffff")   # a VM's view of the NVSwitch fabric
        if tclass.startswith(BRIDGE_CLASS) or collapsed:
            info["nvswitch"] = True
            info["collapsed"] = info["collapsed"] or collapsed
        elif tclass.startswith(GPU_CLASS) or not tclass:
            info["mesh"] = True
            peers.add((link.get("target") or "").lower())
    # the GPUs it links to, where every row names its target: a mesh must reach every peer
    info["nv_peers"] = sorted(peers) if "" not in peers else None
    return info


def _speed(net) -> float | None:
    """A <net>'s speed (Mb/s), None where not given; zero or less is no NIC's speed (refused, not taken for absent)."""
    mbps = _number(net.get("speed"), "<net> speed")
    if mbps is not None and mbps <= 0:
        raise CollsimError(f"<net name={net.get('name', '')!r}> speed={net.get('speed')!r}: a NIC's speed is a positive "
                           "number of Mb/s (e.g. 400000); pass the file NCCL_TOPO_DUMP_FILE wrote, unedited")
    return mbps


def _number(text, what: str = "an attribute"):
    """A finite number from an attribute; None where the attribute is absent or empty. One that is there but
    is no finite number (``inf``, ``nan``, ``fast``) is refused: read as absent, it made the node's NVLinks
    vanish or its NICs take the platform's speed in silence (a hostile tester's trial, twenty-ninth pass)."""
    if text is None or not str(text).strip():
        return None
    try:
        f = float(text)
    except (TypeError, ValueError, OverflowError):
        f = math.nan
    if not math.isfinite(f):
        raise CollsimError(f"{what}={str(text)[:40]!r} is not a finite number: NCCL writes digits there; pass the file "
                           "NCCL_TOPO_DUMP_FILE wrote, unedited")
    return f


def node_preset_from_xml(path: str, params: dict[str, str]) -> tuple[str, list[str]]:
    """Read the NCCL topology XML at ``path`` and return the preset spec that builds its node (with the
    user's other spec keys, e.g. ``nodes=2``) and what was read, line by line. :func:`sim.presets.load_topology`
    builds it, so this module never imports the presets (no cycle)."""
    from ..io.safe_io import read_input
    text = read_input(path, "NCCL topology XML", MAX_XML_BYTES, binary=True).decode("utf-8", errors="replace")
    node = parse_topology_xml(text, path)
    if len(node.gpus) < 2 and params.get("nodes", "1") == "1":
        raise CollsimError(f"{path} lists one GPU: a collective runs across 2 or more GPUs, so one such node has none to "
                           f"simulate; give nodes=N for a cluster of N of them ({os.path.basename(path)}:nodes=2), or pass the "
                           "dump of a node with several GPUs")
    return preset_for(node, params, path)


def mesh_pair_links(node: XmlNode) -> int | None:
    """NVLinks between each pair of GPUs of a direct mesh: nvidia-smi's NV# (a pair's links), else a GPU's
    links shared evenly among its peers (NCCL's XML lists a GPU's own); None where they do not share evenly."""
    links = Counter(g["links"] for g in node.gpus).most_common(1)[0][0] if node.gpus else 0
    peers = len(node.gpus) - 1
    if node.nvlink_listed:
        return links or None
    return links // peers if links and peers and links % peers == 0 else None


def preset_for(node: XmlNode, params: dict[str, str], path: str, scales_mesh: bool = False) -> tuple[str, list[str]]:
    """The preset spec that builds this node (with the user's other keys), and what was read, line by line.
    ``scales_mesh``: the caller gives a direct mesh its own NVLinks per pair (:func:`mesh_pair_links`) where the
    preset has another count, so the lines say so (else they say the preset's figure holds)."""
    params = dict(params)
    gpu_name = params.pop("gpu", None)
    name = os.path.basename(path)
    sms = Counter(g["sm"] for g in node.gpus if g["sm"] is not None)
    read = [f"{name}: {len(node.gpus)} GPU(s), {len(node.nics)} NIC port(s), {node.cpus} CPU socket(s)/NUMA node(s)"]
    arch = _architecture(sms, gpu_name, path, read)
    links = Counter(g["links"] for g in node.gpus)
    nvswitch = any(g["nvswitch"] for g in node.gpus)
    mesh = any(g["mesh"] for g in node.gpus) and not nvswitch
    nlinks = links.most_common(1)[0][0]
    if nlinks:
        collapsed = any(g["collapsed"] for g in node.gpus)
        if mesh and node.nvlink_listed:   # nvidia-smi prints the links between a pair (NV#), not a GPU's total
            read.append(f"NVLink: NV{nlinks} between every pair of GPUs, a direct GPU-to-GPU mesh (no NVSwitch)")
        else:
            read.append(f"NVLink: {nlinks} links per GPU" + (" to NVSwitch" + (" (one collapsed fffffff:ff:ff.0 target, as "
                                                                                 "VMs dump it)" if collapsed else "")
                                                             if nvswitch else " in a direct GPU-to-GPU mesh"))
    elif sms or node.nvlink_listed:
        read.append("no NVLink: no NV# in the matrix" if node.nvlink_listed else "NVLink: none listed")
    else:
        nvswitch = arch in NVSWITCH_PRESET     # input files list no <nvlink>: the named platform's NVSwitch
        read.append(f"NVLink: not in the file; gpu={gpu_name}'s platform has {'NVSwitch' if nvswitch else 'no NVSwitch'}")
    _refuse_partial_nvlink(node, any(g["links"] for g in node.gpus) and not nvswitch, arch, path)
    if mesh and (arch not in MESH_PRESET or len(node.gpus) > MESH_GPUS):
        raise CollsimError(f"{path}: {len(node.gpus)} {arch} GPUs linked directly by NVLink (no NVSwitch) have no preset: the "
                           f"mesh presets are {', '.join(f'{p} ({a})' for a, p in MESH_PRESET.items())}, "
                           f"{PCIE_HOPPER_MESH} (hopper on x86), {MESH_GPUS} GPUs "
                           "at most; describe the node as a .yaml topology")
    rails, fastest = _rails(node, read)
    pairs = _placement(node)
    if pairs:
        read.append(f"PCIe: {pairs} of {len(node.gpus)} GPUs share a PCIe switch with a NIC (GPUDirect RDMA without the CPU)")
    # where the NICs attach decides NCCL's LL128 across nodes (only up to PXB): the matrix says it, else the placement
    # (a file that shows no PCIe switch at all, as VMs dump it, says nothing about where the NICs attach)
    shows_switches = any(g["switch"] for g in node.gpus) or any(n["switch"] for n in node.nics)
    nic_path = node.nic_path or (("PXB" if pairs else "PHB") if node.nics and shows_switches else None)
    far = 0
    mesh_preset = _mesh_preset(arch, gpu_name, node.cpu_arch) if mesh else None
    pcie_nics = mesh and node.gpu_nic_paths and mesh_preset in MESH_PCIE_NICS
    # a PCIe mesh from an XML: its PCIe tree says where the NICs attach (a GPU beside a NIC under one switch: PXB,
    # else PHB), and that path holds
    tree_path = mesh and not pcie_nics and mesh_preset in MESH_PCIE_NICS and nic_path is not None
    if pcie_nics:
        nic_path, far = _mesh_nic_paths(node, read)
    elif mesh and not tree_path:   # the preset's own path (gh200-4: PHB, as CSCS and Sigma2 run it; hgx-a100-4: PHB)
        nic_path = None
        if node.nics and mesh_preset not in MESH_PCIE_NICS:
            read.append("PCIe: Grace Hopper GPUs reach their NICs over NVLink-C2C: the matrix's NIC paths are not "
                        "GPUDirect's, so the preset's nic_path holds")
        elif node.nics:
            read.append("PCIe: the file gives no NIC path for every GPU (nvidia-smi's NIC columns), so the preset's "
                        "nic_path holds")
    nic_behind_cpu = through_cpu(nic_path)
    if nic_behind_cpu:
        read.append(f"PCIe: GPU to NIC is {nic_path} (through the CPU): NCCL keeps LL128 off across nodes")
    if mesh:
        preset, keys = str(mesh_preset), _node_keys(node, rails, fastest)
        if pcie_nics:
            keys.update(nic_path=str(nic_path), gpus_without_gdr=str(far))
        elif tree_path:
            keys["nic_path"] = str(nic_path)
        _mesh_links_line(node, preset, scales_mesh, read)
    elif nvswitch and arch in NVSWITCH_PRESET:
        preset = "dgx-h200" if arch == "hopper" and (gpu_name or "").lower() in H200_NAMES else NVSWITCH_PRESET[arch]
        keys = _node_keys(node, rails, fastest)
        if len(rails) > len(node.gpus):
            read.append(f"NICs: {len(rails)} NIC ports for {len(node.gpus)} GPUs (several per GPU)")
        if nic_behind_cpu:
            keys["nic_path"] = str(nic_path)   # through_cpu: a path, never None
    elif not nlinks:
        gen = _pcie_gen(node)
        preset, keys = "pcie", _pcie_keys(node, gen, arch)
        read.append(f"PCIe Gen{gen} between GPUs (no NVLink)")
        if "sockets" in keys:
            read.append(f"PCIe: {node.sockets} socket(s), {keys['gpus_per_switch']} GPU(s) per PCIe switch or root port "
                        "(NCCL uses peer-to-peer only under one switch: the rest goes through host memory)")
        if node.nics:
            read.append(f"NICs: the pcie preset models one server, so its {len(node.nics)} NIC(s) carry nothing here")
        clusterwide = sorted(k for k in params if k in ("nodes", "fabric", "nic_gbps", "nics_per_node", "sharp"))
        if clusterwide:
            raise CollsimError(f"{path}: a server of PCIe GPUs without NVLink builds as the pcie preset, which models "
                               f"one server: {', '.join(clusterwide)} cannot be given to it (describe a cluster of such "
                               "servers as a .yaml topology)")
    else:
        raise CollsimError(f"{path}: {arch} GPUs on NVSwitch have no preset to build from: describe the node as a .yaml topology")
    keys.update(params)          # the user's keys win: nodes=, fabric=, nic_gbps=...
    spec = preset + ":" + ",".join(f"{k}={v}" for k, v in keys.items())
    read.append(f"builds as: {spec}")
    if nlinks and preset in PRESET_LINKS and nlinks != PRESET_LINKS[preset]:
        read.append(f"note: the file lists {nlinks} NVLinks per GPU, the {preset} preset models {PRESET_LINKS[preset]}: "
                    "the NVLink bandwidth is the preset's")
    return spec, read


def _pcie_keys(node: XmlNode, gen: int, arch: str) -> dict[str, str]:
    """The pcie preset's keys for this node's GPUs (sockets and PCIe switches where the source says them)."""
    keys = {"gpus": str(len(node.gpus)), "gen": str(gen), "arch": arch}
    if node.sockets > 1 or 0 < node.gpus_per_switch < len(node.gpus):
        keys.update(sockets=str(node.sockets), gpus_per_switch=str(node.gpus_per_switch or len(node.gpus) // node.sockets))
    return keys


# the PCIe generation each architecture's GPUs have (V100 Gen3, A100 Gen4, H100/H200/H20 and B200 Gen5), for a
# suggestion only: a source that gives no link speed builds at _pcie_gen's Gen4
ARCH_PCIE_GEN = {"volta": 3, "ampere": 4, "hopper": 5, "blackwell": 5}


def _refuse_partial_nvlink(node: XmlNode, direct: bool, arch: str, path: str) -> None:
    """Refuse NVLink between some GPU pairs only (bridged pairs, as on H100 NVL or RTX boards): every NVLink
    preset joins every pair, so such a node built as one runs its rings at NVLink speed where the real
    ones cross PCIe between the pairs. ``direct``: the node has NVLink and no NVSwitch."""
    n = len(node.gpus)
    known = [p for g in node.gpus for p in [g.get("nv_peers")] if p is not None]
    if not direct or n < 2 or len(known) < n or all(len(p) >= n - 1 for p in known):   # (None: the source does not say)
        return
    pairs = sorted({tuple(sorted((g["busid"], p))) for g in node.gpus for p in g["nv_peers"]})
    shown = ", ".join(f"{a}-{b}" for a, b in pairs[:4]) + (", ..." if len(pairs) > 4 else "")
    gen = _pcie_gen(node) if any(g["gts"] for g in node.gpus) else ARCH_PCIE_GEN.get(arch, 4)
    keys = _pcie_keys(node, gen, arch)
    spec = "pcie:" + ",".join(f"{k}={v}" for k, v in keys.items())
    ring = _nvlink_ring(node)
    if ring is not None:   # a DGX-1-style cube-mesh: NCCL's rings stay on NVLink, the PCIe spec would be far too slow
        raise CollsimError(f"{path}: NVLink joins some GPU pairs only ({shown}: {len(pairs)} of {n * (n - 1) // 2} pairs), "
                           f"yet a ring can stay on NVLink ({'-'.join(map(str, ring))}), as NCCL's do (DGX-1 and AWS p3 "
                           "hybrid cube-mesh): collsim does not search rings over such a graph, so it cannot model this "
                           f"node yet; -t {spec} is only a floor (NVLink unused), and "
                           "examples/topologies/dgx1-hybrid-cube-mesh.yaml draws the links but runs its ring in rank order")
    raise CollsimError(f"{path}: NVLink joins some GPU pairs only ({shown}: {len(pairs)} of {n * (n - 1) // 2} pairs) and "
                       "collsim's NVLink presets join every pair, which would run this node far too fast: describe it "
                       f"by its PCIe paths, -t {spec} (its NVLink pairs left out: a ring still crosses PCIe between "
                       "them), or as a .yaml topology with the NVLink pairs as links")


def _nvlink_ring(node: XmlNode) -> list[int] | None:
    """A ring through every GPU of ``node`` on NVLink pairs only (GPU indices from 0), or None where there is
    none (bridged pairs: a ring must cross PCIe). Up to 8 GPUs: 5,040 orders at most."""
    n = len(node.gpus)
    if n > 8:
        return None
    index = {g["busid"]: i for i, g in enumerate(node.gpus)}
    peers = [{index[p] for p in g["nv_peers"] if p in index} for g in node.gpus]
    for rest in itertools.permutations(range(1, n)):
        order = [0, *rest]
        if all(order[(i + 1) % n] in peers[order[i]] for i in range(n)):
            return order
    return None


def _mesh_preset(arch: str, gpu_name: str | None, cpu_arch: str | None = None) -> str:
    """The mesh preset of ``arch``'s board: a Hopper mesh is Grace Hopper's (``gh200-4``) unless ``gpu=`` names a
    PCIe Hopper model (h100, h200, h800, h20) or an NCCL XML's ``<cpu arch>`` is x86 (``hgx-h100-4``: H100 SXM
    on an x86 host, whose NICs its PCIe paths describe)."""
    name = (gpu_name or "").lower()
    if arch == "hopper" and name not in SUPERCHIP_NAMES and (name in PCIE_HOPPER_NAMES or (cpu_arch or "").startswith("x86")):
        return PCIE_HOPPER_MESH
    return MESH_PRESET[arch]


def _mesh_links_line(node: XmlNode, preset: str, scales_mesh: bool, read: list[str]) -> None:
    """Say how many NVLinks join each GPU pair against the mesh preset's, and whose figure the build uses."""
    pair, own = mesh_pair_links(node), MESH_PAIR_LINKS.get(preset)
    if pair is None or own is None or pair == own:
        return
    if scales_mesh:
        read.append(f"NVLink: {pair} links per GPU pair where the {preset} preset has {own}: each pair's NVLink "
                    f"bandwidth is scaled by {pair}/{own}")
    else:
        read.append(f"note: the file has {pair} NVLinks per GPU pair, the {preset} preset models {own}: the NVLink "
                    "bandwidth is the preset's")


def _architecture(sms: Counter, gpu_name: str | None, path: str, read: list[str]) -> str:
    """The GPU architecture: the file's ``<gpu sm=>``, else the spec's ``gpu=`` (which must not contradict it)."""
    name = os.path.basename(path)
    if sms:
        sm = sms.most_common(1)[0][0]
        arch = SM_ARCH.get(sm // 10)
        if arch is None:
            raise CollsimError(f"{path}: GPU sm={sm} is not an architecture collsim models (Volta 70, Ampere 80, Hopper 90, "
                               "Blackwell 100)")
        read.append(f"GPU architecture: sm={sm} -> {arch}")
        if gpu_name and GPU_NAMES.get(gpu_name.lower()) not in (None, arch):
            raise CollsimError(f"{path}: gpu={gpu_name} contradicts the file's sm={sm} ({arch}): drop gpu=")
        return arch
    if gpu_name:
        named = GPU_NAMES.get(gpu_name.lower())
        if named is None:
            raise CollsimError(f"gpu={gpu_name!r} is not one collsim knows: use one of {', '.join(GPU_NAMES)}")
        read.append(f"GPU architecture: not in the file (no <gpu sm=>); gpu={gpu_name} -> {named}")
        return named
    raise CollsimError(f"{path} names no GPU architecture (no <gpu sm=...>: NCCL_TOPO_FILE inputs such as Azure's often "
                       f"omit it): add it to the spec, e.g. {name}:gpu=a100 or {name}:gpu=h100")


def _rails(node: XmlNode, read: list[str]) -> tuple[list[dict], float | None]:
    """The NIC ports that carry traffic (the fastest; slower management ports left out) and their speed (Mb/s)."""
    speeds = [n["mbps"] for n in node.nics if n["mbps"]]
    fastest = max(speeds) if speeds else None
    rails = [n for n in node.nics if fastest is None or n["mbps"] == fastest]
    slower = len(node.nics) - len(rails)
    if fastest:
        read.append(f"NICs: {len(rails)} x {fastest / 1000:g} Gb/s (net speed {fastest:g} Mb/s)"
                    + (f"; {slower} slower port(s) left out" if slower else ""))
    elif node.nics and node.nvlink_listed:   # nvidia-smi topo -m: no speeds at all
        read.append(f"NICs: {len(rails)} (nvidia-smi gives no NIC speed: the platform's, unless nic_gbps= says it)")
    elif node.nics:
        read.append(f"NICs: {len(rails)} (no <net speed>: the platform's NIC speed)")
    else:
        read.append("NICs: none listed")
    return rails, fastest


def _node_keys(node: XmlNode, rails: list[dict], fastest: float | None) -> dict[str, str]:
    """The node preset keys every NVLink node reads the same way: its GPUs, its NIC ports and their speed."""
    keys = {"gpus_per_node": str(len(node.gpus))}
    if rails:
        keys["nics_per_node"] = str(len(rails))
    if fastest:
        keys["nic_gbps"] = f"{fastest / 1000:g}"
    return keys


def _mesh_nic_paths(node: XmlNode, read: list[str]) -> tuple[str, int]:
    """(nic_path, GPUs without GPUDirect) of a direct-mesh node from each GPU's nearest NIC: its rings and trees
    enter the node at the GPUs nearest a NIC and reach the others over NVLink, so that path is the node's;
    the GPUs beyond the host bridge (NODE, SYS) get no GPUDirect RDMA and no PXN relay (NCCL's paths.cc)."""
    nic_path = min(node.gpu_nic_paths, key=NIC_PATHS.index)
    far = sum(NIC_PATHS.index(p) > NIC_PATHS.index("PHB") for p in node.gpu_nic_paths)
    read.append(f"PCIe: the GPUs nearest a NIC are at {nic_path}; {far} of {len(node.gpus)} reach no NIC within the "
                "host bridge (NODE or SYS): no GPUDirect RDMA for their all_to_all sends")
    return nic_path, far


def _placement(node: XmlNode) -> int:
    nic_switches = {n["switch"] for n in node.nics if n["switch"]}
    return sum(1 for g in node.gpus if g["switch"] and g["switch"] in nic_switches)


def _pcie_gen(node: XmlNode) -> int:
    """PCIe generation from the GPUs' ``link_speed`` (8 GT/s Gen3, 16 Gen4, 32 Gen5, 64 Gen6); Gen4 if absent."""
    gts = Counter(g["gts"] for g in node.gpus if g["gts"]).most_common(1)
    return {8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}.get(gts[0][0], 4) if gts else 4
