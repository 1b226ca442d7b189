"""Run the engine the way NCCL runs a collective: protocols, channels, chunks and the latency term.

With an NCCL protocol (LL, LL128, Simple) the engine prediction is

    time = latency term (NCCL's: base latency + per-hop latencies)  +  data movement (the engine)

* The latency term is the tuner's (:func:`sim.nccl.tuner.tuner_terms`): NCCL's base latency plus its per-hop
  latency by link class, or the topology's own wire latency where that is larger.
* Data movement is the engine on an *effective* copy of the topology: every link runs at what NCCL's
  own model credits that kind of link with (:data:`sim.nccl.constants.NVLINK_EFFICIENCY`, PCIe at 3/4 of raw) or at a
  calibrated fraction (:mod:`sim.nccl.calibration`: fabric efficiency, host bounce); NVLS algorithms also
  pay NCCL's ``nvlsEfficiency`` on NVLink; links carry no latency (it is in the latency term). The
  protocol's payload share is the tuner's bandwidth of that protocol over Simple's (LL 1/2 capped by
  ``llMaxBw``, LL128 0.92 capped per channel), so LL and LL128 lose what NCCL says they lose; tree
  all_reduce also takes NCCL's ``treeCorrectionFactor`` (mid sizes run below the model bandwidth).
* One recipe: :func:`plan_nccl` computes all of the above once (:class:`NcclPlan`), for :func:`simulate_with_plan` and
  for the flow model (:mod:`sim.prediction.flow`), so the two cannot drift apart.
* Channels: across nodes, rings and trees run one channel per NIC, each channel's ranks rotated inside
  every node so that it enters and leaves the node through a different NIC (NCCL's rings/trees do the
  same); CollNet and NVLS place their heads themselves.
* Chunks: pipelined algorithms (trees, chains, NVLS) move NCCL-sized chunks
  (:func:`sim.nccl.protocols.nccl_chunk_bytes`). When there are more chunks than :data:`OPS_BUDGET` allows,
  the engine simulates two shorter runs of the same chunk size and extrapolates the steady state
  linearly (exact once the pipeline is full: each extra chunk adds one period).

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 30, "dgx-a100", algorithm="ring", protocol="Simple")
>>> round(r.busbw_GBps), r.explain["latency_us"] > 50
(238, True)
"""
from __future__ import annotations

import itertools
import math
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..algorithms import build_program, get_algorithm
from ..algorithms.nvls import nvls_heads
from ..errors import CollsimError
from ..program import Program
from ..topology import Link, Topology
from ..topology.hardware import gdr_host_bridge_loss
from . import calibration
from . import config as nccl_config
from .constants import (
    LL_FORWARD_BYTES,
    NCCL_ALGORITHMS,
    NVLINK_EFFICIENCY,
    NVLS_CHUNK_BYTES,
    NVLS_CHUNK_STEPS,
    NVLS_EFFICIENCY,
    NVLS_TREE_SMALL_CHUNK_BYTES,
    NVLS_TREE_SMALL_CHUNK_NODES,
    PCIE_EFFICIENCY,
)
from .context import cached
from .machine import Machine, graph_for, machine, nvls_channels, runtime_channels
from .protocols import Protocol, base_latency_us, get_protocol, hop_latency_us, nccl_chunk_bytes
from .tuner import Terms, tuner_terms, used_channels

# NCCL's link efficiencies are in sim.nccl.constants; the fitted ones (each fabric's share of a NIC's
# line rate, the share of PCIe left when GPUs bounce through host memory) are read from
# sim.nccl.calibration at run time, so --cross-validate can refit them per fold.
OPS_BUDGET = 60_000              # simulated ops per engine run before extrapolating the steady state
# The most pieces steady_state_pieces asks for past the budget. A deep pipeline's period shows long before
# it is full: the 64-GPU chain of an MNNVL rack's tree (128 steps, 32,512 ops a piece) gives the time of
# its run of every piece to 0.02% from 32 and 16 pieces, as from 130 and 65, with a quarter of the ops
# (a 1 GiB row of case GB200V3-128-AR: 20 s -> 5 s; docs/nccl-model.md, Chunks). Shallow pipelines
# (steps + 2 <= 32: trees and NVLSTrees on up to 256 8-GPU nodes, the flow model's replicas of such nodes)
# are probed as before.
PROBE_PIECES_MAX = 32
SPREAD_ALGORITHMS = ("ring", "tree")


def link_efficiency(topo: Topology, link: Link, nvls: str = "", duplex: bool = True, p2p: bool = False) -> float:
    """Share of ``link``'s raw bandwidth a collective gets (1.0 on topologies without hardware facts).

    ``nvls``: the NVLS algorithm the NVLink links serve (``"nvls"``, ``"nvls_tree"``; empty: none): NVLink
    then runs at NCCL's ``nvlsEfficiency``, less what a large NVLink domain loses
    (:func:`nvls_domain_factor`) and, for NVLSTree, what its kernel's other work takes (:func:`nvls_tree_share`).

    ``duplex``: every GPU sends and receives at once (all collectives but a 2-GPU broadcast/reduce). On
    host-bounced PCIe (``p2p=0``) that costs more than sharing the link: each GPU's SMs read host memory
    while its own writes stream up (E1: 11.1 GB/s one way alone, 4.0 GB/s per GPU both ways), so the two
    cases have their own fitted efficiency. ``p2p``: the all_to_all's grouped sends, whose network links
    run at the fabric's efficiency times its fitted ``p2p_share`` (:func:`sim.nccl.calibration.fabric_p2p_share`).
    A network link whose GPUDirect traffic crosses the CPU's PCIe root complex on a PCIe Gen4 host
    (:func:`sim.topology.hardware.gdr_host_bridge_loss`) runs at the fitted ``gdr_host_bridge_efficiency`` of
    that: the same Slingshot NICs give A100 nodes with the NIC on the CPU's root port 0.73-0.79 of their
    rate (ALCF Polaris, NERSC Perlmutter), H100 nodes on a Gen5 host 0.91 (NREL Kestrel) and GH200 nodes,
    which reach theirs over NVLink-C2C, 0.89-0.96
    (CSCS Alps, Sigma2 Olivia), each fitted alone. The all_to_all of a node with GPUs that reach no NIC
    within the host bridge (``gpus_without_gdr``: no GPUDirect RDMA, no PXN relay) keeps the fitted
    ``no_gdr_p2p_share`` of that (ALCF Polaris's GPU0 and GPU2, at SYS to both NICs)."""
    hw = topo.hardware
    arch = hw.gpu_arch
    if arch is None:
        return 1.0   # a textbook topology: its links are what they say
    if link.kind == "nvlink":
        eff = NVLINK_EFFICIENCY.get(arch, 0.8)
        if not nvls:
            return eff
        return eff * NVLS_EFFICIENCY.get(arch, 1.0) * nvls_domain_factor(hw.gpus_per_node or 1) * nvls_tree_share(nvls)
    if link.kind == "pcie":
        if hw.p2p is False:
            return PCIE_EFFICIENCY * calibration.value("host_bounce_duplex_efficiency" if duplex else "host_bounce_efficiency")
        return PCIE_EFFICIENCY
    if link.kind == "net":
        eff = calibration.fabric_efficiency(hw.fabric)
        if gdr_host_bridge_loss(hw):   # A100 + NIC on a PCIe Gen4 CPU's root port: Polaris, Perlmutter
            eff *= calibration.value("gdr_host_bridge_efficiency")
        if not p2p:
            return eff
        # GPUs without GPUDirect RDMA (nearest NIC beyond the host bridge) stage their sends through host
        # memory; the all_to_all waits for them (rings and trees never enter a node at those GPUs)
        staged = calibration.value("no_gdr_p2p_share") if hw.gpus_without_gdr else 1.0
        return eff * calibration.fabric_p2p_share(hw.fabric) * staged
    return 1.0


def nvls_domain_factor(gpus_per_domain: int) -> float:
    """What NVLS keeps of NCCL's ``nvlsEfficiency`` on an NVLink domain of ``gpus_per_domain`` GPUs.

    NCCL tuned ``nvlsEfficiency`` on 8-GPU nodes, and published 5..8-GPU runs follow it (H100: nccl #1455;
    B300: nccl #2140; the 8 GB200 GPUs of case B1). A 72-GPU GB200 rack runs below it (cases B2, B3), for
    a reason no public source states; the loss per doubling of the domain beyond 8 GPUs is the fitted
    ``nvls_loss_per_doubling`` (:mod:`sim.nccl.calibration`; its prior, 0, is NCCL's own model).

    >>> nvls_domain_factor(8)
    1.0
    """
    doublings = math.log2(gpus_per_domain / 8) if gpus_per_domain > 8 else 0.0
    return (1.0 - calibration.value("nvls_loss_per_doubling")) ** doublings


def nvls_tree_share(algorithm: str) -> float:
    """What an NVLSTree all_reduce keeps of NVLS's NVLink rate: the fitted ``nvls_tree_share``
    (:mod:`sim.nccl.calibration`) for ``"nvls_tree"``, 1.0 for anything else.

    Why: NCCL runs each channel of an all_reduce with 20 warps (``NCCL_MAX_NTHREADS`` 640), split by role
    (``src/device/all_reduce.h``, ``RunWorkColl``). NVLS alone gives 8 warps to copying the user buffer
    into the NVLS buffers (scatter) and 7 to copying the result out (gather), with 5 reducing through the
    switch. NVLSTree also receives from and sends to the network tree: on a node with a parent in the tree,
    4 warps broadcast what comes back and 5 reduce, which leaves 6 to scatter and 5 to gather. (Buffers
    registered with NCCL skip the copies; nccl-tests does not register them.) A 2-node NVLSTree is bound
    by NVLink, not by its NICs, and published 2-node H100 runs reach 0.90-0.94 of the busbw NVLS's rate
    gives (AWS p5, Dell XE9680 on InfiniBand). How much of the quarter fewer warps shows as NVLink rate is
    not in NCCL's model, so it is fitted; its prior, 1.0, is NCCL's own model.

    >>> nvls_tree_share("nvls")
    1.0
    """
    return calibration.value("nvls_tree_share") if algorithm == "nvls_tree" else 1.0


def effective_topology(topo: Topology, nvls: str = "", duplex: bool = True, p2p: bool = False) -> Topology:
    """``topo`` with every link at its effective bandwidth and (almost) no latency, cached per topology
    and the calibration's link constants (:attr:`sim.nccl.calibration.Calibration.links`).

    Links keep a millionth of their latency: routes are chosen by latency, so they stay exactly those of
    the real topology, while the time the wire adds (under a nanosecond per hop) is negligible: the
    latency is in the latency term."""
    return _effective_topology(topo, nvls, duplex, p2p, calibration.current().links)


@lru_cache(maxsize=16)
def _effective_topology(topo: Topology, nvls: str, duplex: bool, p2p: bool, cal: calibration.Calibration) -> Topology:
    # ``cal`` is the part of the calibration in force that link_efficiency reads; it keys the cache
    links = [Link(l.src, l.dst, l.bandwidth_GBps * link_efficiency(topo, l, nvls, duplex, p2p), l.latency_us * 1e-6, l.kind)
             for l in topo.links]
    eff = Topology.build(topo.name, topo.nodes, links, topo.hardware)
    # the same routes as ``topo`` (see above): share its route cache rather than search every route again for
    # each calibration a cross-validation's grid tries (a fifth of its time went to those searches)
    eff.share_routes(topo)
    return eff


# ---- channels spread over NICs --------------------------------------------------------------------
def channel_order(topo: Topology, channel: int, nchannels: int, ring: bool = False) -> np.ndarray:
    """Program rank -> topology rank for ``channel``: every host's ranks rotated so that the channel
    enters the host at local GPU ``o`` and leaves it at ``o - 1``, ``o = channel * ppn // nchannels + 1``:
    both next to NIC ``channel`` when GPUs are spread evenly over NICs.

    A ``ring`` whose entry and exit GPUs sit by different NICs (one NIC per GPU: DGX H100, GH200) runs the
    other way round on every other host instead, entering it at ``o - 1`` and leaving at ``o``: it then
    enters each host at the GPU it left the previous host from, so the node crossing stays on one rail, as
    NCCL keeps it (its ring search wants the same NIC at both ends of a crossing, and PXN relays a GPU's
    send to that NIC), and never loads the spine inside a scalable unit. (Rotating every host alike, each
    crossing went NIC c -> NIC c+1 through the spine: an oversubscribed spine slowed two nodes under the
    same leaves 3.5x.) With an odd number of hosts the ring's closing crossing still changes rail.

    >>> from sim.presets import load_topology
    >>> channel_order(load_topology("dgx-a100:nodes=2,nics_per_node=4"), 1, 4)[:8].tolist()
    [3, 4, 5, 6, 7, 0, 1, 2]
    >>> channel_order(load_topology("dgx-h100:nodes=2"), 0, 8, ring=True).tolist()   # h0 left at GPU 0, h1 at GPU 9
    [1, 2, 3, 4, 5, 6, 7, 0, 8, 15, 14, 13, 12, 11, 10, 9]
    """
    hw = topo.hardware
    ports = int(hw.nic_ports or 0) if hw is not None else 0
    if ring and nchannels > 1 and single_node_mesh(machine(topo)):   # one node's direct NVLink mesh: its own rings
        host = topo.hosts[0]
        cycles = mesh_cycles(len(host))
        return np.asarray([host[i] for i in cycles[channel % len(cycles)]], dtype=np.int64)
    order: list[int] = []
    for h, host in enumerate(topo.hosts):
        k = len(host)
        o = (channel * k // nchannels + 1) % k if k > 1 else 0
        rotated = host[o:] + host[:o]
        if ring and h % 2 and ports and k > 1 and (o - 1) % k * ports // k != o * ports // k:
            rotated = rotated[-1:] + rotated[-2::-1]   # o-1, o-2, ..., o: in where the last host was left
        order.extend(rotated)
    return np.asarray(order, dtype=np.int64)


def mesh_cycles(k: int) -> list[tuple[int, ...]]:
    """The rings a direct NVLink mesh of ``k`` GPUs runs, as orders of its local GPUs, all starting at 0, each
    followed by its reverse (so a channel bound of 2, NCCL_MAX_NCHANNELS=2, leaves a ring and its reverse,
    which load the pairs they use alike; 4 of the 6 rings of 4 GPUs cannot load 12 pairs alike).

    NCCL's ring search on a 4-GPU board (HGX A100 4-GPU, GH200, V100 SXM2) finds rings through different
    pairs until the NVLinks are used up, so an all_reduce moves on all three of a GPU's NVLink pairs, not on
    one ring's. Up to 4 GPUs these are every directed Hamiltonian cycle ((k-1)! of them, which between them
    load every directed pair alike: each lies on (k-2)! of them). The complete symmetric digraph on 4
    vertices has no decomposition into 3 disjoint directed Hamiltonian cycles (Tillson 1980), so it is 6
    rings at half a pair's rate. Beyond 4 GPUs (no board has them; a topology file can draw them) the stride
    cycles ``0, s, 2s, ...`` for the strides ``s`` coprime to ``k``: pairwise disjoint, and every pair only
    when ``k`` is prime.

    >>> mesh_cycles(3)
    [(0, 1, 2), (0, 2, 1)]
    >>> mesh_cycles(4)[:2], len(mesh_cycles(4)), mesh_cycles(5)[2]
    ([(0, 1, 2, 3), (0, 3, 2, 1)], 6, (0, 2, 4, 1, 3))
    """
    if k <= 4:
        forward = [c for c in ((0, *rest) for rest in itertools.permutations(range(1, k))) if c[1] < c[-1]]
        return [c for f in forward for c in (f, (0, *f[:0:-1]))]
    strides = [s for s in range(1, (k + 1) // 2) if math.gcd(s, k) == 1]
    return [tuple(i * t % k for i in range(k)) for s in strides for t in (s, k - s)]


def spread_program(name: str, coll, topo: Topology, nchannels: int, pipeline: int, root: int = 0) -> Program:
    """``nchannels`` copies of ``name``'s one-channel program, channel c on ranks relabelled by
    :func:`channel_order`, chunks laid out shard-major so the result is still the collective."""
    n = topo.nranks
    parts = []
    for c in range(nchannels):
        perm = channel_order(topo, c, nchannels, ring=name == "ring")
        inv = np.empty(n, np.int64)
        inv[perm] = np.arange(n)
        p = build_program(name, coll, n, topology=topo, nchannels=1, pipeline=pipeline, root=int(inv[root]))
        parts.append((perm, p))
    first = parts[0][1]
    nshards = n if coll.sharded else n * n if coll.pairwise else 1
    per = first.nchunks // nshards
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("src", "dst", "chunk", "step", "channel", "reduce")}
    for c, (perm, p) in enumerate(parts):
        relabel = lambda a, perm=perm: np.where(a < n, perm[np.minimum(a, n - 1)], a)
        shard, sub = p.chunk // per, p.chunk % per
        if nshards == n:
            shard = perm[shard]
        elif nshards == n * n:
            shard = perm[shard // n] * n + perm[shard % n]
        cols["src"].append(relabel(p.src))
        cols["dst"].append(relabel(p.dst))
        cols["chunk"].append(shard * (nchannels * per) + c * per + sub)
        cols["step"].append(p.step)
        cols["channel"].append(c * (int(p.channel.max()) + 1) + p.channel)
        cols["reduce"].append(p.reduce)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    return Program.from_ops(coll, n, first.nchunks * nchannels, cat["src"], cat["dst"], cat["chunk"], cat["step"],
                            cat["reduce"], channel=cat["channel"], algorithm=name, steps=first.steps, root=root,
                            switches=first.switches, params={**first.params, "nchannels": nchannels, "spread": True})


@lru_cache(maxsize=64)
def _program(name: str, coll, topo: Topology, nchannels: int, pipeline: int, root: int, spread: bool) -> Program:
    if spread:
        return spread_program(name, coll, topo, nchannels, pipeline, root)
    return build_program(name, coll, topo.nranks, topology=topo, nchannels=nchannels, pipeline=pipeline, root=root)


# ---- the plan: how NCCL runs one collective (shared by the engine and the flow model) ---------------
@dataclass(frozen=True)
class NcclPlan:
    """How NCCL runs ``algorithm`` with ``protocol`` for one collective and size: everything the engine
    (:func:`simulate_with_plan`) and the flow model (:mod:`sim.prediction.flow`) take from NCCL, computed once (:func:`plan_nccl`).

    ``nchannels``: channels the engine simulates (one per NIC when ``spread`` over NICs); ``steps``:
    NCCL-style nsteps; ``split``: chunks one channel's data is cut into per pipeline piece; ``chunk_bytes``:
    NCCL's chunk per channel for pipelined collectives (None otherwise); ``pieces``: chunks per channel;
    ``payload_share`` x ``small_share`` x ``tree_correction``: the engine protocol's payload efficiency
    (protocol bandwidth over Simple's, times the share of channels NCCL uses on a small message:
    ``used_channels`` of ``tuned.nchannels`` with ``used_threads`` threads, times NCCL's
    ``treeCorrectionFactor`` for tree all_reduce, 1 otherwise); ``tuned``: the tuner's terms (None for
    algorithms NCCL does not have); ``latency_us``: the latency term, in us, which holds ``tree_lag_us``
    (:func:`tree_chunk_lag_us`, a deep tree's per-chunk lag across nodes: ``tree_lag_units`` times the constant);
    ``single_call_latency_us``: set for a rooted chain (broadcast, reduce), whose ``latency_us`` is then the
    latency per call of nccl-tests' back-to-back loop (:func:`sim.nccl.tuner._loop_latency_us`) and this the
    latency of one call alone (NCCL's n hops); its data term is then :func:`loop_period_us`.

    >>> from sim.collectives import get_collective
    >>> from sim.presets import load_topology
    >>> p = plan_nccl(get_collective("all_reduce"), 1 << 30, load_topology("dgx-h100"), "ring", "Simple")
    >>> p.nchannels, p.steps, p.pieces, p.payload_share, round(p.latency_us, 1)
    (1, 14, 1, 1.0, 59.0)
    """

    algorithm: str
    protocol: str
    machine: Machine
    spread: bool
    nchannels: int
    steps: int
    split: int
    pipelined: bool
    chunk_bytes: int | None
    pieces: int
    payload_share: float
    small_share: float
    used_channels: int
    used_threads: int
    tree_correction: float
    tuned: Terms | None
    engine_protocol: Protocol
    latency_us: float
    tree_lag_us: float = 0.0
    tree_lag_units: float = 0.0
    single_call_latency_us: float | None = None

    def channels_used_explain(self) -> dict:
        """``{"nccl_channels_threads_used": ...}`` where a small message runs on fewer of NCCL's channels
        than it has (``small_share`` < 1), else ``{}``: what ``--explain`` says for the engine and the flow
        model alike."""
        if self.small_share >= 1:
            return {}
        total = self.tuned.nchannels if self.tuned else 1
        return {"nccl_channels_threads_used": f"{self.used_channels} of {total} channels, {self.used_threads} threads"}


def nccl_channels(topo: Topology, algorithm: str, nchannels: int | None = None, m: Machine | None = None) -> tuple[bool, int]:
    """(spread, channels) the engine runs: across nodes with several GPUs per node, rings and trees run
    one channel per NIC port, spread over the ports (:func:`channel_order`); else ``nchannels`` or 1. (A
    preset draws the NICs behind one GPU's PCIe switch as one port: NCCL spreads that GPU's channels over
    them, which moves the same bytes.) Where NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS leave NCCL fewer channels
    than ports, its rings cross on that many NICs only, and so do the engine's."""
    m = m or machine(topo)
    # the NICs follow the distinct channels: copies NCCL_MIN_NCHANNELS adds beyond NCCL_MAX_NCHANNELS's ride the same NICs
    allowed = (nccl_config.current().distinct_channels(runtime_channels(m, algorithm))
               if m.nnodes > 1 or single_node_mesh(m) else None)
    return _channels(algorithm, nchannels, m, allowed)


@lru_cache(maxsize=256)   # once per machine and channel bound: the budget's estimate and the plan both ask
def _channels(algorithm: str, nchannels: int | None, m: Machine, allowed: int | None = None) -> tuple[bool, int]:
    if single_node_mesh(m) and algorithm == "ring":   # the mesh's rings, each on its own pairs (mesh_cycles)
        rings = len(mesh_cycles(m.ppn))
        nch = nchannels or min(rings, allowed or rings)   # as many as NCCL runs apart
        return nch > 1, nch
    spread = algorithm in SPREAD_ALGORITHMS and m.nnodes > 1 and m.ppn > 1
    ports = min(m.nics, m.ppn, allowed or m.nics)   # NICs behind one GPU's switch are one port (presets draw them so)
    nch = nchannels or (ports if spread and ports > 1 else 1)
    return spread and nch > 1, nch


def spread_explain(plan: "NcclPlan") -> dict:
    """The explain keys on how the engine's channels are laid out: ``channels_spread_over_nics`` across nodes,
    ``mesh_rings`` (how many of :func:`mesh_cycles`) on one node of a direct NVLink mesh."""
    if plan.spread and plan.machine.nnodes == 1:
        return {"channels_spread_over_nics": False, "mesh_rings": plan.nchannels}
    return {"channels_spread_over_nics": plan.spread}


def single_node_mesh(m: Machine) -> bool:
    """One node of a hardware preset whose GPUs join by direct NVLink pairs, every pair, not a switch (HGX A100
    4-GPU, GH200, V100 SXM2 boards), of 3 GPUs or more: NCCL's rings there take different pairs
    (:func:`mesh_cycles`). Across nodes the NICs bind long before the NVLink pairs do, and the rings keep
    their NIC spread (:func:`channel_order`); textbook topologies keep one ring, as drawn, and so does a
    topology file whose NVLinks join some pairs only (the DGX-1 hybrid cube-mesh example: NCCL's rings there
    follow the NVLink graph, which collsim does not search)."""
    return bool(m.arch) and m.nnodes == 1 and m.ppn >= 3 and m.intra_class == "nvlink" and m.nvlink_full_mesh


@cached(maxsize=1024)   # once per input and settings in force: the budget, the engine and the flow model ask for it
def plan_nccl(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels: int | None = None,
              pipeline: int | None = None, steps: int | None = None, split: int = 1, root: int = 0,
              m: Machine | None = None) -> NcclPlan:
    """The NCCL recipe for one run, shared by :func:`simulate_with_plan` and :func:`sim.prediction.flow.flow_simulate`.

    ``steps``/``split``: the one-channel program's nsteps and chunks per piece; when ``steps`` is None
    they are read off the engine's program (built and cached here), else ``split`` is taken as given
    (the flow model passes the ring's closed form). ``m``: the :class:`~sim.nccl.tuner.Machine` if known."""
    p = get_protocol(proto)
    m = m or machine(topo)
    spread, nch = nccl_channels(topo, algorithm, nchannels, m)
    if steps is None:
        one = _program(algorithm, coll, topo, nch, 1, root, spread)
        steps, split = one.steps, _split(one, nch)
    pipelined = coll.name in get_algorithm(algorithm).pipelined
    chunk: int | None
    if pipelined and algorithm.startswith("nvls"):
        chunk, loop_bytes = nvls_loop(algorithm, nbytes, m)
        pieces = pipeline or max(1, math.ceil(nbytes / loop_bytes))
    else:
        chunk = nccl_chunk_bytes(algorithm, p.name, nbytes / nch, depth=steps) if pipelined else None
        if chunk and p.name == "LL" and algorithm != "ring":
            # a tree's levels pass LL data on line by line (LL_FORWARD_BYTES), so a level does not wait for a
            # whole step: the engine pipelines at that grain. A ring's steps carry different data each, so
            # the grain does not change its time (NCCL's model adds the steps' latencies to size / bandwidth)
            chunk = min(chunk, LL_FORWARD_BYTES)
        pieces = pipeline or (max(1, math.ceil(nbytes / nch / split / chunk)) if chunk else 1)
    share = payload_share(coll, topo, algorithm, p.name, m)
    tuned = tuner_terms(coll, nbytes, topo, algorithm, p.name, m) if algorithm in NCCL_ALGORITHMS else None
    small, used_ch, used_threads = small_message_share(nbytes, topo, algorithm, p.name,
                                                       tuned.nchannels if tuned and tuned.nchannels else 1)
    lat = _latency_term(tuned, m, p.name, steps)
    single_call = None
    if tuned is not None and "loop_latency_us" in tuned.detail:   # a rooted chain: nccl-tests' calls overlap down it
        single_call, lat = lat, tuned.detail["loop_latency_us"]
    nccl_nch = tuned.nchannels if tuned and tuned.nchannels else nch
    units = tree_lag_units(algorithm, p.name, m, nbytes, nccl_nch, steps)
    lag = tree_chunk_lag_us(algorithm, p.name, m, nbytes, nccl_nch, steps)
    # NCCL's model slows tree all_reduce at mid sizes (treeCorrectionFactor, 0.4-1.0 from 64 B to 256 MiB:
    # "trees are not perfectly sticking to the model for medium sizes"); the engine's tree moves data at
    # the same model bandwidths, so it takes the same factor (docs/nccl-model.md, Calibration).
    corr = tuned.detail.get("tree_correction", 1.0) if tuned is not None else 1.0
    return NcclPlan(algorithm, p.name, m, spread, nch, steps, split, pipelined, chunk, pieces, share, small,
                    used_ch, used_threads, corr, tuned, Protocol(p.name, payload_efficiency=share * small * corr), lat + lag, lag, units,
                    single_call)


def kernel_cap_us(plan: NcclPlan, nbytes: float) -> float:
    """The least time NCCL's per-channel kernel cap leaves the data of ``plan`` (0 where none applies).

    NCCL's tuner caps a tree all_reduce at ``perChMaxTreeBw`` per channel of its search (``tuning.cc``:
    ``busBw = min(busBw * .92, nChannels * perChMaxTreeBw)``, a table per GPU generation and node count):
    what one channel's tree kernel moves at most, measured by NCCL's authors, whatever the links could
    carry. The engine's links know nothing of it, so the bandwidth term is at least the size over that
    cap, at the same payload share, small-message share and tree correction as the engine's own
    protocol (a pipeline runs at its slowest stage: the larger of the two times). On DGX B200 nodes (8 x
    400G) across 4 or more nodes it is 8 channels x 24 GB/s, and Together AI's forced-Tree runs at 4-64
    nodes measure 191-196 GB/s (docs/accuracy-at-scale.md, seventh pass). CollNetDirect's all_reduce is
    bounded the same way by NCCL's model of its kernels (``nChannels x bwIntra``, divided by the
    GPUs-per-channel factor, x0.85 on Hopper+: every GPU of a node scatters and gathers through the
    channels at once): 585 GB/s on those nodes, where their SHARP runs measure 530-606 and the links
    alone would give 760. NCCL's other bandwidth terms are estimates of links the engine models itself.

    >>> from sim.collectives import get_collective
    >>> from sim.presets import load_topology
    >>> from sim.nccl import config
    >>> with config.use(config.make_config(version="2.28")):
    ...     p = plan_nccl(get_collective("all_reduce"), 1 << 34, load_topology("dgx-b200:nodes=4"), "tree", "Simple")
    ...     round(kernel_cap_us(p, 1 << 34))           # 16 GiB at 8 x 24 x 0.5 GB/s of algbw
    178957
    """
    tuned = plan.tuned
    cap = tuned.detail.get("kernel_cap_alg_GBps", 0.0) if tuned is not None else 0.0
    alg = cap * plan.engine_protocol.payload_efficiency
    return nbytes / (alg * 1e3) if alg > 0 and nbytes > 0 else 0.0


class KernelCapped(NamedTuple):
    """A plan's terms once NCCL's kernel cap applies (:func:`kernel_capped`)."""

    latency_us: float      # the plan's latency term, less the tree lag the cap hides
    data_us: float         # the bandwidth term: the links' data time, or the cap where it is slower
    capped: bool           # the cap set the bandwidth term
    lag_hidden_us: float   # the tree lag hidden under the cap
    lag_slack_us: float    # what the cap leaves idle over the links' data time: the most lag it can hide

    def lag_explain(self, plan: NcclPlan) -> dict:
        """The tree lag said apart for ``--explain`` (part of ``latency_us``): its units, what is paid, what
        the cap hides and the slack (a row's time at lag ``v`` is ``t(0) + max(0, v x units - slack)``)."""
        if not plan.tree_lag_units:
            return {}
        out = {"tree_lag_units": plan.tree_lag_units, "tree_lag_us": plan.tree_lag_us - self.lag_hidden_us}
        if self.lag_hidden_us:
            out["tree_lag_hidden_us"] = self.lag_hidden_us
        if self.lag_slack_us:
            out["tree_lag_slack_us"] = self.lag_slack_us
        return out


def kernel_capped(plan: NcclPlan, nbytes: float, data_us: float) -> KernelCapped:
    """``plan``'s terms once NCCL's per-channel kernel cap (:func:`kernel_cap_us`) applies to a data time of
    ``data_us`` on the links.

    The tree's per-chunk lag (:func:`tree_chunk_lag_us`, held in ``plan.latency_us``) is a cost of the
    network stage: every level's message waits on it. The kernel is another stage of the same pipeline,
    and a pipeline runs at its slowest stage, not at the sum of them: where the cap is slower than the
    links plus the lag, the lag is hidden under it (Together AI's forced-Tree runs on DGX B200 nodes at
    16-64 nodes measure 193-196 GB/s, at the cap of 192; the cap plus the lag gave 174-179). Elsewhere
    the cap does not bind and nothing changes.

    >>> from sim.collectives import get_collective
    >>> from sim.presets import load_topology
    >>> from sim.nccl import config
    >>> with config.use(config.make_config(version="2.28")):
    ...     p = plan_nccl(get_collective("all_reduce"), 1 << 34, load_topology("dgx-b200:nodes=16"), "tree", "Simple")
    ...     k = kernel_capped(p, 1 << 34, 1000.0)
    >>> k.capped, k.lag_hidden_us == p.tree_lag_us > 0, round(k.data_us) == round(kernel_cap_us(p, 1 << 34))
    (True, True, True)
    >>> k.latency_us == p.latency_us - k.lag_hidden_us, k.lag_slack_us == k.data_us - 1000.0
    (True, True)
    """
    cap = kernel_cap_us(plan, nbytes)
    lag = plan.tree_lag_us
    slack = max(0.0, cap - data_us)
    if cap > data_us + lag:
        return KernelCapped(plan.latency_us - lag, cap, True, lag, slack)
    return KernelCapped(plan.latency_us, data_us, False, 0.0, slack)


def software_overlap_shift_us(plan: NcclPlan, data_us: float) -> float:
    """What ``plan.latency_us`` changes by when a ring's software cost hides behind ``data_us``, the data time a
    model charges, rather than behind the transfer of NCCL's closed form.

    A ring step across nodes costs the larger of the proxy's work on its message and its own transfer
    (:func:`sim.nccl.tuner._ring_software_hidden_us`), so the latency term holds the work less what hides,
    ``min(work, transfer)`` summed over the steps. The tuner sizes that transfer from its own bandwidth; the
    engine and the flow model charge theirs. Hiding the tuner's transfer behind the engine's shorter one
    took off more than the engine added, and a ring moving 1 GiB came out 2x faster than one moving 8 bytes
    (a planner's trial, twenty-ninth pass). What hides is now at most the data time charged as well:
    ``min(work, NCCL's transfer, the model's data time)``, so the time of a larger message is never below a
    smaller one's by more than the two transfers' slopes differ (0.02% in the trial's sweeps, where it was
    2x). Hiding behind the model's data time alone (``min(work, data)``, exactly monotone) was tried: it
    hides more where the engine's transfer is the longer (rings at 128-540 Polaris nodes, whose channels
    NCCL thins at those sizes), and out of sample their busbw fell 5-9 points further from the measured
    (docs/accuracy-at-scale.md, twenty-ninth pass): those runs pay their software cost largely on top of
    the transfer, not under it.

    >>> from sim.collectives import get_collective
    >>> from sim.presets import load_topology
    >>> p = plan_nccl(get_collective("all_gather"), 1 << 30, load_topology("dgx-h100:nodes=32,fabric=slingshot"), "ring", "Simple")
    >>> d = p.tuned.detail
    >>> software_overlap_shift_us(p, 0.0) == d["software_overlap_us"]     # no data time: nothing hides
    True
    >>> software_overlap_shift_us(p, 1e9)          # no more than NCCL's transfer hides: as the tuner took it
    0.0
    """
    hidden = float(plan.tuned.detail.get("software_overlap_us", 0.0)) if plan.tuned is not None else 0.0
    return hidden - min(hidden, max(0.0, data_us))   # hidden: min(work, NCCL's transfer)


def tree_lag_units(algorithm: str, proto: str, m: Machine, nbytes: float, nchannels: int, depth: int) -> float:
    """Tree levels across nodes (log2 of the nodes) times the chunks of ``nbytes / nchannels`` (one of
    NCCL's channels) at the chunk size the model's pipeline uses (:func:`sim.nccl.protocols.nccl_chunk_bytes`
    against the engine program's ``depth`` steps), for a tree with Simple or LL128 across a network; 0
    otherwise (LL's 32 KiB chunks are the latency-bound sizes, which the latency term covers). What
    ``tree_chunk_lag_us`` multiplies (:func:`tree_chunk_lag_us`).

    Not NCCL's own chunk count: NCCL 2.18-2.19 halve a tree/Simple chunk in three stages against their
    tree depth (about half the engine's steps), and 2.20+ not at all (a chunk is one buffer step, 512 KiB
    by default), which leaves 2-16x fewer, larger chunks at 2-128 MiB. Fitted on that count the lag gains
    nothing out of sample (docs/accuracy-at-scale.md, sixth pass), nor does moving the engine's pipeline
    to NCCL's chunks, or LL128 trees' lag to NCCL's LL128 chunks with a constant of their own (thirtieth
    pass); on this count it does.

    >>> from sim.presets import load_topology
    >>> from sim.nccl.machine import machine
    >>> m = machine(load_topology("dgx-h100:nodes=16"))
    >>> tree_lag_units("tree", "Simple", m, 1 << 30, 8, 22)     # 4 levels x 256 chunks of 512 KiB
    1024.0
    >>> tree_lag_units("tree", "Simple", m, 16 << 20, 8, 22)    # 2 MiB a channel: 32 KiB chunks (< 176), 64 of them
    256.0
    >>> tree_lag_units("ring", "Simple", m, 1 << 30, 8, 22)
    0.0
    """
    if algorithm != "tree" or proto not in ("Simple", "LL128") or m.nnodes < 2 or m.inter_class != "net":
        return 0.0
    per_channel = nbytes / nchannels
    chunk = nccl_chunk_bytes(algorithm, proto, per_channel, depth=depth)
    return math.log2(m.nnodes) * math.ceil(per_channel / chunk)


def tree_chunk_lag_us(algorithm: str, proto: str, m: Machine, nbytes: float, nchannels: int, depth: int) -> float:
    """What a tree across nodes loses to its depth beyond the engine's link bandwidths, in us:
    ``tree_chunk_lag_us`` (:mod:`sim.nccl.calibration`) for every tree level and every chunk a channel
    carries (:func:`tree_lag_units`). 0 for other algorithms and protocols, and inside a node.

    Why: on the public sweeps at 32 to 540 nodes (CSCS Alps, ALCF Polaris) a tree/Simple all_reduce runs
    at 0.4-0.6 of the model's busbw at 2-128 MiB and approaches it at 1-4 GiB, and the loss grows with
    the node count; at 2 nodes it is small. The model's tree pipeline shrinks its chunks the deeper the
    tree and the smaller the message, so a cost per chunk and per level gives both trends: at mid sizes a
    cost per byte that grows with the depth, fading as the chunks reach 512 KiB. Read as a per-message
    delay that flow control cannot hide, adding up level after level; the mechanism is inferred from the
    shape, not measured, and NCCL's own chunk count does not carry it (:func:`tree_lag_units`;
    docs/accuracy-at-scale.md, sixth pass). The constant is fitted and cross-validated by system. LL128
    trees pay it too (sixteenth pass): at 2 nodes on EFA, GPUDirect-TCPXO, InfiniBand and RoCE their
    mid sizes ran 10-37% faster in the model than measured, and at 4-32 p5 nodes 30-36%.

    >>> from sim.presets import load_topology
    >>> from sim.nccl.machine import machine
    >>> with calibration.override({"tree_chunk_lag_us": 0.5}):   # 0.5 us x 4 levels x 256 chunks
    ...     tree_chunk_lag_us("tree", "Simple", machine(load_topology("dgx-h100:nodes=16")), 1 << 30, 8, 22)
    512.0
    """
    per = calibration.value("tree_chunk_lag_us")
    return per * tree_lag_units(algorithm, proto, m, nbytes, nchannels, depth) if per else 0.0


def nvls_loop(algorithm: str, nbytes: int, m: Machine) -> tuple[int, int]:
    """(chunk, bytes of one loop) of NCCL's NVLS kernels (NCCL 2.27.7).

    One loop moves ``channels x heads x chunk`` bytes: every NVLS channel (``NVLS_NCHANNELS``: 16 on
    Hopper; on Blackwell 24 inside one NVLink domain, 32 across domains, ``transport/nvls.cc``) hands one
    chunk to each of the domain's heads (at most 32, :func:`sim.algorithms.nvls.nvls_heads`). The chunk is
    ``NCCL_NVLS_CHUNKSIZE`` (128 KiB), halved for sizes that give few loops (``enqueue.cc``: NVLS below
    64/8/2 x concurrentOps x chunk; NVLSTree 64 KiB from 4 nodes, then below 16/4/1 x). The engine
    simulates one channel carrying the whole buffer in loops of this size, so the pipeline fills and
    drains over as many loops as NCCL's does.

    >>> from sim.presets import load_topology
    >>> from sim.nccl.machine import machine
    >>> nvls_loop("nvls", 8 << 30, machine(load_topology("gb200-nvl72")))      # 24 channels x 32 heads
    (131072, 100663296)
    >>> nvls_loop("nvls", 1 << 30, machine(load_topology("gb200-nvl72")))[0]
    65536
    """
    ops = nvls_channels(m) * nvls_heads(m.ppn)
    chunk = NVLS_CHUNK_BYTES
    if algorithm != "nvls" and m.nnodes >= NVLS_TREE_SMALL_CHUNK_NODES:
        chunk = min(chunk, NVLS_TREE_SMALL_CHUNK_BYTES)
    for factor, floor in NVLS_CHUNK_STEPS["nvls" if algorithm == "nvls" else "nvls_tree"]:
        if nbytes < factor * ops * chunk and chunk > floor:
            chunk = floor
    return chunk, ops * chunk


def latency_us(coll, topo: Topology, algorithm: str, proto: str, steps: int, nbytes: int = 1,
               m: Machine | None = None) -> float:
    """The latency term for ``nbytes``: the tuner's for NCCL's algorithms (with its size rules: the
    ring plateau); for the others a ring-like base latency plus ``steps`` hops at the per-hop latency of
    the slowest link class they cross."""
    m = m or machine(topo)
    tuned = tuner_terms(coll, nbytes, topo, algorithm, proto, m) if algorithm in NCCL_ALGORITHMS else None
    return _latency_term(tuned, m, get_protocol(proto).name, steps)


def _latency_term(tuned: Terms | None, m: Machine, proto: str, steps: int) -> float:
    if tuned is not None and math.isfinite(tuned.latency_us):
        return tuned.latency_us
    cls = m.inter_class or m.intra_class or "nvlink"
    hop = max(hop_latency_us(cls, "ring", proto), m.inter_wire_us if m.nnodes > 1 else m.intra_wire_us)
    return base_latency_us("ring", proto) + steps * hop


def payload_share(coll, topo: Topology, algorithm: str, proto: str, m: Machine | None = None) -> float:
    """Bandwidth of ``proto`` relative to Simple for ``algorithm``, per NCCL's model (wire format for
    algorithms NCCL does not have)."""
    p = get_protocol(proto)
    if p.name == "Simple":
        return 1.0
    if algorithm in NCCL_ALGORITHMS:
        # a ratio of two bandwidths of the hardware: NCCL_PROTO=LL128 disabling Simple does not change it (it once
        # fell back to the wire format, 0.94 instead of NCCL's 0.82 for a p5 ring: 15% too fast), nor does
        # NCCL_MIN_NCHANNELS adding channels beyond the search's: NCCL's tuner counts the search's channels
        # (tuning.cc: graphs[a]->nChannels), and more of them carry no more than the links (it once scaled
        # Simple's bandwidth with the forced count against LL's fixed cap: 24 channels halved LL's busbw, 64
        # cut it to a fifth). Fewer channels (NCCL_MAX_NCHANNELS) keep their ratio: each carries LL at
        # NCCL's per-channel share of Simple's
        cfg = nccl_config.current()
        free = replace(cfg, protos=(), min_channels=None) if (cfg.protos or cfg.min_channels) else None
        with nccl_config.use(free) if free is not None else nullcontext():
            t, s = (tuner_terms(coll, 1 << 30, topo, algorithm, x, m) for x in (p.name, "Simple"))
        if t.bus_GBps > 0 and s.bus_GBps > 0:
            return min(1.0, t.bus_GBps / s.bus_GBps)
    return p.payload_efficiency


def small_message_share(nbytes: int, topo: Topology, algorithm: str, proto: str, nchannels: int) -> tuple[float, int, int]:
    """Share of the bandwidth NCCL puts to work on a small message: (share, channels, threads).

    NCCL (enqueue.cc ``topoGetAlgoInfo``) drops channels while the message is smaller than channels x
    threads x ``THREAD_THRESHOLD`` bytes (x nranks for ring LL); the message then moves at the share of
    the bandwidth those channels carry. (NCCL also halves the threads of the last channel; that keeps
    each thread's work at the threshold, a fixed few-byte cost, so it is not modelled.) NVLS and
    CollNet keep their channels.

    >>> from sim.presets import load_topology
    >>> small_message_share(64 << 10, load_topology("gb200-nvl72:gpus_per_node=8"), "ring", "LL", 16)
    (0.125, 2, 512)
    >>> small_message_share(1024, load_topology("gb200-nvl72:gpus_per_node=8"), "ring", "LL", 16)
    (0.0625, 1, 64)
    """
    nc, nt = used_channels(nbytes, topo.nranks, algorithm, get_protocol(proto).name, nchannels)
    full = nchannels
    cfg = nccl_config.current()
    if cfg.min_channels and nc < nchannels:
        # channels NCCL_MIN_NCHANNELS adds beyond the search's carry no more than the links: the message
        # moves at the share of the channels that fill them (the search's), not of the forced count
        full = min(nchannels, replace(cfg, min_channels=None).channels(graph_for(machine(topo), algorithm).nchannels))
    return min(1.0, nc / full), nc, nt


def used_channel_pieces(pieces: int, wire_bytes: float, small_share: float) -> tuple[int, float]:
    """(pieces, wire bytes each) of one chain call on the channels NCCL actually runs.

    On a small message NCCL runs ``small_share`` of its channels (:func:`small_message_share`),
    each carrying ``1 / small_share`` times the bytes at its own full rate; the plan folds that into a payload
    efficiency, every channel at ``small_share`` of its rate. Both load the busiest link alike (what the
    period, :func:`loop_period_us`, reads), but a chain's fill is n - 1 hops of *one* piece,
    and a piece moves at its channel's rate: folded, the fill took ``1 / small_share`` times too long, and one
    call grew shorter as the size doubled and NCCL added channels (64 nodes, LL: 47.6 ms at 2 MiB, 25.0 ms
    at 4 MiB). Here the same bytes go as ``1 / small_share`` times the pieces, each at the full rate: one call
    on the channels NCCL runs costs what the call on all of them costs for ``1 / small_share`` times the bytes.

    >>> used_channel_pieces(8, 800.0, 0.125), used_channel_pieces(8, 800.0, 1.0)
    ((64, 100.0), (8, 800.0))
    """
    if small_share >= 1:
        return pieces, wire_bytes
    more = max(pieces, math.ceil(pieces / small_share - 1e-9))
    return more, wire_bytes * pieces / more


def simulate_with_plan(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels=None, pipeline=None, root: int = 0,
        trace: bool = False, engine: str = "default"):
    """The engine's prediction of ``algorithm`` with NCCL protocol ``proto``; a :class:`~sim.engine.result.Result`.
    ``engine`` names what times the programs (:func:`sim.engine.run_program`)."""
    from ..engine.result import engine_result
    return engine_result(coll, nbytes, topo, engine_timing(coll, nbytes, topo, algorithm, proto, nchannels=nchannels,
                                                           pipeline=pipeline, root=root, trace=trace, engine=engine), trace)


def engine_timing(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels=None, pipeline=None, root: int = 0,
                  trace: bool = False, engine: str = "default"):
    """The engine run(s) of ``algorithm`` with NCCL protocol ``proto`` under NCCL's plan, as a
    :class:`~sim.result.EngineTiming` (:func:`sim.result.engine_result` makes the Result)."""
    from ..algorithms import analytic
    from ..engine.result import EngineTiming
    plan = plan_nccl(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline, root=root)
    nch, spread, pieces, tuned = plan.nchannels, plan.spread, plan.pieces, plan.tuned
    nvls = algorithm if algorithm.startswith("nvls") else ""
    one = _program(algorithm, coll, topo, nch, 1, root, spread)
    duplex = is_duplex(coll, topo)
    sim_pieces = steady_state_pieces(pieces, one)
    if trace and pieces > sim_pieces:
        raise CollsimError(f"--trace: {pieces} chunks per channel is more than the engine simulates op by op "
                           f"({sim_pieces}); trace a smaller size or pass --pipeline {sim_pieces}")
    prog = _program(algorithm, coll, topo, nch, sim_pieces, root, spread)
    frac = sim_pieces / pieces
    args = (algorithm, coll, topo, nch, pieces, sim_pieces, root, spread, float(nbytes), plan.engine_protocol, engine, duplex)
    runs, data_us = _data_runs(*args) if trace else _data_runs_cached(*args, calibration.current().links)
    if algorithm == "nvls" and plan.pipelined and sim_pieces > 0:
        # NCCL's one-domain NVLS kernel runs three warp groups per channel, pipelined through the NVLS
        # buffers (all_reduce.h): scatter copies a loop into the buffers before the switch sees it, gather
        # copies it out after the multicast. The engine times the switch traffic; the first loop's scatter
        # and the last loop's gather add one loop period each (the busiest link's time per loop). Not on
        # NVLSTree: there the engine's own tree stages already fill more loops than NCCL's measured ramp
        # (docs/nccl-model.md, GB200 NVL72).
        data_us += 2 * float(np.max(runs.link_busy_us, initial=0.0)) / sim_pieces
    kc = kernel_capped(plan, nbytes, data_us)
    data_us = kc.data_us
    lat = kc.latency_us + software_overlap_shift_us(plan, data_us)
    single_call = None
    if plan.single_call_latency_us is not None:
        # nccl-tests' back-to-back calls overlap down the chain: a call costs its busiest link's time, not the
        # chain's fill and drain (loop_period_us); one call alone costs the chain's latency and fill
        single_call = plan.single_call_latency_us + _single_call_data_us(plan, args, data_us)
        data_us = loop_period_us(runs.link_busy_us, frac)
    head = {"latency_us": lat, "bandwidth_term_us": data_us,
            "effective_busbw_GBps": analytic.busbw_GBps(coll.name, topo.nranks, nbytes, data_us) if data_us > 0 else 0.0,
            "payload_share": plan.payload_share,
            "chunk_bytes": plan.chunk_bytes or int(math.ceil(nbytes / nch / plan.split)),
            "pieces_per_channel": pieces, "simulated_pieces": sim_pieces, **spread_explain(plan),
            "link_efficiency": ", ".join(f"{k} {v:.3g}" for k, v in _efficiencies(topo, nvls, duplex, algorithm == "p2p").items())}
    tail: dict = {}
    if nvls and "gpus_per_domain" in one.params:
        k = int(one.params["gpus_per_domain"])
        tail["nvls_heads"] = f"{nvls_heads(k)} of {k} GPUs per NVLink domain"
    if plan.tree_correction != 1:
        tail["tree_correction"] = plan.tree_correction
    if kc.capped:   # the bandwidth term is the kernel's, not the links': said so, with NCCL's figure
        tail["kernel_cap_us"] = kc.data_us
    tail.update(kc.lag_explain(plan))   # part of latency_us: said apart, what the tree's depth costs beyond the links
    if tuned is not None and tuned.detail.get("rendezvous_us"):   # part of latency_us: said apart, it explains a jump
        tail["rendezvous_us"] = tuned.detail["rendezvous_us"]
    if tuned is not None and tuned.detail.get("recv_copy_us"):    # part of latency_us: the host-to-GPU copies
        tail["recv_copy_us"] = tuned.detail["recv_copy_us"]
    tail.update(plan.channels_used_explain())
    if tuned is not None and math.isfinite(tuned.time_us):
        tail["tuner_time_us"] = tuned.time_us
    if single_call is not None:
        tail["single_call_us"] = single_call
        tail["nccl_tests_loop"] = NCCL_TESTS_LOOP_NOTE
    return EngineTiming(algorithm, plan.protocol, plan.steps, nch, pieces, prog, runs, lat, data_us, frac, head, tail)


def _single_call_data_us(plan: NcclPlan, args: tuple, data_us: float) -> float:
    """One rooted call's data time alone, on the channels NCCL runs: the engine run again with the same bytes as
    :func:`used_channel_pieces` cuts them, at the full rate (``data_us``, every channel at ``small_share`` of its
    rate, is right for the period, not for a chain's fill)."""
    if plan.small_share >= 1:
        return data_us
    algorithm, coll, topo, nch, pieces, _, root, spread, nbytes, protocol, engine, duplex = args
    more, _ = used_channel_pieces(pieces, 1.0, plan.small_share)
    full = replace(protocol, payload_efficiency=plan.payload_share * plan.tree_correction)
    sim_more = steady_state_pieces(more, _program(algorithm, coll, topo, nch, 1, root, spread))
    _, t = _data_runs_cached(algorithm, coll, topo, nch, more, sim_more, root, spread, nbytes, full, engine, duplex,
                             calibration.current().links)
    return t


NCCL_TESTS_LOOP_NOTE = ("nccl-tests times back-to-back calls, which overlap down a rooted chain: the time is one call's "
                        "period (its fixed cost and the busiest link's transfer); single_call_us is one call alone")


def loop_period_us(link_busy_us, scale: float = 1.0) -> float:
    """The data time of one call of a rooted chain (broadcast, reduce) among calls run back to back: its busiest
    link's busy time (``link_busy_us`` of a run that moved ``scale`` of the call's bytes). Each link of the chain
    carries the call's bytes once, and successive calls follow each other down the chain, so in steady state a
    call costs what its slowest link needs to move it; the chain's fill (n-1 hops of the first pieces) is paid
    once per timed loop, not per call (:func:`sim.nccl.tuner._loop_latency_us` says why nccl-tests measures this)."""
    busy = np.asarray(link_busy_us, dtype=float)
    return float(busy.max(initial=0.0)) / scale


def _data_runs(algorithm: str, coll, topo: Topology, nch: int, pieces: int, sim_pieces: int, root: int, spread: bool,
               nbytes: float, protocol: Protocol, engine: str, duplex: bool) -> tuple:
    """(the engine's runs, the data-movement time in us) of ``sim_pieces`` of the plan's ``pieces`` per
    channel on the effective links, extrapolated to ``pieces`` past the ops budget. Everything it reads is
    an argument or a link constant of the calibration in force: no latency constant reaches it."""
    from ..engine import run_program
    eff = effective_topology(topo, algorithm if algorithm.startswith("nvls") else "", duplex, p2p=algorithm == "p2p")
    prog = _program(algorithm, coll, topo, nch, sim_pieces, root, spread)
    runs = run_program(prog, eff, nbytes * sim_pieces / pieces, protocol, engine=engine)
    data_us = runs.time_us
    if sim_pieces < pieces:
        half = _program(algorithm, coll, topo, nch, sim_pieces // 2, root, spread)
        t_half = run_program(half, eff, nbytes * (sim_pieces // 2) / pieces, protocol, engine=engine).time_us
        data_us = extrapolate_steady_state(data_us, t_half, sim_pieces, pieces)
    return runs, data_us


@lru_cache(maxsize=8192)
def _data_runs_cached(*args) -> tuple:
    """:func:`_data_runs`, kept per arguments and the calibration's link constants (the last argument,
    :attr:`sim.nccl.calibration.Calibration.links`, which only keys the cache): the time-only constants
    (latency, per-step and per-peer overheads, rendezvous, launch, tree lag) are added outside the
    engine, so a search over them, or a cross-validation fold that moves only them, reuses every run
    (tests/model/test_calibration_object.py checks the times are the same). What is kept is the run's
    time and link tables, not its per-op times (a trace runs afresh), so the cache stays small."""
    runs, data_us = _data_runs(*args[:-1])
    n = len(runs.op_index)
    times, index = np.broadcast_to(np.zeros(1), (n,)), np.broadcast_to(np.zeros(1, np.int64), (n,))
    # the op count (simulated_ops) without per-op memory
    return replace(runs, op_start_us=times, op_end_us=times, op_index=index), data_us


def _split(one: Program, nch: int) -> int:
    """Chunks one channel's data is cut into per pipeline piece (shards or heads of the program).

    all_to_all's n x n blocks are every rank's buffer cut n ways: NCCL chunks each peer's block
    (nbytes / n) on its own, so a rank's buffer is n blocks, not n x n (else 32 ranks ran unpipelined)."""
    per_buffer = one.nchunks // one.nranks if one.collective.pairwise else one.nchunks
    return max(1, per_buffer // nch)


def steady_state_pieces(pieces: int, one: Program, ops_budget: int | None = None) -> int:
    """Pieces per channel the engine simulates op by op for ``pieces`` (``one``: the one-piece program):
    all of them while they fit ``ops_budget`` ops (default :data:`OPS_BUDGET`, read at the call), else
    enough for a full pipeline, at least steps + 2 (a 2-rack NVLSTree, 6 steps, gives half its bandwidth
    extrapolated from 3 pieces), whatever the budget, up to :data:`PROBE_PIECES_MAX`."""
    budget = OPS_BUDGET if ops_budget is None else ops_budget
    return min(pieces, max(2, min(one.steps + 2, PROBE_PIECES_MAX), budget // max(1, one.nops)))


def extrapolate_steady_state(t_sim: float, t_half: float, sim_pieces: int, pieces: int) -> float:
    """The time of ``pieces`` pieces from runs of ``sim_pieces`` (``t_sim``) and ``sim_pieces // 2``
    (``t_half``): once the pipeline is full every further piece adds one period."""
    return t_sim + (pieces - sim_pieces) * (t_sim - t_half) / (sim_pieces - sim_pieces // 2)


def is_duplex(coll, topo: Topology) -> bool:
    """Whether every GPU both sends and receives: all but a broadcast/reduce between two GPUs."""
    return not (coll.rooted and topo.nranks == 2)


def _efficiencies(topo: Topology, nvls: str, duplex: bool = True, p2p: bool = False) -> dict:
    out: dict[str, float] = {}
    for l in topo.links:   # the first link of each kind speaks for its kind
        if l.kind not in out:
            out[l.kind] = link_efficiency(topo, l, nvls, duplex, p2p)
    return out


__all__ = ["simulate_with_plan", "engine_timing", "plan_nccl", "NcclPlan", "nccl_channels", "effective_topology", "spread_program", "channel_order", "mesh_cycles", "single_node_mesh", "spread_explain", "link_efficiency", "latency_us", "tree_chunk_lag_us", "tree_lag_units", "nvls_tree_share", "kernel_cap_us", "kernel_capped", "KernelCapped", "software_overlap_shift_us",
           "payload_share", "steady_state_pieces", "extrapolate_steady_state", "OPS_BUDGET"]
