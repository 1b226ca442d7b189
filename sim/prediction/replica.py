"""Large-scale model for the hierarchical algorithms (tree, nvls_tree, nvls, collnet): a small replica
of the cluster, timed by the engine, plus the tree levels the replica lacks.

A cluster of m identical nodes on a non-blocking rail-optimised fat tree runs NCCL's trees, NVLS trees
and SHARP reductions the same way on every node: what grows with m is only the *depth* of the
inter-node tree (``ceil(log2 m)`` levels for NCCL's double binary tree; nothing for a switch tree once
the cluster spans several leaves). So the model

1. builds a replica of the cluster with ``REPLICA_NODES`` nodes of the same kind (two scalable units
   when the real cluster has more than one, so routes cross the spine as they do there, each leaf with
   the real leaf's uplink, capped at non-blocking: :func:`replica_oversubscription`);
2. runs the engine on it with the *full* cluster's NCCL plan (:func:`sim.nccl.execution.plan_nccl`: latency
   term, chunk size, pieces, payload share), exactly as :func:`sim.nccl.execution.simulate_with_plan` runs the engine;
3. adds, for every tree level the cluster has beyond the replica, what one level costs: the difference
   between one piece's time on the replica and on a replica half its size, per level between them.

At ``m <= REPLICA_NODES`` the replica is the cluster and the model is the engine. Beyond, the engine
needs memory and time in proportion to the GPUs (half a billion ops for a 16,384-GPU ring); the replica
stays at ``REPLICA_NODES`` nodes, so a 16,384-GPU NVLSTree all-reduce takes about a second.
``tests/scale/test_replica.py`` compares it with the engine where both run; ``docs/performance.md`` has
the table.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 30, "dgx-h100:nodes=64", "nvls_tree", "Simple", model="flow")
>>> r.model, r.explain["replica_nodes"], r.explain["tree_levels"]
('flow', 4, 6)
"""
from __future__ import annotations

import math
import weakref
from collections import Counter
from dataclasses import fields
from functools import lru_cache

from ..algorithms import build_program, get_algorithm
from ..algorithms.tree import double_tree, heights
from ..engine.result import Result
from ..errors import CollsimError
from ..nccl import calibration
from ..nccl.protocols import IDEAL
from ..nccl.recipe import default_pipeline
from ..presets import AS_BUILT, load_topology, parse_spec
from ..topology import Topology

REPLICA_NODES = 4
REPLICA_OPS_BUDGET = 30_000   # simulated ops per replica run: half the engine's budget, on a replica of half its size
REPLICA_ALGORITHMS = ("tree", "nvls_tree", "nvls", "collnet_direct", "collnet_chain")


@lru_cache(maxsize=1024)   # a pure function of m, asked for on every replica prediction
def tree_levels(m: int) -> int:
    """Height of NCCL's double binary tree over m nodes (the taller of its two trees)."""
    if m <= 1:
        return 0
    return int(max(heights(t)[0].max() for t in double_tree(m)))


def replica_spec(topo: Topology, nodes: int) -> str | None:
    """The preset spec of ``topo`` with ``nodes`` nodes (two scalable units if ``topo`` has several),
    or None when ``topo`` is not a multi-node preset (a textbook topology, a file whose links or facts are
    not its preset's: :func:`preset_of`)."""
    total = topo.hardware.nodes
    if not total or total < 2:
        return None
    spec = preset_of(topo)   # a spec with nodes= (preset_of checks it)
    if spec is None:
        return None
    name, params = parse_spec(spec)
    params["nodes"] = str(nodes)
    per_leaf = int(topo.hardware.nodes_per_leaf or total)
    if total > per_leaf and nodes > 1:   # keep the spine crossing: two units of nodes/2
        here = max(1, nodes // 2)
        params["nodes_per_leaf"] = str(here)
        over = replica_oversubscription(total, per_leaf, float(topo.hardware.oversubscription or 1.0), here)
        params.pop("oversubscription", None)
        if over > 1:
            params["oversubscription"] = f"{over:.12g}"
    return name + ":" + ",".join(f"{k}={v}" for k, v in params.items())


# hardware facts that say where a topology came from, or how nccl-tests launched it (-g), not what it is; and the
# leaves' size, which the links already say (8 nodes of 16 or of 32 per leaf are the same links)
_PROVENANCE = ("source_xml", "source_nvidia_smi", "xml_preset", "xml_read", "nccl_topo_dump", "sources", "read", "extra",
               "gpus_per_process", "nodes_per_leaf")
_PRESET_OF: "weakref.WeakKeyDictionary[Topology, str | None]" = weakref.WeakKeyDictionary()


def preset_of(topo: Topology) -> str | None:
    """The preset spec that builds ``topo`` (the spec a topology XML or ``nvidia-smi topo -m`` reader derived,
    else its name), or None where that preset is not what ``topo`` is: a replica built from it would time
    another machine. A topology a preset built is its spec (:data:`sim.presets.AS_BUILT`). Anything else (a
    topology file, which keeps its preset's name after its links are edited, as when 200G NICs are written
    over a DGX H100's 400G ones; a matrix whose NVLinks a reader scaled) is compared once with the preset
    rebuilt from that spec: the same nodes, the same links (ends, kind, bandwidth, latency, in any order)
    and the same hardware facts, or no replica, and the engine times it as written."""
    if topo in _PRESET_OF:
        return _PRESET_OF[topo]
    spec = topo.hardware.xml_preset or topo.name
    found = None
    try:
        name, params = parse_spec(spec)
        if "nodes" in params and (topo in AS_BUILT or _same_machine(load_topology(spec), topo)):
            found = spec
    except CollsimError:   # a name that is no preset spec (a file's, a textbook topology's)
        pass
    _PRESET_OF[topo] = found
    return found


def _same_machine(built: Topology, topo: Topology) -> bool:
    if built.nranks != topo.nranks or len(built.links) != len(topo.links) or len(built.nodes) != len(topo.nodes):
        return False
    facts = [{f.name: getattr(t.hardware, f.name) for f in fields(t.hardware) if f.name not in _PROVENANCE}
             for t in (built, topo)]
    nodes = [Counter((n.name, n.kind, n.host, n.reduce) for n in t.nodes) for t in (built, topo)]
    links = [Counter((k.src, k.dst, k.kind, round(k.bandwidth_GBps, 9), round(k.latency_us, 9)) for k in t.links)
             for t in (built, topo)]
    return facts[0] == facts[1] and nodes[0] == nodes[1] and links[0] == links[1]


def replica_oversubscription(total: int, per_leaf: int, oversubscription: float, hosts: int) -> float:
    """The oversubscription that gives a replica's leaf of ``hosts`` hosts the cluster's own uplink to the spine.

    A leaf's uplink is drawn as ``hosts x port / oversubscription`` (:mod:`sim.presets.hardware`). The
    cluster's leaves hold ``per_leaf`` hosts (the last unit maybe fewer: the smallest leaf is taken), a
    replica's only ``hosts``; keeping the cluster's ratio would give the replica's leaf a
    ``hosts / per_leaf`` share of the real uplink, though the traffic that crosses the spine (a tree's edges
    between units, SHARP's aggregated flow) does not shrink with the hosts on a leaf. So the replica's leaf
    gets the real leaf's uplink, capped at a non-blocking one: a 2:1 spine of 32-host leaves (16 ports' worth
    per rail) is non-blocking for a 2-host replica leaf, a 1-host half replica's alike, and a spine that
    is thinner than that stays thin, the same in the replica and in the half replica whose difference is
    a tree level's cost. (Two replicas with their own 2:1 spines, 1 and 0.5 ports per rail, made the half
    replica slower than the replica's own uplink and a tree level cheaper: oversubscription=2 came out
    faster than a non-blocking spine.)

    >>> replica_oversubscription(256, 32, 2.0, 2), replica_oversubscription(256, 4, 8.0, 2)
    (1.0, 4.0)
    """
    smallest = min(per_leaf, total - (math.ceil(total / per_leaf) - 1) * per_leaf)
    return max(1.0, oversubscription * hosts / smallest)


@lru_cache(maxsize=32)
def replica(topo: Topology, nodes: int) -> Topology:
    spec = replica_spec(topo, nodes)
    if spec is None:
        raise CollsimError(f"the large-scale model needs a multi-node preset (e.g. dgx-h100:nodes=512) to build a "
                           f"replica of; {topo.name!r} is not one: use --model engine")
    rep = load_topology(spec)
    if rep.nranks * (topo.hardware.nodes or 1) != topo.nranks * nodes:
        raise CollsimError(f"{topo.name!r}: nodes of different sizes; use --model engine")
    return rep


def covers(algorithm: str, topo: Topology) -> str | None:
    """None if the replica model can time ``algorithm`` on ``topo``, else why not."""
    if algorithm not in REPLICA_ALGORITHMS:
        return f"the replica model covers {', '.join(REPLICA_ALGORITHMS)}, not {algorithm}"
    if replica_spec(topo, 2) is None:
        return f"{topo.name!r} is not a multi-node preset the replica model can shrink"
    return None


@lru_cache(maxsize=64)
def _program(algorithm, coll, topo, nchannels, pipeline, root, spread):
    from ..nccl.execution import spread_program
    if spread:
        return spread_program(algorithm, coll, topo, nchannels, pipeline, root)
    return build_program(algorithm, coll, topo.nranks, topology=topo, nchannels=nchannels, pipeline=pipeline, root=root)


def _engine_time(algorithm, coll, topo: Topology, nchannels, pieces, root, spread, nbytes, protocol, nvls,
                 ops_budget: int, duplex: bool = True) -> tuple:
    """(time us, simulated ops) of the engine on ``topo`` for ``pieces`` pieces per channel.

    Past ``ops_budget`` ops it simulates ``s`` and ``s // 2`` pieces, ``s`` at least the program's steps
    + 2 so that the pipeline is full, and extrapolates linearly, as
    :func:`sim.nccl.execution.simulate_with_plan` does (each further piece adds one period). Cached per
    link constants of the calibration in force (the effective links depend on them, the latency term is
    added outside): a sweep's large sizes repeat the same chunks, a latency search every run."""
    return _engine_time_cached(algorithm, coll, topo, nchannels, pieces, root, spread, nbytes, protocol, nvls,
                               ops_budget, duplex, calibration.current().links)


@lru_cache(maxsize=8192)   # (time, ops) tuples: small; a cross-validation's searches revisit thousands
def _engine_time_cached(algorithm, coll, topo: Topology, nchannels, pieces, root, spread, nbytes, protocol, nvls,
                        ops_budget: int, duplex: bool, cal) -> tuple:
    # ``cal`` only keys the cache: effective_topology reads the link constants of the calibration in force
    from ..nccl.execution import effective_topology, extrapolate_steady_state, steady_state_pieces
    eff = effective_topology(topo, nvls, duplex) if protocol.name != IDEAL.name else topo
    one = _program(algorithm, coll, topo, nchannels, 1, root, spread)
    sim_pieces = steady_state_pieces(pieces, one, ops_budget)
    chunk = nbytes / pieces
    t, ops = _run(algorithm, coll, topo, eff, nchannels, sim_pieces, root, spread, chunk, protocol)
    if sim_pieces < pieces:
        t_half, _ = _run(algorithm, coll, topo, eff, nchannels, sim_pieces // 2, root, spread, chunk, protocol)
        t = extrapolate_steady_state(t, t_half, sim_pieces, pieces)
    return t, ops


@lru_cache(maxsize=8192)
def _run(algorithm, coll, topo, eff, nchannels, pieces, root, spread, piece_bytes, protocol) -> tuple:
    """One engine run of ``pieces`` pieces of ``piece_bytes`` each (cached across a sweep's sizes)."""
    from ..engine import simulate_program
    prog = _program(algorithm, coll, topo, nchannels, pieces, root, spread)
    run = simulate_program(prog, eff, piece_bytes * pieces, protocol)
    return run.time_us, len(run.op_index)


def replica_simulate(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels=None, pipeline=None,
                     root: int = 0, replica_nodes: int | None = None, ops_budget: int | None = None) -> Result:
    """Time ``algorithm`` with Protocol ``proto`` on ``topo`` through a replica of ``replica_nodes`` nodes."""
    reason = covers(algorithm, topo)
    if reason:
        raise CollsimError(f"{algorithm} on {topo.name}: {reason}; use --model engine")
    replica_nodes = replica_nodes or REPLICA_NODES
    ops_budget = ops_budget or REPLICA_OPS_BUDGET
    m = int(topo.hardware.nodes or 1)
    r = min(m, max(2, replica_nodes))
    small, half = replica(topo, r), replica(topo, max(1, r // 2)) if r >= 4 else None
    levels_full, levels_rep = tree_levels(m), tree_levels(r)
    nvls = algorithm if algorithm.startswith("nvls") else ""   # what the NVLink links serve (link_efficiency)
    ideal = proto.name == IDEAL.name
    one_rep = _program(algorithm, coll, small, 1, 1, root, False)   # cached: every size of a sweep asks
    per_level_steps = 0
    if half is not None and levels_rep > tree_levels(r // 2):
        one_half = _program(algorithm, coll, half, 1, 1, root, False)
        per_level_steps = (one_rep.steps - one_half.steps) // (levels_rep - tree_levels(r // 2))
    steps = one_rep.steps + per_level_steps * (levels_full - levels_rep)
    if ideal:
        nch = nchannels or 1
        pieces = pipeline or default_pipeline(algorithm, coll.name, nbytes, topo, proto, nch,
                                              steps if coll.name in get_algorithm(algorithm).pipelined else 0)
        spread, engine_proto, lat, extra = False, proto, 0.0, {}
    else:
        from ..nccl.execution import kernel_capped, plan_nccl, spread_explain
        plan = plan_nccl(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline, steps=steps,
                         split=max(1, one_rep.nchunks))
        nch, pieces, spread, engine_proto, lat = plan.nchannels, plan.pieces, plan.spread, plan.engine_protocol, plan.latency_us
        extra = {"latency_us": lat, "payload_share": plan.payload_share, "chunk_bytes": plan.chunk_bytes,
                 **spread_explain(plan)}
    key = (algorithm, coll, nch, pieces, root, spread, float(nbytes), engine_proto, nvls)
    from ..nccl.execution import is_duplex
    duplex = is_duplex(coll, topo)   # the full cluster's: its links run at the efficiencies NCCL gets there
    data, sim_ops = _engine_time(key[0], key[1], small, *key[2:], ops_budget, duplex)
    level_cost = 0.0
    if levels_full > levels_rep and per_level_steps and half is not None:
        # one level: one piece's time on the replica minus on the half replica, per level between them
        t_rep, _ = _engine_time(algorithm, coll, small, nch, 1, root, spread, nbytes / pieces, engine_proto, nvls, ops_budget, duplex)
        t_half, _ = _engine_time(algorithm, coll, half, nch, 1, root, spread, nbytes / pieces, engine_proto, nvls, ops_budget, duplex)
        level_cost = max(0.0, (t_rep - t_half) / (levels_rep - tree_levels(r // 2)))
        data += level_cost * (levels_full - levels_rep)
    if not ideal:   # NCCL's per-channel kernel cap, as the engine takes it (sim.nccl.execution.kernel_capped)
        kc = kernel_capped(plan, nbytes, data)
        if kc.capped:
            data, lat = kc.data_us, kc.latency_us
            extra.update(kernel_cap_us=data, latency_us=lat)
        extra.update(kc.lag_explain(plan))   # part of latency_us, said apart (sim.nccl.execution.tree_chunk_lag_us)
    t = lat + data
    explain = {**extra, "bandwidth_term_us": data, "replica_nodes": r, "tree_levels": levels_full,
               "replica_tree_levels": levels_rep, "level_cost_us": level_cost, "simulated_ops": sim_ops,
               "pieces_per_channel": pieces}
    n = topo.nranks
    return Result.of(coll, nbytes, n, algorithm, proto.name, t, steps, model="flow", topology=topo.name,
                     nchannels=nch, pipeline=pieces, explain=explain)


def replica_ops(algorithm: str, coll, topo: Topology, nchannels: int = 1) -> int:
    """Ops of one piece of ``algorithm`` on ``topo``, estimated from the replica (ops grow with the GPUs)."""
    m = int(topo.hardware.nodes or 1)
    r = min(m, REPLICA_NODES)
    small = replica(topo, r) if r < m else topo
    one = build_program(algorithm, coll, small.nranks, topology=small, nchannels=1, pipeline=1)
    return int(math.ceil(one.nops * nchannels * topo.nranks / small.nranks))


__all__ = ["replica_simulate", "replica", "replica_spec", "replica_oversubscription", "tree_levels", "covers", "replica_ops", "REPLICA_NODES",
           "REPLICA_ALGORITHMS"]
