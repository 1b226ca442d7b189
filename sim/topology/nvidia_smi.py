"""``nvidia-smi topo -m`` (the GPU/NIC connection matrix ``collsim env`` captures) as a topology.

The matrix says, for every pair of GPUs, ``NV#`` (a bonded set of # NVLinks) or how PCIe connects
them (``PIX`` one bridge, ``PXB`` several, ``PHB`` the host bridge, ``NODE`` within a NUMA node,
``SYS`` across sockets), and the same for GPU/NIC pairs. What it does not say is the GPU model and
the NIC speed, so the GPU comes from the spec (``FILE:gpu=h100``) or from a GPU name printed in the
same text (``NVIDIA H100 80GB HBM3`` in ``nvidia-smi -L`` or ``collsim env`` output), and the NIC
speed is the platform's unless ``nic_gbps=`` says otherwise.

Every GPU pair at ``NV#`` with the same ``#`` on more than two GPUs is an NVSwitch node with # links
per GPU when no GPU has that many links to give each of its peers (# x peers beyond
:data:`MAX_GPU_NVLINKS`: 18 links to each of 7 peers); otherwise the GPUs are a direct mesh, as on the
4-GPU A100 and GH200 boards (``NV4`` and ``NV6`` between every pair). No NVLink at all is a PCIe node. The
node is then built as for an NCCL topology XML (:func:`sim.topology.nccl_xml.preset_for`), with each GPU's
nearest NIC (its NIC column), which a mesh node's preset needs: the GPUs that reach no NIC within the host
bridge (``NODE``, ``SYS``) have no GPUDirect RDMA (``gpus_without_gdr``).

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
from .nccl_xml import XmlNode, preset_for

MAX_TEXT_BYTES = 1 << 20
MAX_GPU_NVLINKS = 18   # the most NVLinks a GPU collsim models has (Hopper, Blackwell): beyond, the links go to switches
_DEVICE = r"(?:GPU|NIC)\d+|mlx5_\d+"
_GPU_NAME = re.compile(r"NVIDIA\s+(GB200|B200|H200|H100|H800|H20|A100|A800|V100)\b", re.I)


def parse_nvidia_smi_topo(text: str, source: str = "<text>") -> tuple[XmlNode, str | None]:
    """The node the matrix describes, and the GPU name found in the text (or None)."""
    lines = [ln.rstrip("\n") for ln in text.splitlines()]
    head = next((i for i, ln in enumerate(lines) if re.search(r"\bGPU0\b", ln) and ("GPU1" in ln or "Affinity" in ln)
                 and not re.match(r"\s*GPU0\s+X\b", ln)), None)
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
    numa = {rows[g][len(devs) + 1] for g in gpus if len(rows[g]) > len(devs) + 1 and rows[g][len(devs) + 1]}
    node = XmlNode(cpus=len(numa) or 1, nvlink_listed=True)   # the NUMA Affinity column; the matrix shows every NV#
    row_of = {g: dict(zip(devs, rows[g])) for g in gpus}    # each GPU's row: device -> path
    for g in gpus:
        by_dev = row_of[g]
        nv = [int(m.group(1)) for d in gpus if d != g for m in [re.fullmatch(r"NV(\d{1,3})", by_dev.get(d, ""))] if m]
        links = Counter(nv).most_common(1)[0][0] if nv else 0
        switch = next((f"pix:{g}" for d in nics if by_dev.get(d) in ("PIX", "PXB")), None)
        # the same NV# to every peer, more links than a GPU has to give them all directly: an NVSwitch
        uniform = len(gpus) > 2 and len(set(nv)) == 1 and len(nv) == len(gpus) - 1
        nvswitch = uniform and links * len(nv) > MAX_GPU_NVLINKS
        node.gpus.append({"busid": g, "sm": None, "links": links, "nvswitch": nvswitch, "mesh": bool(nv) and not nvswitch,
                          "switch": switch, "gts": None, "collapsed": False})
    for n in nics:
        by_dev = dict(zip(devs, rows.get(n, [])))
        near = next((g for g in gpus if by_dev.get(g) in ("PIX", "PXB")), None)
        node.nics.append({"busid": n, "name": n, "mbps": None, "switch": f"pix:{near}" if near else None})
    between = {(a, b): row_of[a].get(b) for a in gpus for b in gpus if a != b}
    node.sockets = 2 if "SYS" in between.values() else 1
    groups = {a: 1 + sum(1 for b in gpus if b != a and between[(a, b)] in ("PIX", "PXB")) for a in gpus}
    if len(set(groups.values())) == 1 and len(gpus) % groups[gpus[0]] == 0:
        node.gpus_per_switch = groups[gpus[0]]
    paths = [min((c for d in nics for c in [row_of[g].get(d)] if c in NIC_PATHS), key=NIC_PATHS.index, default=None)
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
    if "gpu" not in params and name:
        params["gpu"] = name
    if "gpu" not in params:
        raise CollsimError(f"{path}: `nvidia-smi topo -m` does not name the GPU model and the text holds no GPU name: add it, "
                           f"e.g. --from-nvidia-smi {path}:gpu=h100 (a100, h100, h200, h20, b200...)")
    spec_out, read = preset_for(node, params, path)
    read[0] = read[0].replace("NIC port(s)", "NIC(s)") + " (nvidia-smi topo -m)"
    if name:
        read.insert(1, f"GPU name in the text: NVIDIA {name.upper()}")
    read += node.notes
    from ..presets import load_topology
    from . import Topology
    topo = load_topology(spec_out)
    hardware = replace(topo.hardware, source_nvidia_smi=os.path.abspath(path), xml_preset=spec_out, xml_read=tuple(read))
    return Topology.build(f"{os.path.basename(path)}({topo.name})", topo.nodes, topo.links, hardware)
