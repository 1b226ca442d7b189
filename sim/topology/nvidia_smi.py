"""``nvidia-smi topo -m`` (the GPU/NIC connection matrix ``collsim env`` captures) as a topology.

The matrix says, for every pair of GPUs, ``NV#`` (a bonded set of # NVLinks) or how PCIe connects
them (``PIX`` one bridge, ``PXB`` several, ``PHB`` the host bridge, ``NODE`` within a NUMA node,
``SYS`` across sockets), and the same for GPU/NIC pairs. What it does not say is the GPU model and
the NIC speed, so the GPU comes from the spec (``FILE:gpu=h100``) or from a GPU name printed in the
same text (``NVIDIA H100 80GB HBM3`` in ``nvidia-smi -L`` or ``collsim env`` output), and the NIC
speed is the platform's unless ``nic_gbps=`` says otherwise.

Every cell is checked before anything is read from it: the words nvidia-smi prints (``X`` on the diagonal
only, ``NV#`` between GPUs only, the five PCIe paths, ``SOC`` as old drivers wrote ``SYS``) and the same
path both ways; a matrix that breaks either was edited or garbled, and is refused with its row and column.

Every GPU pair at ``NV#`` on more than two GPUs is an NVSwitch node with # links per GPU when no GPU has
that many links to give each of its peers (# x peers beyond :data:`MAX_GPU_NVLINKS`: 18 links to each of 7
peers); otherwise the GPUs are a direct mesh, as on the 4-GPU A100 and GH200 boards (``NV4`` and ``NV6``
between every pair), built at the matrix's ``NV#`` per pair (:func:`with_mesh_pair_links`). NVLink between
some pairs only (bridged pairs, as on H100 NVL) is refused: every NVLink preset joins every pair. No NVLink
at all is a PCIe node. The node is then built as for an NCCL topology XML
(:func:`sim.topology.nccl_xml.preset_for`), with each GPU's nearest NIC (its NIC column), which a mesh node's
preset needs: the GPUs that reach no NIC within the host bridge (``NODE``, ``SYS``) have no GPUDirect RDMA
(``gpus_without_gdr``).

>>> import os
>>> f = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "nccl_topo", "h20-nvidia-smi-topo.txt")
>>> t = load_topology_nvsmi(f + ":gpu=h20")
>>> t.meta["gpu_arch"], t.nranks, t.meta["nics_per_node"]
('hopper', 8, 8)
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import replace

from ..errors import CollsimError
from .hardware import NIC_PATHS
from .nccl_xml import XmlNode, mesh_pair_links, preset_for

MAX_TEXT_BYTES = 1 << 20
MAX_GPU_NVLINKS = 18   # the most NVLinks a GPU collsim models has (Hopper, Blackwell): beyond, the links go to switches
_DEVICE = r"(?:GPU|NIC)\d+|mlx5_\d+"
_GPU_NAME = re.compile(r"(?:NVIDIA|Tesla)\s+(GB200|B200|H200|H100|H800|H20|A100|A800|V100)\b", re.I)   # Volta cards print "Tesla V100-SXM2-16GB"
# the cells nvidia-smi prints (its legend): X, the device itself; NV#, a bonded set of # NVLinks (NV1 up to NV18
# on the GPUs of today); the PCIe paths of NIC_PATHS. Older drivers printed SOC where today's print SYS.
_NV = re.compile(r"NV([1-9]\d?)")
_OLD_NAMES = {"SOC": "SYS"}
_VOCABULARY = "X (the device itself), NV# (# NVLinks, e.g. NV12) or a PCIe path (PIX, PXB, PHB, NODE, SYS)"


def _header(lines: list[str]) -> int | None:
    """The index of the matrix's header line (GPU0 GPU1 ... or GPU0 ... CPU Affinity), or None."""
    return next((i for i, ln in enumerate(lines) if re.search(r"\bGPU0\b", ln) and ("GPU1" in ln or "Affinity" in ln)
                 and not re.match(r"\s*GPU0\s+X\b", ln)), None)


def _cells(rows: dict[str, list[str]], devs: list[str], gpus: list[str], source: str) -> dict[tuple[str, str], str]:
    """Every (row, column) cell between listed devices, checked: the words nvidia-smi prints, X on the diagonal
    only, NV# between GPUs only, and the same path both ways (nvidia-smi prints one path per pair). A matrix
    that breaks any of these was edited or garbled, and a guess at it builds the wrong machine."""
    cell: dict[tuple[str, str], str] = {}
    for r in (d for d in devs if d in rows):
        if len(rows[r]) < len(devs):
            raise CollsimError(f"{source}: row {r} has {len(rows[r])} cells for the {len(devs)} device columns: pass the "
                               "whole `nvidia-smi topo -m` output as nvidia-smi printed it")
        for c, raw in zip(devs, rows[r]):
            value = _OLD_NAMES.get(raw, raw)
            where = f"{source}: row {r}, column {c} reads {raw!r}"
            if value not in NIC_PATHS and value != "X" and not _NV.fullmatch(value):
                raise CollsimError(f"{where}, which `nvidia-smi topo -m` never prints: a cell is {_VOCABULARY}; pass the "
                                   "matrix as nvidia-smi printed it")
            if (value == "X") != (r == c):
                raise CollsimError(f"{where}: X marks a device's own cell, and only that one; pass the matrix as "
                                   "nvidia-smi printed it")
            if _NV.fullmatch(value) and not (r in gpus and c in gpus):
                raise CollsimError(f"{where}: NVLink joins GPUs only, a NIC's cell is a PCIe path (PIX, PXB, PHB, NODE, "
                                   "SYS); pass the matrix as nvidia-smi printed it")
            cell[r, c] = value
    for (r, c), value in cell.items():
        back = cell.get((c, r), value)
        if back != value:
            raise CollsimError(f"{source}: row {r}, column {c} reads {value} but row {c}, column {r} reads {back}: "
                               "nvidia-smi prints the same path both ways, so the matrix was edited or garbled; save "
                               "`nvidia-smi topo -m` again")
    return cell


def parse_nvidia_smi_topo(text: str, source: str = "<text>") -> tuple[XmlNode, str | None]:
    """The node the matrix describes, and the GPU name found in the text (or None)."""
    lines = [ln.rstrip("\n") for ln in text.splitlines()]
    head = _header(lines)
    if head is None:
        raise CollsimError(f"{source} holds no `nvidia-smi topo -m` matrix (a header line with GPU0 GPU1 ... columns): "
                           "save the output of `nvidia-smi topo -m` to a file")
    # the device columns, in order (a header re-typed with single spaces, as documentation pages show it,
    # still names them: "mlx5_1 CPU Affinity")
    devs = re.findall(rf"(?<!\S)(?:{_DEVICE})(?!\S)", lines[head])
    rows: dict[str, list[str]] = {}
    for ln in lines[head + 1:]:
        cells = [c.strip() for c in ln.split("\t")] if "\t" in ln else ln.split()
        if not cells or not re.fullmatch(_DEVICE, cells[0]):
            if rows:
                break
            continue
        rows[cells[0]] = cells[1:]
    gpus = [d for d in devs if d.startswith("GPU")]
    nics = [d for d in devs if not d.startswith("GPU")]
    if len(gpus) < 1 or any(g not in rows for g in gpus):
        raise CollsimError(f"{source}: the matrix has no row for every GPU column: pass the whole `nvidia-smi topo -m` output")
    cell = _cells(rows, devs, gpus, source)
    numa = {rows[g][len(devs) + 1] for g in gpus if len(rows[g]) > len(devs) + 1 and rows[g][len(devs) + 1]}
    node = XmlNode(cpus=len(numa) or 1, nvlink_listed=True)   # the NUMA Affinity column; the matrix shows every NV#
    nv = {(a, b): int(m.group(1)) for a in gpus for b in gpus for m in [_NV.fullmatch(cell[a, b])] if m}
    # every pair at NV#, more links than a GPU has to give its peers directly (# x peers beyond MAX_GPU_NVLINKS):
    # the links go to an NVSwitch. A pattern with some pairs only is neither switch nor mesh (preset_for refuses it).
    full = len(nv) == len(gpus) * (len(gpus) - 1)
    nvswitch = full and len(gpus) > 2 and max(sum(nv.get((a, b), 0) for b in gpus) for a in gpus) > MAX_GPU_NVLINKS
    if full and not nvswitch and len(set(nv.values())) > 1:
        counts = ", ".join(f"NV{k} x {v // 2}" for k, v in sorted(Counter(nv.values()).items()))
        raise CollsimError(f"{source}: the GPU pairs have different NVLink counts ({counts} pairs): collsim's NVLink mesh "
                           "presets give every pair the same links; describe the node as a .yaml topology")
    # the PCIe switch a GPU shares with a NIC (PIX or PXB between them), named after that NIC, so every GPU
    # under one NIC's switch counts, not only the first
    near_nic = {g: next((n for n in nics if cell.get((g, n)) in ("PIX", "PXB")), None) for g in gpus}
    for g in gpus:
        row = [nv[g, b] for b in gpus if (g, b) in nv]
        links = Counter(row).most_common(1)[0][0] if row else 0
        node.gpus.append({"busid": g, "sm": None, "links": links, "nvswitch": nvswitch, "mesh": bool(row) and not nvswitch,
                          "switch": f"pix:{near_nic[g]}" if near_nic[g] else None, "gts": None, "collapsed": False,
                          "nv_peers": [b for b in gpus if (g, b) in nv]})
    for n in nics:
        near = any(cell.get((n, g)) in ("PIX", "PXB") for g in gpus)
        node.nics.append({"busid": n, "name": n, "mbps": None, "switch": f"pix:{n}" if near else None})
    between = {(a, b): cell[a, b] for a in gpus for b in gpus if a != b}
    node.sockets = 2 if "SYS" in between.values() else 1
    groups = {a: 1 + sum(1 for b in gpus if b != a and between[(a, b)] in ("PIX", "PXB")) for a in gpus}
    if len(set(groups.values())) == 1 and len(gpus) % groups[gpus[0]] == 0:
        node.gpus_per_switch = groups[gpus[0]]
    paths = [min((c for d in nics for c in [cell.get((g, d))] if c in NIC_PATHS), key=NIC_PATHS.index, default=None)
             for g in gpus]
    if nics and all(paths):
        node.nic_path = max(paths, key=NIC_PATHS.index)   # the farthest GPU's nearest NIC decides (NCCL: per channel)
        node.gpu_nic_paths = [str(p) for p in paths]
    if len(gpus) == 2 and node.gpus[0]["links"]:   # two GPUs bonded by NVLink: NVSwitch or bridge cannot be told apart
        node.gpus = [dict(g, nvswitch=True, mesh=False) for g in node.gpus]
        node.notes.append("two GPUs on NVLink: taken as an NVSwitch node")
    found = _GPU_NAME.search(text)
    return node, found.group(1).lower() if found else None


def load_topology_nvsmi(spec: str):
    """A Topology from ``FILE[:gpu=NAME,nodes=N,...]`` holding ``nvidia-smi topo -m`` output."""
    path, _, rest = spec.partition(":") if not os.path.isfile(spec) else (spec, "", "")
    from ..io.safe_io import read_input
    from ..presets import parse_spec
    params = parse_spec("x:" + rest)[1] if rest else {}
    text = read_input(path, "`nvidia-smi topo -m` output", MAX_TEXT_BYTES, binary=True).decode("utf-8", errors="replace")
    node, name = parse_nvidia_smi_topo(text, path)
    if len(node.gpus) < 2:   # (no NVLink: it would be the pcie preset, which has no nodes= either)
        raise CollsimError(f"{path}: the matrix shows one GPU ({node.gpus[0]['busid']}): a collective runs across 2 or more "
                           "GPUs, so a one-GPU machine has none to simulate; save `nvidia-smi topo -m` on a machine with "
                           "several GPUs")
    if "gpu" not in params and name:
        params["gpu"] = name
    if "gpu" not in params:
        raise CollsimError(f"{path}: `nvidia-smi topo -m` does not name the GPU model and the text holds no GPU name: add it, "
                           f"e.g. --from-nvidia-smi {path}:gpu=h100 (v100, a100, h100, h200, h20, b200...)")
    spec_out, read = preset_for(node, params, path, scales_mesh=True)
    read[0] = read[0].replace("NIC port(s)", "NIC(s)") + " (nvidia-smi topo -m)"
    if name:
        given = str(params.get("gpu", "")).lower()
        clash = f" (note: gpu={given} given, which is what builds)" if given and given != name else ""
        read.insert(1, f"GPU name in the text: {name.upper()}{clash}")
    read += node.notes
    from ..presets import load_topology
    from . import Topology
    topo = load_topology(spec_out)
    pair = mesh_pair_links(node)
    if pair and any(g["mesh"] for g in node.gpus):
        topo = with_mesh_pair_links(topo, pair)
    hardware = replace(topo.hardware, source_nvidia_smi=os.path.abspath(path), xml_preset=spec_out, xml_read=tuple(read))
    return Topology.build(f"{os.path.basename(path)}({topo.name})", topo.nodes, topo.links, hardware)


def with_mesh_pair_links(topo, pair_links: int):
    """``topo`` (a direct-mesh preset) with ``pair_links`` NVLinks between each pair of GPUs instead of the
    preset's: every NVLink scaled by the same factor, and the hardware facts the NCCL model reads with them
    (per-link speed unchanged, so NCCL's per-link figure holds; links per GPU and GB/s per GPU and per pair
    scaled). ``topo`` itself where it is no mesh or already has that many."""
    from . import Topology
    hw = topo.hardware
    if hw.nvswitch or not (hw.nvlink_pair_GBps and hw.nvlink_links and hw.nvlink_GBps):
        return topo
    per_link = hw.nvlink_GBps / hw.nvlink_links
    scale = pair_links * per_link / hw.nvlink_pair_GBps
    if abs(scale - 1) < 1e-9:
        return topo
    links = [replace(l, bandwidth_GBps=l.bandwidth_GBps * scale) if l.kind == "nvlink" else l for l in topo.links]
    hardware = replace(hw, nvlink_pair_GBps=pair_links * per_link, nvlink_GBps=hw.nvlink_GBps * scale,
                       nvlink_links=round(hw.nvlink_links * scale))
    return Topology.build(topo.name, topo.nodes, links, hardware)
