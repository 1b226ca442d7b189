"""The discrete-event engine: runs a Program on a Topology and says how long it takes.

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

The reference engine. :mod:`sim.engine.reference` is the same link model as idiomatic SimPy (a process
per op, a ``Link`` server per link) and the oracle for this one (``--engine reference``; tests
compare times, per-op times and per-link bytes on every algorithm). What this engine does differently,
and why the answer is the same: it books an op's whole route when the op starts (``free[link]`` = when
the link's last booking ends) instead of holding Resources hop by hop; a Resource grants in request
order and requests are made when ops start, so each link serves the same ops in the same order. It
groups same-instant completions into one event, vectorises large groups and simulates one op per
symmetry orbit; none of these changes the order in which ops start, which is the only thing (besides
the arithmetic) that decides the times.

The event loop itself is :mod:`sim.engine.loop` (a heap of events in SimPy's order; same-instant
completions share one event, large batches go through numpy, bit-identical to one event per op);
``docs/performance.md`` has the numbers, ``docs/engine.md`` walks one ring step through both engines.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> run = simulate_program(build_program("ring", "all_gather", 4), load_topology("ring:n=4"), 4e6)
>>> round(run.time_us, 3)  # 3 steps x (1 us + 1 MB / 100 GB/s)
33.0
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CollsimError
from ..program import Program
from ..topology import Topology
from .loop import run_ops
from .progress import phase
from .symmetry import Quotient, find_shift, host_shift, link_orbits
from .transfer import IDEAL, Protocol


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
    events: int                  # events processed (the reference engine: one per op)
    quotient: object = None      # the sim.engine.symmetry.Quotient of a symmetric run (maps ops to their orbit's)


# ---- dependencies -----------------------------------------------------------------------------------
def dependencies(p: Program, ops: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ops ``ops`` (default all): the writes each one waits for.

    Returns ``(order, lo, hi)``: ``order`` lists write ops sorted by (slot, step, copies first); op
    ``ops[i]`` depends on ``order[lo[i]:hi[i]]``: the writes to its source slot in earlier steps since
    (and including) the last copy.
    """
    every = ops is None or len(ops) == p.nops
    ops = np.arange(p.nops) if ops is None else ops
    nsteps = int(p.step.max()) + 2
    wslot = p.dst.astype(np.int64) * p.nchunks + p.chunk
    qslot = p.src[ops].astype(np.int64) * p.nchunks + p.chunk[ops]
    # only writes to a slot that one of ``ops`` reads can be waited for (few, for a symmetry quotient)
    cand = np.arange(p.nops) if every else np.flatnonzero(np.isin(wslot, qslot))
    if not len(cand):
        zero = np.zeros(len(ops), np.int64)
        return cand, zero, zero
    wkey = wslot * nsteps + p.step if every else wslot[cand] * nsteps + p.step[cand]
    local = np.argsort(wkey * 2 + p.reduce[cand], kind="stable")  # by slot, then step, copies before reduces
    order = cand[local]
    skey = wkey[local]
    slot = skey // nsteps
    # start of each slot's run in the sorted writes, and the last copy at or before each position
    is_start = np.ones(len(skey), bool)
    is_start[1:] = slot[1:] != slot[:-1]
    start = np.maximum.accumulate(np.where(is_start, np.arange(len(skey)), 0))
    copy_pos = np.maximum.accumulate(np.where(~p.reduce[order], np.arange(len(skey)), -1))
    # look the reads up in key order: the binary searches and gathers then walk the writes in order
    qkey = qslot * nsteps + p.step[ops]
    qorder = np.argsort(qkey)
    qkey = qkey[qorder]
    hi = np.searchsorted(skey, qkey, side="left")
    prev = np.maximum(hi - 1, 0)
    valid = (hi > 0) & (slot[prev] == qkey // nsteps)
    lo = np.where(valid, np.maximum(copy_pos[prev], start[prev]), hi)
    lo_out, hi_out = np.empty_like(lo), np.empty_like(hi)
    lo_out[qorder], hi_out[qorder] = lo, np.where(valid, hi, lo)
    return order, lo_out, hi_out


def window_dependencies(p: Program, ops: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Flow control: on every (src, dst) connection, in (step, op index) order, op k waits for op
    k - ``window`` to arrive (NCCL has NCCL_STEPS = 8 buffer slots per connection). Without it a
    pipelined tree or NVLS program queues all its first-phase pieces on a link ahead of the later
    phases. Returns (positions in ``ops`` that wait, the op indices they wait for)."""
    conn = p.src.astype(np.int64) * p.nagents + p.dst
    order = np.lexsort((np.arange(p.nops), p.step, conn))
    pos = np.empty(p.nops, np.int64)
    pos[order] = np.arange(p.nops)
    prev = pos[ops] - window
    ok = prev >= 0
    ok[ok] = conn[order[prev[ok]]] == conn[ops[ok]]
    return np.flatnonzero(ok), order[prev[ok]]


def _reduce_unit(p: Program, topo: Topology, agent_node, agent: int, nslots: int, wire: float) -> tuple:
    """A transfer into a reducing switch also crosses the switch's reduction unit: one FIFO per switch
    (slot ``nslots + j``) at ``reduce_bandwidth_GBps``, adding ``reduce_latency_us``; nothing if unset."""
    if agent < p.nranks:
        return ()
    node = topo.nodes[agent_node[agent]]
    if not node.reduce or (node.reduce_bandwidth_GBps == float("inf") and not node.reduce_latency_us):
        return ()
    return ((nslots + agent - p.nranks, wire / (node.reduce_bandwidth_GBps * 1e3), float(node.reduce_latency_us)),)


HOST_SHIFT_MAX_OPS = 4_000_000   # above this, proving the node-level rotation costs more than it saves
# Programs whose same-instant FIFO ties the shift keeps in order (tests compare op by op). An invariant
# op set is not enough: when two different ops' images reach a link at the same instant, the engine
# serves them in op-index order, which the shift need not preserve (hierarchical_ring: 0.6% off).
HOST_SHIFT_ALGORITHMS = ("ring",)


def _host_quotient(p: Program, topo: Topology, agent_node) -> tuple:
    """(Quotient, link orbits) for the node-level rotation (every host to the next), or (None, None).

    It holds when the topology's hosts are images of each other (:func:`sim.engine.symmetry.host_shift`), the
    program is invariant under rank r -> r + GPUs per host (:func:`sim.engine.symmetry.find_shift` proves it),
    and no route of a representative op crosses a link the rotation fixes (one slot cannot stand for
    every host's traffic on one link)."""
    hs = host_shift(topo)
    if hs is None:
        return None, None
    g, orbit, orbit_len = hs
    sigma = _program_cached(p, ("shift", g), lambda: find_shift(p, g))
    if sigma is None:
        return None, None
    quotient = _program_cached(p, ("host", g), lambda: Quotient(p, sigma, g))
    reps = quotient.reps
    pairs = np.unique(p.src[reps].astype(np.int64) * p.nagents + p.dst[reps])
    m = topo.nranks // g
    for a in pairs.tolist():
        if any(orbit_len[l] != m for l in topo.route_nodes(agent_node[a // p.nagents], agent_node[a % p.nagents])):
            return None, None
    return quotient, orbit


def _program_cached(p: Program, key, make):
    """``make()``, kept on the program under ``key`` (a Program is immutable; the cache goes with it)."""
    cache = p.__dict__.setdefault("_engine_cache", {})
    if key not in cache:
        cache[key] = make()
    return cache[key]


def _successors(p: Program, sim_ops: np.ndarray, quotient) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the simulated ops ``sim_ops``: how many ops each waits for, and who waits for each, as CSR
    arrays ``(ndeps, succ, succ_ptr)``: the waiters of simulated op k are ``succ[succ_ptr[k]:succ_ptr[k+1]]``
    (data dependencies before flow control, each in op order: the order they start in)."""
    order, lo, hi = dependencies(p, sim_ops)
    ndeps = (hi - lo).astype(np.int64)
    # every (lo, hi) range of ``order`` concatenated, without a Python loop per op
    dep_ops = order[np.repeat(lo - np.cumsum(ndeps) + ndeps, ndeps) + np.arange(int(ndeps.sum()))]
    dep_local = quotient.rep_of(dep_ops) if quotient else dep_ops  # simulated index == op index
    waiter_of_dep = np.repeat(np.arange(len(sim_ops)), ndeps)
    window = int(p.params.get("window") or 0)
    if window:  # flow control (NCCL_STEPS slots): an op also waits for the op `window` places back on its connection
        w_wait, w_dep = window_dependencies(p, sim_ops, window)
        dep_local = np.concatenate([dep_local, quotient.rep_of(w_dep) if quotient else w_dep])
        waiter_of_dep = np.concatenate([waiter_of_dep, w_wait])
        ndeps = ndeps + np.bincount(w_wait, minlength=len(sim_ops))
    # successors: for each simulated op, the simulated ops that wait for it (CSR arrays)
    succ_order = np.argsort(dep_local, kind="stable")
    succ = waiter_of_dep[succ_order]
    succ_ptr = np.concatenate([[0], np.cumsum(np.bincount(dep_local, minlength=len(sim_ops)))])
    return ndeps, succ, succ_ptr


def _link_totals(routes: list, route_of: np.ndarray, wire: float, link_slot: np.ndarray, nslots: int) -> tuple:
    """Wire bytes and serialisation time (us) per topology link: every simulated op crossed its route once."""
    slot_bytes = np.zeros(nslots)
    slot_busy = np.zeros(nslots)
    for count, hops in zip(np.bincount(route_of, minlength=len(routes)).tolist(), routes):
        for slot, ser, _ in hops:
            slot_bytes[slot] += count * wire
            slot_busy[slot] += count * ser
    link_bytes = slot_bytes[link_slot] if len(link_slot) else np.zeros(0)
    link_busy = slot_busy[link_slot] if len(link_slot) else np.zeros(0)
    return link_bytes, link_busy


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

    # qkey names the quotient among those kept on the program (None: every op simulated)
    orbits, quotient = None, None
    qkey: str | tuple[str, int] | None = None
    if symmetry != "off" and p.rotation is not None and p.nranks == topo.nranks and topo.hardware.symmetry == "rotation":
        orbits = link_orbits(topo)
        if orbits is not None:
            qkey = "rotation"
            quotient = _program_cached(p, qkey, lambda: Quotient(p))
    if (quotient is None and symmetry != "off" and p.nranks == topo.nranks and p.algorithm in HOST_SHIFT_ALGORITHMS
            and (symmetry == "on" or p.nops <= HOST_SHIFT_MAX_OPS)):
        quotient, orbits = _host_quotient(p, topo, agent_node)
        qkey = ("host", quotient.step_ranks) if quotient is not None else None
    if symmetry == "on" and orbits is None:
        raise CollsimError("symmetry=on but the program or the topology is not rotation symmetric")
    sim_ops = quotient.reps if quotient else np.arange(p.nops)
    phase("dependencies")
    # what the ops wait for depends on the program and its quotient only, not on the sizes or the links: a
    # sweep and a cross-validation's grid run one program many times
    ndeps, succ, succ_ptr = _program_cached(p, ("successors", qkey), lambda: _successors(p, sim_ops, quotient))

    chunk_bytes = p.nbytes_per_chunk(nbytes)
    wire = protocol.wire_bytes(chunk_bytes)
    links = topo.links
    bw = np.array([l.bandwidth_GBps for l in links]) * 1e3   # bytes per microsecond
    lat = np.array([l.latency_us for l in links])
    link_slot = orbits if orbits is not None else np.arange(len(links))
    nslots = int(link_slot.max()) + 1 if len(links) else 0
    phase("routes")
    # One route per distinct (src agent, dst agent) pair, each a tuple of (link slot, serialisation, latency).
    pair_ids, route_of = np.unique(p.src[sim_ops].astype(np.int64) * p.nagents + p.dst[sim_ops], return_inverse=True)
    routes = [tuple((int(link_slot[i]), wire / bw[i], float(lat[i]))
                    for i in topo.route_nodes(agent_node[a // p.nagents], agent_node[a % p.nagents]))
              + _reduce_unit(p, topo, agent_node, a % p.nagents, nslots, wire)
              for a in pair_ids.tolist()]

    phase("event loop")
    loop = run_ops(routes, route_of.reshape(-1), ndeps, succ, succ_ptr, nslots + len(p.switches), protocol.hop_latency_us)
    start_t, end_t, events = loop.start_us, loop.end_us, loop.events
    if loop.remaining.any():
        stuck = int(np.flatnonzero(loop.remaining)[0])
        raise CollsimError(f"{p.algorithm}: op {int(sim_ops[stuck])} never became ready (a dependency cycle in the program)")
    link_bytes, link_busy = _link_totals(routes, route_of.reshape(-1), wire, link_slot, nslots + len(p.switches))
    total = float(end_t.max()) + protocol.launch_us if len(end_t) else protocol.launch_us
    return EngineRun(total, start_t, end_t, sim_ops, link_bytes, link_busy, quotient is not None, events, quotient)
