"""The large-scale model of all_to_all (NCCL's grouped point-to-point sends, algorithm ``p2p``).

The engine's ``p2p`` program (:mod:`sim.algorithms.alltoall`) has n(n-1) blocks of S/n bytes: n^2 ops, 16
million at 4,096 GPUs. On m identical hosts of k GPUs joined by a rail-optimised fat tree, every GPU
carries the same traffic, so its links' loads have closed forms (block of ``W`` wire bytes):

* NVLink, each direction: k-1 blocks for local peers and (k-1)(m-1) relayed to their rail proxy (PXN):
  ``m (k-1) W``;
* the GPU's PCIe link and every link towards the peer on its rail: the k(m-1) blocks that leave (or
  enter) the host on that rail, times the GPUs that share the link (two GPUs per NIC on
  ``nics_per_node=4``);
* a leaf's spine link (several scalable units): the blocks of its hosts for hosts under other leaves.

Data movement takes the busiest link's load at its effective bandwidth (the engine's
:func:`sim.nccl.execution.effective_topology`), plus the start-up queue the engine's first-come first-served
links add: every sender launches its blocks in receiver order, so the last host on a rail receives its
first piece only after ``m - 2`` pieces' time, and then stays busy (measured on the engine: exactly
``m - 2`` piece times within one scalable unit, 3 to 32 hosts of 8 GPUs). The latency term, pieces and
payload share are :func:`sim.nccl.execution.plan_nccl`'s, as for the engine. The engine queues more (and is
slower, by up to about 10%) where the NVLink relay or an oversubscribed spine delays the busiest link:
full 72-GPU racks, spine-bound fabrics; docs/performance.md has the table.

>>> import sim
>>> e = sim.simulate("all_to_all", 1 << 30, "dgx-h100:nodes=8", algorithm="p2p", protocol="Simple", model="engine")
>>> f = sim.simulate("all_to_all", 1 << 30, "dgx-h100:nodes=8", algorithm="p2p", protocol="Simple", model="flow")
>>> abs(f.time_us / e.time_us - 1) < 1e-6
True
"""
from __future__ import annotations

from collections import Counter

from ..engine.result import Result
from ..topology import Topology


def covers(coll, topo: Topology) -> str | None:
    """None if this model can time ``coll`` with ``p2p`` on ``topo``, else a short reason."""
    if not coll.pairwise:
        return f"p2p runs all_to_all, not {coll.name}"
    sizes = {len(h) for h in topo.hosts}
    if len(topo.hosts) < 2 or not topo.hardware.nodes_per_leaf:
        return "its all_to_all covers clusters of several nodes on a rail-optimised fat tree (the multi-node presets)"
    if len(sizes) > 1:
        return "its all_to_all needs hosts with equal GPU counts"
    return None


def alltoall_predict(coll, nbytes: int, topo: Topology, proto, *, nchannels=None, pipeline=None) -> Result:
    """The flow model's all_to_all: latency term plus the busiest link's load (module docstring)."""
    from ..nccl.execution import link_efficiency, plan_nccl
    n, m, k = topo.nranks, len(topo.hosts), len(topo.hosts[0])
    relayed = k > 1                       # PXN hops exist: the program has two steps, else one
    plan = plan_nccl(coll, nbytes, topo, "p2p", proto, nchannels=nchannels, pipeline=pipeline,
                     steps=2 if relayed else 1, split=n)   # a rank's buffer is n blocks (plan_nccl)
    wire = plan.engine_protocol.wire_bytes(coll.chunk_nbytes(nbytes, n, n * n))   # one block, all channels

    def bytes_per_us(li: int) -> float:
        link = topo.links[li]
        return link.bandwidth_GBps * link_efficiency(topo, link, p2p=True) * 1e3

    loads: dict[int, float] = {}          # representative link -> wire bytes it carries
    if relayed:
        nvlink = topo.route(0, 1)
        for li in (nvlink[0], nvlink[-1]):
            loads[li] = m * (k - 1) * wire
    # host 0's GPUs to their rail peers on host 1: a link crossed by c of these routes carries c GPUs' traffic
    rail = Counter(li for i in range(k) for li in topo.route(i, k + i))
    for li, c in rail.items():
        loads[li] = c * k * (m - 1) * wire
    per_leaf = int(topo.hardware.nodes_per_leaf or 1)
    per_port = k // max(1, min(k, topo.hardware.nic_ports or k))   # GPUs (rails) sharing one NIC port
    sizes_seen: set = set()
    for first in range(0, m, per_leaf) if m > per_leaf else ():
        # a leaf's spine link up (down): its hosts' blocks for (from) the hosts under other leaves
        here = min(per_leaf, m - first)
        if here in sizes_seen:
            # a preset's leaves are alike: one leaf of each size stands for all (two routes per leaf searched over
            # 16,384 nodes took 95 s of a 100 s all_to_all prediction)
            continue
        sizes_seen.add(here)
        other = (first + per_leaf) * k if first + per_leaf < m else 0
        share = here * k * (m - here) * per_port * wire
        up = [li for li in topo.route(first * k, other) if _fabric(topo, li)]
        down = [li for li in topo.route(other, first * k) if _fabric(topo, li)]
        for li in up[:1] + down[-1:]:
            loads[li] = share
    times = {li: load / bytes_per_us(li) for li, load in loads.items()}
    busiest = max(times, key=lambda li: times[li])
    pieces = plan.nchannels * plan.pieces
    startup = max(0, m - 2) * wire / pieces / bytes_per_us(busiest)
    data = times[busiest] + startup
    t = plan.latency_us + data
    explain = {"latency_us": plan.latency_us, "bandwidth_term_us": data, "startup_queue_us": startup,
               "bottleneck": topo.link_label(busiest), "bottleneck_GBps": bytes_per_us(busiest) / 1e3,
               "payload_share": plan.payload_share, "pieces_per_channel": plan.pieces}
    return Result.of(coll, nbytes, n, "p2p", plan.protocol, t, plan.steps, model="flow", topology=topo.name,
                     nchannels=plan.nchannels, pipeline=plan.pieces, explain=explain)


def _fabric(topo: Topology, li: int) -> bool:
    """A switch-to-switch link (neither end in a host)."""
    link, nodes, index = topo.links[li], topo.nodes, topo.node_index
    return nodes[index[link.src]].host is None and nodes[index[link.dst]].host is None
