"""The discrete-event engine: runs a Program on a Topology in simpy and says how long it takes.

Link model (each directed link is a FIFO server):

* A transfer of B bytes crosses a link of bandwidth W in B/W (serialisation) and reaches the far end
  ``latency_us`` later. A link serves one transfer at a time, in the order transfers ask for it
  (FIFO). FIFO rather than fair sharing: for transfers that start together the last one finishes at
  the same time under both (the bytes are the bytes), FIFO is exact to compute and deterministic, and
  it is what a single NCCL connection does. It is pessimistic for a small message queued behind a big
  one on a shared link; the docs say where that matters.
* Multi-hop routes are cut-through (pipelined): the head moves on after each hop's latency, and the
  tail leaves hop i+1 no earlier than it leaves hop i plus that hop's latency, so an uncontended route
  costs sum(latency) + B / min(bandwidth), not the sum of serialisations (store-and-forward would double
  the time of a ring through one switch, which real NVSwitch/IB fabrics do not do).
* An op starts when the data it sends is complete at its source: every write to that chunk in earlier
  steps since the last overwrite has arrived. Nothing else orders ops, so independent work overlaps.

Symmetry. Ring-shaped programs on ring, mesh and single-switch topologies are invariant under "every
rank moves to rank+1": every op then runs at the same time as its images. When both the program
(``Program.rotation``) and the topology (``meta['symmetry'] == 'rotation'``) say so, the engine
simulates one op per orbit, with each link standing for its whole orbit. The result is the same as
the op-by-op run (tests compare both); it is what lets a 1024-rank ring run in about a second.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> run = simulate_program(build_program("ring", "all_gather", 4), load_topology("ring:n=4"), 4e6)
>>> round(run.time_us, 3)  # 3 steps x (1 us + 1 MB / 100 GB/s)
33.0
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from .errors import CollsimError
from .program import Program
from .protocols import IDEAL, Protocol
from .topology import Topology


@dataclass(frozen=True, eq=False)
class EngineRun:
    """What the engine measured. Times in microseconds from the collective's start."""

    time_us: float
    op_start_us: np.ndarray      # per simulated op (all ops, or one per orbit when ``symmetric``)
    op_end_us: np.ndarray        # arrival time at the destination
    op_index: np.ndarray         # program op index of each simulated op
    link_bytes: np.ndarray       # wire bytes per topology link
    link_busy_us: np.ndarray     # serialisation time per topology link
    symmetric: bool
    events: int                  # simpy events processed


# ---- dependencies -----------------------------------------------------------------------------------
def dependencies(p: Program, ops: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ops ``ops`` (default all): the writes each one waits for.

    Returns ``(order, lo, hi)``: ``order`` lists write ops sorted by (slot, step, copies first); op
    ``ops[i]`` depends on ``order[lo[i]:hi[i]]``: the writes to its source slot in earlier steps since
    (and including) the last copy.
    """
    ops = np.arange(p.nops) if ops is None else ops
    nsteps = int(p.step.max()) + 2
    wkey = (p.dst.astype(np.int64) * p.nchunks + p.chunk) * nsteps + p.step
    order = np.lexsort((p.reduce, wkey))           # by slot, then step, copies before reduces
    skey = wkey[order]
    slot = skey // nsteps
    qkey = (p.src[ops].astype(np.int64) * p.nchunks + p.chunk[ops]) * nsteps + p.step[ops]
    hi = np.searchsorted(skey, qkey, side="left")
    # start of each slot's run in the sorted writes, and the last copy at or before each position
    is_start = np.ones(len(skey), bool)
    is_start[1:] = slot[1:] != slot[:-1]
    start = np.maximum.accumulate(np.where(is_start, np.arange(len(skey)), 0))
    copy_pos = np.maximum.accumulate(np.where(~p.reduce[order], np.arange(len(skey)), -1))
    prev = hi - 1
    valid = (prev >= 0) & (slot[np.maximum(prev, 0)] == qkey // nsteps)
    last_copy = copy_pos[np.maximum(prev, 0)]
    group = start[np.maximum(prev, 0)]
    lo = np.where(valid, np.maximum(last_copy, group), hi)
    return order, lo, np.where(valid, hi, lo)


# ---- symmetry ---------------------------------------------------------------------------------------
def _cycles(perm: np.ndarray):
    """Cycle decomposition: (cycle id, position in cycle, cycle offsets, cycle members, cycle lengths)."""
    n = len(perm)
    cid = np.full(n, -1, np.int64)
    pos = np.zeros(n, np.int64)
    members, offsets, lengths = [], [], []
    for start in range(n):
        if cid[start] >= 0:
            continue
        offsets.append(len(members))
        c, k = start, 0
        while cid[c] < 0:
            cid[c], pos[c] = len(lengths), k
            members.append(c)
            c, k = perm[c], k + 1
        lengths.append(k)
    return cid, pos, np.asarray(offsets), np.asarray(members), np.asarray(lengths)


def _link_orbits(topo: Topology) -> np.ndarray | None:
    """Orbit id of every link under "GPU i -> GPU i+1", or None if the topology is not symmetric."""
    n = topo.nranks
    node_map = np.arange(len(topo.nodes))
    for r, g in enumerate(topo.gpus):
        node_map[g] = topo.gpus[(r + 1) % n]
    by_ends = {(topo.node_index[l.src], topo.node_index[l.dst]): i for i, l in enumerate(topo.links)}
    perm = np.empty(len(topo.links), np.int64)
    for i, l in enumerate(topo.links):
        img = by_ends.get((node_map[topo.node_index[l.src]], node_map[topo.node_index[l.dst]]))
        if img is None:
            return None
        a, b = topo.links[i], topo.links[img]
        if (a.bandwidth_GBps, a.latency_us) != (b.bandwidth_GBps, b.latency_us):
            return None
        perm[i] = img
    cid, _, _, _, lengths = _cycles(perm)
    if (lengths != n).any():
        return None  # a link fixed by the rotation (switch-to-switch) would stand for several images
    return cid


class _Quotient:
    """Maps any op to the representative of its orbit (the image whose shift is undone)."""

    def __init__(self, p: Program):
        self.p = p
        self.cid, self.pos, self.off, self.mem, self.len = _cycles(p.rotation)
        n = p.nranks
        self.shift = np.where(p.src < n, p.src, np.where(p.dst < n, p.dst, -1)).astype(np.int64)
        self.reps = np.flatnonzero(self.shift == 0)
        self.index = {self._key(p.src[i], p.dst[i], p.chunk[i], i): j for j, i in enumerate(self.reps)}

    def _key(self, s, d, c, i):
        p = self.p
        return (int(s), int(d), int(c), int(p.step[i]), int(p.channel[i]), bool(p.reduce[i]))

    def rep_of(self, ops: np.ndarray) -> np.ndarray:
        p, n = self.p, self.p.nranks
        k = self.shift[ops]
        unrot = lambda a: np.where(a < n, (a - k) % n, a)
        cid = self.cid[p.chunk[ops]]
        chunk = self.mem[self.off[cid] + (self.pos[p.chunk[ops]] - k) % self.len[cid]]
        src, dst = unrot(p.src[ops]), unrot(p.dst[ops])
        out = np.empty(len(ops), np.int64)
        for j, (s, d, c, i) in enumerate(zip(src, dst, chunk, ops)):
            rep = self.index.get(self._key(s, d, c, i))
            if rep is None:
                raise CollsimError(f"program {p.algorithm!r} declares rotation symmetry but op {i} has no image with src 0")
            out[j] = rep
        return out


# ---- the simulation ---------------------------------------------------------------------------------
def simulate_program(p: Program, topo: Topology, nbytes: float, protocol: Protocol = IDEAL, *,
                     symmetry: str = "auto") -> EngineRun:
    """Run ``p`` moving ``nbytes`` (nccl-tests' size) on ``topo``; ``symmetry``: auto|on|off."""
    if p.nranks > topo.nranks:
        raise CollsimError(f"{p.algorithm} program has {p.nranks} ranks but topology {topo.name!r} has {topo.nranks} GPUs")
    agent_node = [topo.gpus[r] for r in range(p.nranks)]
    for name in p.switches:
        if name not in topo.node_index:
            raise CollsimError(f"{p.algorithm} reduces in switch {name!r}, which topology {topo.name!r} does not have")
        agent_node.append(topo.node_index[name])

    orbits = None
    if symmetry != "off" and p.rotation is not None and p.nranks == topo.nranks and topo.meta.get("symmetry") == "rotation":
        orbits = _link_orbits(topo)
    if symmetry == "on" and orbits is None:
        raise CollsimError("symmetry=on but the program or the topology is not rotation symmetric")
    quotient = _Quotient(p) if orbits is not None else None
    sim_ops = quotient.reps if quotient else np.arange(p.nops)
    order, lo, hi = dependencies(p, sim_ops)
    dep_ops = order[np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)])] if len(sim_ops) else np.empty(0, np.int64)
    if quotient:
        dep_local = quotient.rep_of(dep_ops)
    else:
        dep_local = dep_ops  # simulated index == op index
    ndeps = (hi - lo).astype(np.int64)
    waiter_of_dep = np.repeat(np.arange(len(sim_ops)), ndeps)
    # successors: for each simulated op, the simulated ops that wait for it (CSR arrays)
    succ_order = np.argsort(dep_local, kind="stable")
    succ = waiter_of_dep[succ_order]
    succ_ptr = np.searchsorted(dep_local[succ_order], np.arange(len(sim_ops) + 1))

    chunk_bytes = p.nbytes_per_chunk(nbytes)
    wire = protocol.wire_bytes(chunk_bytes)
    links = topo.links
    bw = np.array([l.bandwidth_GBps for l in links]) * 1e3   # bytes per microsecond
    lat = np.array([l.latency_us for l in links])
    link_slot = orbits if orbits is not None else np.arange(len(links))
    nslots = int(link_slot.max()) + 1 if len(links) else 0
    free = [0.0] * nslots
    slot_bytes = np.zeros(nslots)
    slot_busy = np.zeros(nslots)
    routes: dict[tuple[int, int], list[tuple[int, float, float]]] = {}

    def route(a: int, b: int):
        key = (a, b)
        if key not in routes:
            routes[key] = [(int(link_slot[i]), wire / bw[i], float(lat[i]))
                           for i in topo.route_nodes(agent_node[a], agent_node[b])]
        return routes[key]

    src_of = p.src[sim_ops].tolist()
    dst_of = p.dst[sim_ops].tolist()
    remaining = ndeps.tolist()
    start_t = np.zeros(len(sim_ops))
    end_t = np.zeros(len(sim_ops))
    succ_l, ptr_l = succ.tolist(), succ_ptr.tolist()
    env = simpy.Environment()
    hop_lat = protocol.hop_latency_us
    events = 0

    def launch(i: int) -> None:
        nonlocal events
        now = env.now
        head = now
        prev_end = None
        for slot, ser, l_lat in route(src_of[i], dst_of[i]):
            begin = max(head, free[slot])
            end = begin + ser
            if prev_end is not None and end < prev_end:
                end = prev_end  # the tail cannot outrun the previous hop
            free[slot] = end
            slot_bytes[slot] += wire
            slot_busy[slot] += ser
            head = begin + l_lat
            prev_end = end + l_lat
        arrive = (prev_end if prev_end is not None else now) + hop_lat
        start_t[i], end_t[i] = now, arrive
        ev = env.timeout(arrive - now)
        ev.callbacks.append(lambda _e, i=i: done(i))
        events += 1

    def done(i: int) -> None:
        for j in succ_l[ptr_l[i]:ptr_l[i + 1]]:
            remaining[j] -= 1
            if remaining[j] == 0:
                launch(j)

    for i in np.flatnonzero(ndeps == 0).tolist():
        launch(i)
    env.run()
    if any(remaining):
        stuck = int(np.flatnonzero(np.asarray(remaining))[0])
        raise CollsimError(f"{p.algorithm}: op {int(sim_ops[stuck])} never became ready (a dependency cycle in the program)")
    link_bytes = slot_bytes[link_slot] if len(links) else np.zeros(0)
    link_busy = slot_busy[link_slot] if len(links) else np.zeros(0)
    total = float(end_t.max()) + protocol.launch_us if len(end_t) else protocol.launch_us
    return EngineRun(total, start_t, end_t, sim_ops, link_bytes, link_busy, quotient is not None, events)
