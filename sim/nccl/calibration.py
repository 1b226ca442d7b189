"""The model's fitted constants, in one place, and the fabrics they describe.

Everything else in the NCCL model is NCCL's own arithmetic or a public hardware fact. These few numbers
are what a measurement has to tell us, so they are *fitted* on the public cases
(``sim/data/public_cases.json``) and refitted without the case being scored when
``collsim validate --cross-validate`` estimates the model's out-of-sample accuracy
(:mod:`sim.commands.crossval`).

* per fabric (``fabric=`` on node presets, ``meta.fabric`` in topology files): the share of a NIC's
  line rate an NCCL collective sustains (``efficiency``) and the software latency the net transport
  adds to every message beyond NCCL's InfiniBand-measured hop latency (``latency_us``);
* ``launch_overhead_us``: what one nccl-tests iteration costs beyond NCCL's modelled latency (host
  enqueue, kernel launch), once per call;
* ``per_gpu_launch_us``: what each further GPU costs when one thread launches several
  (nccl-tests ``-g N``, ``collsim simulate --gpus-per-process N``): the thread enqueues the collective and
  launches a kernel for each of its GPUs one after the other inside ``ncclGroupStart/End``;
* ``host_bounce_efficiency``, ``host_bounce_duplex_efficiency``: share of the PCIe rate left when GPUs
  without peer-to-peer exchange data through host memory, one way (2-GPU broadcast/reduce) or with every
  GPU sending and receiving at once (everything else);
* ``p2p_peer.<fabric>``: what each remote peer adds to an all_to_all (one send/recv pair per peer, each
  posted and completed by the proxy thread through the fabric's net plugin, one after the other);
* ``rendezvous_us.<fabric>``: what a network message at or above the fabric's rendezvous threshold adds
  (fabrics whose transport has one: Slingshot's cxi, 16 KiB by default);
* ``recv_copy_us.<fabric>``: what copying one received small message from the provider's host buffer into
  GPU memory with cudaMemcpy costs (fabrics whose provider can match in software: Slingshot's cxi), paid
  per network message of a tree hop or an all_to_all peer (a ring step pays the larger of it and its
  net-overhead floor) when the run set
  ``FI_CXI_RX_MATCH_MODE=software`` and GDRCopy does not take the copy (:func:`sim.nccl.tuner._recv_copy_us`);
* ``nvls_loss_per_doubling``: the share of NCCL's ``nvlsEfficiency`` NVLS loses per doubling of the
  NVLink domain beyond the 8 GPUs NCCL tuned it on (a GB200 NVL72 rack is 3.2 doublings).
* ``nvls_tree_share``: the share of NVLS's NVLink rate an NVLSTree all_reduce keeps: its kernel also runs the
  network tree, so the warps that copy into and out of the NVLS buffers are fewer than NVLS alone has
  (:func:`sim.nccl.execution.nvls_tree_share`). Prior 1.0 (NCCL's own model charges NVLSTree nothing for it).
* ``tree_chunk_lag_us``: what every level of a tree across nodes adds to each chunk of a channel's tree
  with Simple or LL128, at the engine's chunk size (:func:`sim.nccl.execution.tree_chunk_lag_us`): the loss of deep
  trees at mid sizes that NCCL's model and the engine's link bandwidths do not have (cause open). Prior 0
  (NCCL's own model).
* ``gdr_host_bridge_efficiency``: the share of the fabric's efficiency left when a GPU's GPUDirect RDMA
  crosses the CPU's PCIe root complex on a host of PCIe Gen4 or older, or beyond the GPU's own root complex
  (a PCIe GPU, its NIC on a CPU root port: ``nic_path`` PHB or farther; Gen5 hosts at PHB are not charged:
  :func:`sim.topology.hardware.gdr_host_bridge_loss`). NCCL's own model charges that path nothing, so the prior
  is 1.0.
* ``no_gdr_p2p_share``: the share of the fabric's all_to_all rate (``p2p_share``) a node keeps when some of
  its GPUs reach no NIC within the host bridge (``gpus_without_gdr``: NODE or SYS, so no GPUDirect RDMA
  even at NCCL_NET_GDR_LEVEL=PHB and no PXN relay; NCCL stages their sends and receives through host
  memory). Rings and trees never enter a node at those GPUs. Prior 1.0 (NCCL's own model); one system
  (ALCF Polaris) fits it, and ``p2p_share`` is fitted on the runs without such GPUs, so neither carries
  the other's cause into a fold that lacks it.
* ``blackwell_nvlink_hop_us``: what each NVLink hop of a Blackwell GPU adds to NCCL's per-hop latency
  (``hwLat``, measured on earlier GPUs). Not fitted: 0.7 us from a published pair of runs (NVIDIA/nccl
  #1940: an 8-byte all_reduce, one NVLink hop, 3.0 us on 8 B200 and 2.3 us on 8 H200 with the same
  tuning). It is here, among the fitted constants, because NCCL's tuner does not know it either
  (:func:`nccl_view` sets it to 0) and a fold keeps it at that figure.

The values are an immutable :class:`Calibration`: :data:`DEFAULT` is the in-sample fit (every public
case; ``docs/nccl-model.md`` lists the values with their sources) and ``with_values`` makes another. The
model reads the calibration in force through one documented context, :func:`current` (a
:class:`contextvars.ContextVar`, :data:`DEFAULT` unless a block says otherwise): :func:`use` puts a
calibration in force for a block (a cross-validation fold), :func:`override` is ``use`` of the current
one with some values changed. Nothing is mutated, so nothing needs clearing: caches whose results depend
on the values take the :class:`Calibration` as part of their key.

>>> get_fabric("ib").title
'InfiniBand (RDMA verbs, ConnectX)'
>>> with use(DEFAULT.with_values({"launch_overhead_us": 1.0})):
...     value("launch_overhead_us")
1.0
>>> value("launch_overhead_us") == DEFAULT.value("launch_overhead_us")
True
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property

from ..errors import CollsimError
from ..topology.fabrics import FABRICS, Fabric, get_fabric  # the fabrics and their priors (topology layer)

# In-sample fit on all public cases (``collsim validate --cross-validate`` prints it as "fit on every case";
# docs/nccl-model.md, Calibration); overridden per fold by --cross-validate.
DEFAULTS: dict[str, float] = {
    # fitted: 0.0. Held at 3.0: the shared acceptance set scores A1 and C1 without their run conditions
    # (-g 8, EFA), and a smaller value takes them further from it; --cross-validate refits it per fold.
    "launch_overhead_us": 3.0, "per_gpu_launch_us": 2.5,
    "host_bounce_efficiency": 0.93, "host_bounce_duplex_efficiency": 0.71,
    "nvls_loss_per_doubling": 0.05,
    # fitted on the busbw rows of the multi-node NVLSTree all_reduces that their NVLink bounds (2-node H100 runs
    # of AWS p5 and the Dell XE9680; Together AI's 32-node B200 runs)
    "nvls_tree_share": 0.89,
    # per tree level and chunk of a tree (Simple or LL128) across nodes (us); fitted on the mid- and large-size rows of the
    # multi-node all_reduce cases (ALCF Polaris and CSCS Alps at 2-540 nodes, the p5s at 2-32 nodes)
    "tree_chunk_lag_us": 0.66,
    # GPUDirect RDMA across the CPU's PCIe root complex (GPU on PCIe, NIC on a CPU root port: nic_path PHB or
    # farther), share of the fabric's efficiency; 1.0 is NCCL's own model (no penalty for the path). Fitted on
    # ALCF Polaris and NERSC Perlmutter (A100, Slingshot) with Slingshot's efficiency fitted on the GH200 systems
    "gdr_host_bridge_efficiency": 0.9,
    # all_to_all of a node with GPUs that reach no NIC within the host bridge (no GPUDirect RDMA, no PXN: their
    # sends staged through host memory), share of the fabric's p2p rate; 1.0 is NCCL's own model. Fitted on
    # ALCF Polaris's all_to_alls alone (GPU0 and GPU2 at SYS to both NICs), the only such node in the set
    "no_gdr_p2p_share": 0.63,
    # not fitted: a published measurement, kept here because NCCL's tuner does not know it (nccl_view sets it
    # to 0). What each NVLink hop of a Blackwell GPU (B200, GB200, GB300) adds to NCCL's per-hop latency
    # table: nccl #1940 measures an 8-byte all_reduce (one hop) at 3.0 us on 8 B200 and 2.3 us on 8 H200
    "blackwell_nvlink_hop_us": 0.7,
    "efficiency.ib": 1.0, "efficiency.roce": 1.0, "efficiency.efa": 0.83, "efficiency.efa2": 0.89, "efficiency.slingshot": 0.83, "efficiency.tcpxo": 0.85,
    "latency.ib": 0.0, "latency.roce": 1.0, "latency.efa": 60.0, "latency.efa2": 20.0, "latency.slingshot": 0.0, "latency.tcpxo": 40.0,
    # latency.roce held at its prior 1.0 (fit 8 on one system, oci-gb200-v3, whose small sizes cross two MNNVL
    # racks with NVLS off; 60 before the Blackwell NVLink hop took the 63-hop chains' share: one system is no
    # reason to give every RoCE message 8 us). p2p_share.roce is the fit,
    # 1.0: GB300-128-A2A's busbw does not move with it (crossval._sensitive), so no case fits it
    # per-step overhead of a ring across nodes (us, LL; Simple x3); 0 = NCCL's own getNetOverhead. Fitted
    # per net plugin, then per fabric: p4d's EFA has no ring case to say, so it takes aws-ofi-nccl's value
    "net_overhead.ib": 0.0, "net_overhead.roce": 0.0, "net_overhead.efa": 10.0, "net_overhead.efa2": 10.0, "net_overhead.slingshot": 10.0, "net_overhead.tcpxo": 0.0,
    # what a rendezvous adds to a network message at or above the fabric's threshold (us; fabrics with one)
    "rendezvous_us.slingshot": 20.0,
    # a small message's copy from the provider's host buffer into GPU memory by cudaMemcpy (us; software matching)
    "recv_copy_us.slingshot": 7.0,
    # per remote peer of an all_to_all (us): the proxy's cost per send/recv pair through the fabric's plugin
    "p2p_peer.ib": 6.0, "p2p_peer.roce": 5.0, "p2p_peer.efa": 5.0, "p2p_peer.efa2": 3.75, "p2p_peer.slingshot": 2.25, "p2p_peer.tcpxo": 5.0,
    # p2p_share.ib held at its prior 1.0 (fit 0.86 on S2-A2A alone: one case is no reason to slow every
    # InfiniBand all_to_all; nccl-tests #267, sjeaugey: all_to_all runs at a NIC's rate)
    "p2p_share.ib": 1.0, "p2p_share.roce": 1.0, "p2p_share.efa": 1.0, "p2p_share.efa2": 0.93, "p2p_share.slingshot": 0.86, "p2p_share.tcpxo": 1.0,
}
assert set(DEFAULTS) >= {f"{k}.{f}" for f in FABRICS for k in ("efficiency", "latency", "p2p_share", "net_overhead", "p2p_peer")}

# The constants that only add time outside the engine (the latency term, the launch, the proxy's per-peer
# and per-step costs, a deep tree's per-chunk lag): an effective link never reads them, so the caches of engine runs are keyed by the
# calibration without them (:attr:`Calibration.links`) and a latency search reuses every run.
# tests/model/test_calibration_object.py checks that no link's bandwidth moves with any of them.
TIME_ONLY = ("latency.", "net_overhead.", "rendezvous_us.", "recv_copy_us.", "p2p_peer.", "launch_overhead_us", "per_gpu_launch_us",
             "blackwell_nvlink_hop_us",
             "tree_chunk_lag_us")


_KEY_SET = frozenset(DEFAULTS)
_SORTED_KEYS = tuple(sorted(DEFAULTS))


@dataclass(frozen=True)
class Calibration:
    """One set of values of the fitted constants (every key of :data:`DEFAULTS`), immutable and hashable
    (it keys caches). ``items`` is sorted by key; build one with :meth:`with_values`."""

    items: tuple[tuple[str, float], ...]

    @classmethod
    def from_values(cls, values: dict) -> "Calibration":
        if values.keys() != _KEY_SET:
            missing, unknown = _KEY_SET - set(values), set(values) - _KEY_SET
            raise CollsimError(f"a calibration needs exactly the constants {', '.join(DEFAULTS)}: "
                               f"missing {sorted(missing)}, unknown {sorted(unknown)}")
        # in the keys' sorted order, looked up rather than sorted: a cross-validation makes one per run
        return cls(tuple((k, float(values[k])) for k in _SORTED_KEYS))

    @cached_property
    def _values(self) -> dict[str, float]:
        return dict(self.items)

    @cached_property
    def _hash(self) -> int:
        return hash(self.items)

    def __hash__(self) -> int:
        # every cached prediction is keyed by the calibration in force, and a key is hashed on each lookup:
        # fifty (name, value) pairs each time was a few percent of a cross-validation's runs
        return self._hash

    def __getstate__(self) -> dict:
        # a string's hash differs from process to process: a pickled copy computes its own
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def value(self, key: str) -> float:
        return self._values[key]

    def as_dict(self) -> dict[str, float]:
        return dict(self.items)

    @cached_property
    def links(self) -> "Calibration":
        """This calibration with every :data:`TIME_ONLY` constant at its default: what the links' effective
        bandwidths depend on (a cache key for engine runs)."""
        return Calibration(tuple((k, DEFAULTS[k] if k.startswith(TIME_ONLY) else v) for k, v in self.items))

    def with_values(self, values: dict) -> "Calibration":
        """This calibration with ``values`` (keys of :data:`DEFAULTS`) changed."""
        unknown = values.keys() - _KEY_SET
        if unknown:
            raise CollsimError(f"unknown calibration constant(s) {', '.join(sorted(unknown))}: known are {', '.join(DEFAULTS)}")
        return Calibration.from_values({**self._values, **values})


DEFAULT = Calibration.from_values(DEFAULTS)
_CURRENT: ContextVar[Calibration] = ContextVar("collsim_calibration", default=DEFAULT)


def current() -> Calibration:
    """The calibration in force: :data:`DEFAULT` unless inside :func:`use` / :func:`override`."""
    return _CURRENT.get()


@contextmanager
def use(calibration: Calibration):
    """Put ``calibration`` in force inside the block (this thread / task only), then restore."""
    token = _CURRENT.set(calibration)
    try:
        yield calibration
    finally:
        _CURRENT.reset(token)




def value(key: str) -> float:
    """Constant ``key`` of the calibration in force."""
    return current().value(key)


def fabric_efficiency(fabric: str | None) -> float:
    return value(f"efficiency.{get_fabric(fabric or 'ib').name}")


def fabric_rendezvous_us(fabric: str | None) -> float:
    """What a rendezvous costs on ``fabric`` (0 where its transport has none)."""
    f = get_fabric(fabric or "ib")
    return value(f"rendezvous_us.{f.name}") if f.rdzv_threshold_bytes else 0.0


def fabric_latency_us(fabric: str | None) -> float:
    return value(f"latency.{get_fabric(fabric or 'ib').name}")


def fabric_net_overhead_us(fabric: str | None) -> float:
    """The fabric's per-step overhead of a ring across nodes (0: NCCL's own ``getNetOverhead``)."""
    return value(f"net_overhead.{get_fabric(fabric or 'ib').name}")


def fabric_recv_copy_us(fabric: str | None) -> float:
    """What copying a received small message into GPU memory by cudaMemcpy costs on ``fabric`` (0 where its
    provider never matches in software)."""
    f = get_fabric(fabric or "ib")
    return value(f"recv_copy_us.{f.name}") if f.software_matching else 0.0


def fabric_p2p_peer_us(fabric: str | None) -> float:
    """What each remote peer of an all_to_all costs the proxy thread on this fabric (us)."""
    return value(f"p2p_peer.{get_fabric(fabric or 'ib').name}")


def fabric_p2p_share(fabric: str | None) -> float:
    """Share of the fabric's efficiency its network links keep under all_to_all's many-peer p2p sends."""
    return value(f"p2p_share.{get_fabric(fabric or 'ib').name}")


def nccl_view(fabric: str | None) -> dict[str, float]:
    """The values NCCL's own tuner works with on ``fabric``, as a calibration override: the latency its net
    plugin reports (:attr:`Fabric.reported_latency_us`) and none of the costs collsim fits beyond NCCL's
    model (a fabric's software latency, ring-step overhead, rendezvous and receive copy). NCCL chooses an
    algorithm and protocol with what it knows, not with what the network turns out to cost, so selection
    ranks pairs under this view (:func:`sim.nccl.tuner.rank_pairs`) and the chosen pair's time is then
    predicted with the fitted values. Off a fabric, only NVLink's table as NCCL has it (no Blackwell hop).

    >>> nccl_view("efa2")["latency.efa2"], nccl_view("slingshot")["rendezvous_us.slingshot"], nccl_view(None)
    (75.0, 0.0, {'blackwell_nvlink_hop_us': 0.0})
    """
    nvlink = {"blackwell_nvlink_hop_us": 0.0}
    if not fabric:
        return nvlink
    f = get_fabric(fabric)
    out = {**nvlink, f"latency.{f.name}": f.reported_latency_us, f"net_overhead.{f.name}": 0.0}
    if f.rdzv_threshold_bytes:
        out[f"rendezvous_us.{f.name}"] = 0.0
    if f.software_matching:
        out[f"recv_copy_us.{f.name}"] = 0.0
    return out


def override(values: dict):
    """``use`` the calibration in force with ``values`` (keys of :data:`DEFAULTS`) changed, for a block."""
    return use(current().with_values(values))


__all__ = ["Fabric", "FABRICS", "DEFAULTS", "TIME_ONLY", "DEFAULT", "Calibration", "current", "use", "get_fabric", "value",
           "fabric_efficiency", "fabric_latency_us", "fabric_p2p_share", "fabric_net_overhead_us", "fabric_p2p_peer_us", "fabric_rendezvous_us", "fabric_recv_copy_us", "nccl_view", "override"]
