"""The scale-out networks collsim knows (``fabric=`` on node presets, ``meta.fabric`` in topology files).

A fabric is a hardware fact of a cluster, so it lives in the topology layer: the presets and the topology
file reader check a fabric's name here. Each carries its *priors*: public figures for the share of a
NIC's line rate an NCCL collective sustains and the latency the transport adds; the values fitted on the
public cases live in the NCCL layer's :mod:`sim.nccl.calibration`, which reads this table.

>>> get_fabric("IB").name
'ib'
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CollsimError


@dataclass(frozen=True)
class Fabric:
    """A scale-out network as NCCL drives it. ``efficiency`` and ``latency_us`` here are the priors
    (a public figure, used when no public case of the fabric is left to fit on); the fitted values
    live in :data:`VALUES` under ``efficiency.<name>`` and ``latency.<name>``."""

    name: str
    title: str
    efficiency: float
    latency_us: float
    source: str
    # share of ``efficiency`` many-peer point-to-point (all_to_all) keeps over this fabric; 1.0 where no
    # public figure says otherwise
    p2p_share: float = 1.0
    p2p_source: str = ""
    # the NCCL net plugin that drives it (NCCL_NET): what a message costs in software (the proxy posting and
    # completing it) belongs to the plugin, so fabrics driven by the same one share a prior for those costs
    plugin: str = "net_ib"   # a key of PLUGINS
    # messages of at least this many bytes go by rendezvous (the receiver is told, then fetches the data:
    # one more round trip through the provider's progress); 0: the transport has no such switch
    rdzv_threshold_bytes: int = 0
    # the transport's provider can match tags in software (libfabric cxi: FI_CXI_RX_MATCH_MODE=software); then
    # every eager message lands in a host buffer and is copied into the GPU's (sim.nccl.tuner._recv_copy_us)
    software_matching: bool = False
    # what the net plugin tells NCCL its latency is (ncclNetProperties.latency, NCCL's graph.latencyInter):
    # only NCCL's own tuner reads it, to choose an algorithm; what the network really costs is latency_us
    # (fitted). NCCL's InfiniBand transport reports 0 ("Not set"); aws-ofi-nccl 0 unless built for AWS, where
    # its platform table reports 75 us for p4d, p4de, p5 and p5e (src/platform-aws.c, v1.7 to v1.17)
    reported_latency_us: float = 0.0


@dataclass(frozen=True)
class Plugin:
    """An NCCL net plugin (``NCCL_NET``). ``nccl_own``: NCCL ships it and its per-step figures
    (``getNetOverhead``, the NET hop latencies) were measured on it, so they stay every fabric's prior."""

    name: str
    title: str
    nccl_own: bool = False


# NCCL's own InfiniBand verbs transport, the aws-ofi-nccl plugin over libfabric (EFA's SRD and Slingshot's
# cxi provider: the ALCF and CSCS docs set NCCL_NET="AWS Libfabric"), and Google's TCPXO/FasTrak plugin.
PLUGINS: dict[str, Plugin] = {p.name: p for p in (
    Plugin("net_ib", "NCCL's InfiniBand verbs transport (IB and RoCE)", nccl_own=True),
    Plugin("ofi", "aws-ofi-nccl over libfabric (EFA's SRD, Slingshot's cxi)"),
    Plugin("tcpxo", "Google's GPUDirect-TCPXO (FasTrak) plugin"),
)}


# Priors: public figures independent of the cases they are later fitted on (docs/nccl-model.md, Fabrics).
FABRICS: dict[str, Fabric] = {f.name: f for f in (
    Fabric("ib", "InfiniBand (RDMA verbs, ConnectX)", 0.96, 0.0,
           "ib_write_bw reaches ~97% of HDR/NDR line rate (NVIDIA perftest); NCCL's NET hop latencies "
           "(tuning.cc hwLat) were measured on InfiniBand, so IB adds nothing beyond them"),
    Fabric("roce", "RoCE v2 (RDMA over Converged Ethernet, ConnectX)", 0.94, 1.0,
           "same NICs and verbs path as IB, Ethernet framing and a lossless-Ethernet fabric (a few % of "
           "line rate, ~1 us more switch latency)"),
    Fabric("efa", "AWS Elastic Fabric Adapter v1 (p4d/p4de: 4 x 100G per node; SRD via libfabric, aws-ofi-nccl)", 0.85, 15.0,
           "aws-ofi-nccl: SRD is a reliable-datagram protocol run by the EFA device and libfabric; "
           "sjeaugey (nccl #320): ~20 GB/s per 200 Gb/s NIC", plugin="ofi", reported_latency_us=75.0),
    Fabric("efa2", "AWS Elastic Fabric Adapter v2 (p5/p5e: 32 x 100G per node; SRD via libfabric, aws-ofi-nccl)", 0.85, 15.0,
           "the same transport as efa (aws-ofi-nccl over libfabric's SRD), its second generation: AWS p5 documents "
           "EFAv2 at 3,200 Gb/s per instance; priors as efa until cases say otherwise", plugin="ofi",
           reported_latency_us=75.0),
    # efficiency 0.97: nccl #1272's 24.2 GB/s on a 25 GB/s NIC, from GH200 nodes, whose GPU reaches the NIC
    # over NVLink-C2C: the NIC's own share. (The prior was 0.75, read off ALCF Polaris, whose A100s reach
    # theirs through the CPU's root complex: that path's loss is gdr_host_bridge_efficiency's. Counted in the
    # fabric's prior too, it put CSCS Alps ~20% too slow in the fold that leaves Alps out, where the only
    # GH200 sweep left, Olivia's, is still on its ramp and fits nothing: crossval.on_plateau.)
    Fabric("slingshot", "HPE Slingshot 11 (Cassini, libfabric cxi via aws-ofi-nccl)", 0.97, 6.0,
           "HPE Slingshot 11 200 Gb/s; NCCL over libfabric cxi through the aws-ofi-nccl plugin (ALCF docs); "
           "nccl #1272 (CSCS GH200): sendrecv_perf 24.2 GB/s per 25 GB/s NIC with 4 channels per network peer",
           0.76, "nccl #1272 (CSCS, 4 GH200 per node, Slingshot via aws-ofi-nccl, NCCL 2.20): sendrecv_perf "
           "18.3 GB/s with NCCL's default p2p channels per network peer, 24.2 with NCCL_NCHANNELS_PER_NET_PEER=4",
           # libfabric's cxi provider sends messages of FI_CXI_RDZV_THRESHOLD bytes and more (16 KiB by
           # default) by rendezvous; only the default is modelled (sim.nccl.tuner._rendezvous_us says why)
           plugin="ofi", rdzv_threshold_bytes=16384, software_matching=True),
    Fabric("tcpxo", "Google GPUDirect-TCPXO (A3 Mega; host-mediated TCP, not RDMA)", 0.85, 40.0,
           "GPUDirect-TCPX/O moves payload GPU-direct but runs TCP control through host CPUs and the "
           "NCCL FasTrak plugin: far more latency per message than RDMA (Google Cloud A3 Mega docs)", plugin="tcpxo"),
)}


def get_fabric(name) -> Fabric:
    """The fabric called ``name``; a clear error naming the fabrics otherwise."""
    key = str(name).strip().lower()
    if key not in FABRICS:
        raise CollsimError(f"fabric={name!r} is not a fabric collsim knows: use one of {', '.join(FABRICS)} "
                           f"({'; '.join(f'{f.name} = {f.title}' for f in FABRICS.values())})")
    return FABRICS[key]


__all__ = ["Fabric", "FABRICS", "Plugin", "PLUGINS", "get_fabric"]


assert all(f.plugin in PLUGINS for f in FABRICS.values())
