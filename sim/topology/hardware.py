"""The typed hardware description a topology carries (:attr:`sim.topology.Topology.hardware`).

Presets and readers (NCCL XML, ``nvidia-smi topo -m``, YAML/JSON files) fill it; the NCCL model, the flow
models and the budget read it by attribute. Every field is optional (None: not known; a textbook topology
such as ``ring:n=8`` knows none of them). Units are in the names: ``*_GBps`` GB/s per direction, ``nic_gbps``
Gb/s (the NIC's marketing speed), ``*_us`` microseconds.

``collsim topo --format json`` and topology files keep the ``meta`` mapping (DESIGN contract:
``meta.gpu_arch``, ``meta.nvswitch``, ``meta.nvlink_links``, ``meta.nics_per_node``, ``meta.nic_gbps``):
:meth:`Hardware.to_meta` writes the known fields in that shape and :meth:`Hardware.from_meta` reads it back,
refusing keys it does not know.

>>> hw = Hardware.from_meta({"gpu_arch": "hopper", "nvlink_links": 18, "nvswitch": True})
>>> hw.gpu_arch, hw.nvlink_links, hw.nics_per_node
('hopper', 18, None)
>>> hw.to_meta()
{'gpu_arch': 'hopper', 'nvlink_links': 18, 'nvswitch': True}
>>> Hardware.from_meta({"gpu_archh": "hopper"})
Traceback (most recent call last):
...
sim.errors.CollsimError: meta: unknown key(s) gpu_archh: did you mean gpu_arch?
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import CollsimError


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """Hardware facts of a topology, per node unless said (field order is ``meta``'s key order)."""

    gpu_arch: str | None = None          # volta | ampere | hopper | blackwell (NCCL's tables depend on it)
    gpu: str | None = None               # GPU model, e.g. H100-SXM
    nvlink_GBps: float | None = None     # per GPU per direction, raw (links x per-link GB/s)
    nvlink_links: int | None = None      # NVLink links per GPU
    intra: str | None = None             # nvlink | pcie: how GPUs of a node talk
    nvswitch: bool | None = None         # GPUs on an NVSwitch (else a direct mesh or PCIe)
    pcie_gen: int | None = None          # PCIe generation (3..6)
    p2p: bool | None = None              # GPU peer-to-peer over PCIe for every pair (False: some or all pairs bounce via host memory)
    # the NCCL_P2P_LEVEL a PCIe server's pairs were drawn under, where peer-to-peer was asked for (PIX, PXB, PHB,
    # NODE, SYS): pairs farther apart than it go through host memory, so ``p2p`` reads False with some pairs direct
    p2p_level: str | None = None
    nodes: int | None = None             # hosts (NVLink domains)
    gpus_per_node: int | None = None
    nics_per_node: int | None = None
    nic_path: str | None = None          # GPU -> nearest NIC as nvidia-smi topo -m prints it (NIC_PATHS)
    # GPUs of a node whose nearest NIC is beyond the host bridge (NODE/SYS): no GPUDirect RDMA at
    # NCCL_NET_GDR_LEVEL=PHB and no PXN relay, so NCCL stages their network traffic through host memory
    # (only point-to-point sends use them: rings and trees enter a node at the GPUs nearest its NICs)
    gpus_without_gdr: int | None = None
    nic_GBps: float | None = None        # per NIC per direction = nic_gbps / 8
    nic_gbps: float | None = None        # per NIC, Gb/s
    sharp: bool | None = None            # the network switches reduce (IB SHARP)
    nvls: bool | None = None             # the NVSwitch reduces (NVLink SHARP)
    nvls_sharp: bool | None = None       # multi-node NVLS (NVLS + IB SHARP) enabled
    cpu: str | None = None               # intel | amd | arm (NCCL's network overhead depends on it)
    nic_latency_us: float | None = None  # NIC <-> leaf
    pcie_GBps: float | None = None       # raw x16 per direction
    nvlink_latency_us: float | None = None  # GPU to GPU over NVLink
    oversubscription: float | None = None   # leaf uplinks: 1 non-blocking, 2 for 2:1
    nodes_per_leaf: int | None = None    # hosts per rail leaf (a rail-optimised fat tree); None: no such fabric
    fabric: str | None = None            # scale-out network (sim.nccl.calibration.FABRICS)
    nic_ports: int | None = None         # NIC ports drawn per host (NICs behind one GPU's switch are one port)
    nvlink_pair_GBps: float | None = None   # direct NVLink mesh: per pair per direction
    bandwidth_GBps: float | None = None  # textbook presets (ring, switch, ...): every link's bandwidth
    latency_us: float | None = None      # ... and latency
    symmetry: str | None = None          # "rotation": GPU i -> i+1 maps links onto links (the engine's fast path)
    gpus_per_process: int | None = None  # nccl-tests -g N: GPUs one process drives (launch mode)
    # where the facts came from (readers fill these; the model never reads them)
    source_xml: str | None = None
    source_nvidia_smi: str | None = None
    xml_preset: str | None = None        # the preset spec a reader derived
    xml_read: tuple[str, ...] | None = None   # what a reader read, one line per fact
    nccl_topo_dump: str | None = None
    sources: tuple[str, ...] | None = None
    read: tuple[str, ...] | None = None
    calibration: dict | None = None      # a topology written by ``collsim calibrate``: its fit (real.compare)
    # facts collsim does not model, from code that builds a topology with its own keys (Topology.build with
    # a mapping); the model never reads them, topology files may not give them (from_meta(strict=True))
    extra: dict | None = None

    @classmethod
    def from_meta(cls, meta: dict | Hardware | None, where: str = "meta", strict: bool = True) -> Hardware:
        """Validate a ``meta`` mapping (a topology file's, a preset's) into a Hardware; values of the wrong
        type are refused naming the key and the fix, and so are unknown keys when ``strict`` (else they are
        kept, unread, in :attr:`extra`)."""
        if meta is None:
            return cls()
        if isinstance(meta, Hardware):
            return meta
        if not isinstance(meta, dict):
            raise CollsimError(f"{where} must be a mapping of hardware facts (gpu_arch: hopper, ...), not {type(meta).__name__}")
        unknown = [str(k) for k in meta if k not in _TYPES or k == "extra"]
        if unknown and not strict:
            known = {k: v for k, v in meta.items() if k not in unknown}
            return replace(cls.from_meta(known, where), extra={k: meta[k] for k in unknown})
        if unknown:
            near = [m[0] for k in sorted(unknown) for m in [difflib.get_close_matches(k, _TYPES, n=1)] if m and m[0] != "extra"]
            fix = (f"did you mean {', '.join(near)}?" if near else
                   f"remove it or use one of {', '.join(k for k in _TYPES if k != 'extra')}")
            raise CollsimError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}: {fix}")
        return cls(**{k: _coerce(v, _TYPES[k], f"{where}.{k}") for k, v in meta.items() if v is not None})

    def to_meta(self) -> dict[str, Any]:
        """The known fields as a ``meta`` mapping (lists for the tuples), in field order."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "extra":
                out.update(v or {})
            elif v is not None:
                out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    def with_(self, **changes: Any) -> Hardware:
        """A copy with ``changes`` (validated like :meth:`from_meta`)."""
        bad = [k for k in changes if k not in _TYPES]
        if bad:
            raise CollsimError(f"Hardware has no field(s) {', '.join(bad)}")
        return replace(self, **{k: None if v is None else _coerce(v, _TYPES[k], k) for k, v in changes.items()})


_TYPES: dict[str, str] = {}
for _f in fields(Hardware):
    _t = str(_f.type)
    _TYPES[_f.name] = ("tuple" if _t.startswith("tuple") else "dict" if _t.startswith("dict") else "bool" if _t.startswith("bool") else
                       "int" if _t.startswith("int") else "float" if _t.startswith("float") else "str")


def _coerce(value: Any, kind: str, what: str) -> Any:
    if kind == "bool":
        if not isinstance(value, bool):
            raise CollsimError(f"{what} {value!r} must be true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise CollsimError(f"{what} {value!r} must be a whole number")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CollsimError(f"{what} {value!r} must be a finite number")
        return value
    if kind == "dict":
        if not isinstance(value, dict):
            raise CollsimError(f"{what} must be a mapping")
        return dict(value)
    if kind == "tuple":
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
            raise CollsimError(f"{what} must be a list of strings")
        return tuple(value)
    if not isinstance(value, str):
        raise CollsimError(f"{what} {value!r} must be a string")
    return value


# GPU -> NIC paths as ``nvidia-smi topo -m`` names them, nearest first (NCCL's PATH_PIX .. PATH_SYS)
NIC_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def through_cpu(nic_path: str | None) -> bool:
    """Whether a GPU reaches its NIC beyond its PCIe switches (PHB, NODE, SYS: through the CPU)."""
    return nic_path in NIC_PATHS and NIC_PATHS.index(nic_path) > NIC_PATHS.index("PXB")


# GPUs joined to their CPU by NVLink-C2C (Grace superchips), not by PCIe
SUPERCHIPS = ("GH200", "GB200", "GB300")


def gdr_through_host_bridge(hw: "Hardware") -> bool:
    """Whether a GPU's GPUDirect RDMA traffic crosses the CPU's PCIe root complex from one PCIe device to
    another: its NIC sits beyond its PCIe switches (PHB or farther) and the GPU itself hangs off PCIe. A
    Grace superchip's GPU reaches its CPU, and the NIC behind it, over NVLink-C2C (NCCL 2.2x names that
    path P2C and enables GPUDirect on it by default), so its PHB path does not count.

    >>> gdr_through_host_bridge(Hardware(gpu="A100-SXM4", nic_path="PHB")), gdr_through_host_bridge(Hardware(gpu="GH200", nic_path="PHB"))
    (True, False)
    """
    return through_cpu(hw.nic_path) and not any(s in (hw.gpu or "").upper() for s in SUPERCHIPS)


# The newest PCIe generation whose root complex costs GPUDirect RDMA a share of the NIC's rate (below)
LOSSY_HOST_BRIDGE_GEN = 4


def gdr_host_bridge_loss(hw: "Hardware") -> bool:
    """Whether a GPU's GPUDirect RDMA pays ``gdr_host_bridge_efficiency``: it crosses the CPU's root complex
    (:func:`gdr_through_host_bridge`) on a host of PCIe Gen4 or older.

    The same 200 Gb/s Slingshot NICs at PHB give 0.73-0.79 of their rate to A100 nodes on PCIe Gen4 hosts
    (AMD Milan: ALCF Polaris, NERSC Perlmutter) and 0.91 to H100 nodes on PCIe Gen5 hosts (AMD Genoa: NREL
    Kestrel, with the same NCCL 2.21.5 and aws-ofi-nccl 1.6.0 as Perlmutter), about what GH200 nodes reach
    without the bridge (CSCS Alps, Sigma2 Olivia: 0.89-0.96); each is the system's efficiency fitted alone. A
    PCIe switch (PXB) costs an A100 nothing either (InfiniBand's efficiency, fitted mostly on A100 and H100
    servers at PXB, is 0.99-1.0). So the loss is the Gen4 root complex's peer-to-peer path, not the path as such; a host whose
    generation is unknown is taken as lossy, as before, and so is a NIC beyond the GPU's own root complex
    (NODE, SYS), which no Gen5 run measured.

    >>> a100 = Hardware(gpu="A100-SXM4", nic_path="PHB", pcie_gen=4)
    >>> gdr_host_bridge_loss(a100), gdr_host_bridge_loss(Hardware(gpu="H100-SXM", nic_path="PHB", pcie_gen=5))
    (True, False)
    """
    if not gdr_through_host_bridge(hw):
        return False
    # the Gen5 evidence is a NIC on the GPU's own root complex (PHB); across sockets (NODE, SYS) it still pays
    return hw.nic_path != "PHB" or (hw.pcie_gen or LOSSY_HOST_BRIDGE_GEN) <= LOSSY_HOST_BRIDGE_GEN


__all__ = ["Hardware", "LOSSY_HOST_BRIDGE_GEN", "NIC_PATHS", "SUPERCHIPS", "gdr_host_bridge_loss", "gdr_through_host_bridge",
           "through_cpu"]
