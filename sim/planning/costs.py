"""Collective times for a plan: ``sim.simulate`` on each group's sub-topology, memoised.

A training step repeats the same collective many times (76 gradient buckets of 25 MiB, one all_gather
per layer), so :class:`CollectiveCosts` simulates each distinct ``(collective, nbytes, group)`` once.
It also sorts the bytes a collective puts on the wire into link tiers:

- ``nvlink``: NVLink / NVSwitch links inside a server;
- ``pcie``: PCIe links (GPU to NIC or GPU to GPU without NVLink);
- ``nic``: network links that touch a NIC or a GPU (the NIC's cable to its leaf switch);
- ``spine``: network links between two switches (leaf to spine and back).

>>> from sim.presets import load_topology
>>> costs = CollectiveCosts(load_topology("switch:n=4,bandwidth_GBps=100,kind=nvlink"))
>>> c = costs.get("all_reduce", 1 << 20, (0, 1, 2, 3))
>>> c.time_us > 0, sorted(c.tier_bytes)
(True, ['nvlink'])
>>> costs.get("all_reduce", 1 << 20, (0, 1, 2, 3)) is c
True
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CollsimError
from ..topology import Topology
from .subtopo import routing_refusal, sub_topology

TIERS = ("nvlink", "pcie", "nic", "spine")


@dataclass(frozen=True)
class CollectiveCost:
    """One simulated collective: time (us), the algorithm and protocol chosen, wire bytes per tier
    summed over all links of the group's sub-topology."""

    op: str
    nbytes: int
    ranks: tuple
    time_us: float
    algorithm: str
    protocol: str
    tier_bytes: dict
    # one call on its own: a rooted chain's (broadcast, reduce) ``time_us`` is the period of calls issued back to
    # back, as nccl-tests times them, where each call overlaps the next down the chain; the first call of a
    # series pays the chain's whole fill (sim.nccl.tuner._loop_latency_us). None: the same as ``time_us``
    single_call_us: float | None = None
    # False where the model that timed it lays out no links (the large-scale flow model): its wire bytes are
    # not in ``tier_bytes``, and a plan's per-tier total says how many such collectives it leaves out
    counted: bool = True
    # the 80% range of ``time_us`` and whether the public set validates it (sim.prediction.intervals, as
    # ``collsim simulate`` gives them), on the group's own sub-topology; ``note`` says why not
    time_us_range: tuple[float, float] | None = None
    validated: bool = True
    note: str = ""

    def series_us(self, calls: int) -> float:
        """``calls`` of this collective issued back to back on one stream: the first alone, then a period each."""
        if calls <= 0:
            return 0.0
        first = self.single_call_us if self.single_call_us is not None else self.time_us
        return first + (calls - 1) * self.time_us


def link_tier(topo: Topology, link) -> str:
    """The tier (see the module docstring) a link belongs to."""
    if link.kind in ("nvlink", "pcie"):
        return link.kind
    if link.kind == "local":
        return "pcie"
    src, dst = topo.nodes[topo.node_index[link.src]], topo.nodes[topo.node_index[link.dst]]
    return "spine" if src.kind == "switch" and dst.kind == "switch" else "nic"


@dataclass(frozen=True)
class CollectiveCosts:
    """Times collectives on sub-topologies of ``topology`` with ``algorithm``/``protocol`` (``auto``:
    NCCL-style choice). Memo tables belong to the instance."""

    topology: Topology
    algorithm: str = "auto"
    protocol: str = "auto"
    _memo: dict = field(default_factory=dict, compare=False, repr=False)
    _subs: dict = field(default_factory=dict, compare=False, repr=False)

    def sub(self, ranks, concurrent=()) -> Topology:
        """The (memoised) sub-topology of a group (see :func:`~sim.planning.subtopo.sub_topology`)."""
        return self._sub(tuple(ranks), _groups(concurrent))[0]

    def _sub(self, ranks: tuple, concurrent: tuple) -> tuple[Topology, dict]:
        key = (ranks, concurrent)
        if key not in self._subs:
            why = routing_refusal(self.topology) if not self._subs else None
            if why:   # bounded work: refused before the first route search, not after minutes of them
                raise CollsimError(why)
            topo = sub_topology(self.topology, ranks, concurrent)
            self._subs[key] = (topo, {topo.link_label(i): link_tier(topo, l) for i, l in enumerate(topo.links)})
        return self._subs[key]

    def get(self, op: str, nbytes: int, ranks, root: int = 0, concurrent=()) -> CollectiveCost:
        """The cost of ``op`` moving ``nbytes`` (nccl-tests' convention) over ``ranks`` while the
        ``concurrent`` groups (usually the other groups of its family) run the same collective."""
        from ..api import simulate
        from ..prediction.intervals import clip_to_line_rate, interval, line_rate_busbw
        ranks, concurrent = tuple(ranks), _groups(concurrent)
        key = (op, int(nbytes), ranks, root, concurrent)
        if key not in self._memo:
            if len(ranks) < 2 or nbytes == 0:
                self._memo[key] = CollectiveCost(op, int(nbytes), ranks, 0.0, "-", "-", {})
            else:
                topo, tier_of = self._sub(ranks, concurrent)
                r = simulate(op, int(nbytes), topo, algorithm=self.algorithm, protocol=self.protocol, root=root)
                scale = _wire_scale(op, int(nbytes), topo, r)
                tiers: dict = {}
                for label, b in r.link_bytes.items():
                    tiers[tier_of[label]] = tiers.get(tier_of[label], 0.0) + b * scale
                single = r.explain.get("single_call_us")
                iv = clip_to_line_rate(interval(r.time_us, r.busbw_GBps, int(nbytes), topo, collective=op, algorithm=r.algorithm),
                                       r.busbw_GBps, line_rate_busbw(topo, op, r.algorithm))   # as simulate gives it
                self._memo[key] = CollectiveCost(op, int(nbytes), ranks, r.time_us, r.algorithm, r.protocol, tiers,
                                                 float(single) if isinstance(single, (int, float)) else None,
                                                 counted=bool(r.link_bytes) or r.time_us == 0,
                                                 time_us_range=iv.time_us_range, validated=iv.validated, note=iv.note)
        return self._memo[key]


def _wire_scale(op: str, nbytes: int, topo: Topology, r) -> float:
    """What turns the engine's link bytes into bytes on the wire. The engine moves NCCL's LL and LL128 at the
    rate NCCL's model gives them (a share of Simple's, :func:`sim.nccl.execution.payload_share`, and of the
    channels a small message fills), which it counts as extra bytes; the wire carries the protocol's own
    format: LL's flag doubles the bytes, LL128's adds 8 in 128. Counted as the engine does, an LL step on
    DGX H100 NVLink showed 17.6x Simple's bytes, not 2x."""
    from ..algorithms import in_nccl
    from ..collectives import get_collective
    from ..nccl.execution import plan_nccl
    from ..nccl.protocols import get_protocol
    coll = get_collective(op)
    if r.protocol not in ("LL", "LL128", "Simple") or not in_nccl(r.algorithm, coll):
        return 1.0
    engine = plan_nccl(coll, nbytes, topo, r.algorithm, r.protocol).engine_protocol.payload_efficiency
    return engine / get_protocol(r.protocol).payload_efficiency if engine > 0 else 1.0


def _groups(concurrent) -> tuple:
    return tuple(tuple(g) for g in concurrent or ())


__all__ = ["CollectiveCost", "CollectiveCosts", "TIERS", "link_tier"]
