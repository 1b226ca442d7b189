"""Large-scale model of the textbook algorithms (``recursive_hd``, ``hierarchical_ring``, ``direct``,
``binomial``): every step's link loads, step after step.

The engine times a Program op by op: 2 million ops for a 1,024-GPU ``recursive_hd`` all-reduce (80 s).
These algorithms are not pipelined (one piece per channel, :mod:`sim.nccl.recipe`), and every step's
transfers start together and, where they share a link, queue on it first-come first-served; so each
step takes what its busiest link needs:

    data = sum over steps s of  max over links l of  (wire bytes of step s on l) / (bandwidth of l)

(plus, in the ``ideal`` protocol, the step's longest route latency and the protocol's per-transfer
latency). The loads come from the same Program and the same routes the engine uses, summed per
(step, link) with numpy, once per topology (a sweep's sizes and protocols only rescale them). NCCL's
protocols take :func:`sim.nccl.execution.plan_nccl`'s recipe, as the engine does (:func:`sim.nccl.execution.simulate_with_plan`): its
latency term, payload share and effective link bandwidths.

Where it is exact, and where it is not. When every step's transfers leave each GPU on one link in
turn (the data term is the busiest link's bytes, as FIFO makes it), the sum equals the engine. The
engine lets a transfer start as soon as *its* chunk arrived, not when the whole step ended, so
consecutive steps that load *different* links overlap there (hierarchical_ring's phases: NVLink, the
NICs, NVLink), and transfers that share a switch's links queue behind each other (direct). Both are a
share of the data term that depends on the node, not on the node count, so the model is anchored on a
replica of the cluster (:func:`anchor`: the engine's data term over the model's on ``REPLICA_NODES``
nodes, :mod:`sim.prediction.replica`): within :data:`TOLERANCE` of the engine inside one scalable unit
(``tests/scale/test_flow_steps.py``). Across scalable units many transfers queue on each spine link,
which the replica (two units of two nodes) shows only in part: the model is up to
:data:`SPINE_TOLERANCE` faster there (recursive_hd on 64 nodes); ``docs/performance.md`` has the table.
Textbook topologies (rings, meshes: multi-hop routes) keep the engine (:func:`covers`).

>>> import sim
>>> e = sim.simulate("all_reduce", 1 << 26, "dgx-h100:nodes=4", "recursive_hd", "Simple", model="engine")
>>> f = sim.simulate("all_reduce", 1 << 26, "dgx-h100:nodes=4", "recursive_hd", "Simple", model="flow")
>>> f.model, abs(f.time_us / e.time_us - 1) < TOLERANCE
('flow', True)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..algorithms import build_program
from ..engine.result import Result
from ..nccl.protocols import IDEAL
from ..topology import Topology

STEP_ALGORITHMS = ("recursive_hd", "hierarchical_ring", "direct", "binomial")
TOLERANCE = 0.10          # |model / engine - 1| within one scalable unit, checked by tests/scale/test_flow_steps.py
SPINE_TOLERANCE = 0.25    # across scalable units (spine queueing the replica shows only in part; docs/performance.md)
MAX_PAIRS = 20_000        # distinct (sender, receiver) pairs routed (~0.15 ms each on a fat tree): direct up to 141 GPUs


@dataclass(frozen=True, eq=False)
class StepLoads:
    """A one-piece Program's traffic per (step, link), in chunks.

    ``step``, ``link``, ``chunks``: one entry per (step, link) pair that carries traffic, sorted by step;
    ``bounds``: where each step's entries start in them (``np.maximum.reduceat`` boundaries);
    ``latency_us``: per step, the longest route latency of its transfers; ``nchunks``/``steps``: the
    program's."""

    step: np.ndarray
    link: np.ndarray
    chunks: np.ndarray
    bounds: np.ndarray
    latency_us: np.ndarray
    nchunks: int
    steps: int


def covers(coll, algorithm: str, topo: Topology) -> str | None:
    """None if this model can time ``algorithm`` for ``coll`` on ``topo``, else a short reason.

    Hardware presets only: their routes are GPU - NVSwitch - GPU and GPU - NIC - leaf (- spine) - NIC -
    GPU, where a step's transfers share only their endpoints' links (and the spine, which the replica
    anchors). On textbook topologies (rings, meshes) routes share links hop after hop, and the engine's
    first-come first-served queueing there is up to 3x the link-load bound: they keep the engine."""
    if algorithm not in STEP_ALGORITHMS:
        return f"the step model covers {', '.join(STEP_ALGORITHMS)}, not {algorithm}"
    if not topo.hardware.gpu_arch:
        return (f"the step model covers hardware presets, not {topo.name!r} (multi-hop routes queue in the engine "
                f"beyond the link loads)")
    n = topo.nranks
    if algorithm == "direct" and n * (n - 1) > MAX_PAIRS:
        return (f"direct on {n} GPUs has {n * (n - 1):,} sender-receiver pairs, more than the step model routes "
                f"in a few seconds ({MAX_PAIRS:,}); the engine routes them too")
    return None


@lru_cache(maxsize=16)
def step_loads(algorithm: str, coll, topo: Topology, root: int = 0) -> StepLoads:
    """Per (step, link) chunk counts of ``algorithm``'s one-channel, one-piece Program on ``topo``."""
    prog = build_program(algorithm, coll, topo.nranks, topology=topo, nchannels=1, pipeline=1, root=root)
    na = prog.nagents
    agent_node = [topo.gpus[r] for r in range(prog.nranks)] + [topo.node_index[s] for s in prog.switches]
    # (step, src, dst) -> chunks it moves
    key = (prog.step.astype(np.int64) * na + prog.src) * na + prog.dst
    keys, counts = np.unique(key, return_counts=True)
    steps_of, pairs = keys // (na * na), keys % (na * na)
    upairs, pair_of = np.unique(pairs, return_inverse=True)
    links = topo.links
    routes = [topo.route_nodes(agent_node[a // na], agent_node[a % na]) for a in upairs.tolist()]
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    flat = np.fromiter((l for r in routes for l in r), dtype=np.int64, count=int(lens.sum()))
    ptr = np.concatenate([[0], np.cumsum(lens)])
    lat_of_pair = np.array([sum(links[l].latency_us for l in r) for r in routes])
    # expand every (step, pair) entry over its route's links, then sum per (step, link)
    reps = lens[pair_of]
    entry = np.repeat(np.arange(len(keys)), reps)
    offset = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
    link = flat[ptr[pair_of][entry] + offset]
    nl = max(1, len(links))
    sl_all = steps_of[entry] * nl + link
    sl, inv = np.unique(sl_all, return_inverse=True)
    chunks = np.bincount(inv.reshape(-1), weights=counts[entry], minlength=len(sl))
    step, link = sl // nl, sl % nl
    bounds = np.flatnonzero(np.concatenate([[True], step[1:] != step[:-1]]))
    lat = np.zeros(prog.steps)
    np.maximum.at(lat, steps_of, lat_of_pair[pair_of])
    return StepLoads(step, link, chunks, bounds, lat, prog.nchunks, prog.steps)


def step_predict(coll, nbytes: int, topo: Topology, algorithm: str, proto, *, nchannels=None, pipeline=None,
                 root: int = 0) -> Result:
    """The step model's prediction of ``algorithm`` with protocol ``proto`` (module docstring): the
    steps' link loads, anchored on a replica of the cluster where there is one (:func:`anchor`)."""
    r = _predict(coll, nbytes, topo, algorithm, proto, nchannels, pipeline, root)
    factor, rep = anchor(coll, nbytes, topo, algorithm, proto, nchannels, pipeline, root)
    if factor == 1.0:
        return r
    lat = r.explain.get("latency_us", 0.0)
    data = r.explain["bandwidth_term_us"] * factor
    t = lat + data + (r.time_us - lat - r.explain["bandwidth_term_us"])
    explain = {**r.explain, "bandwidth_term_us": data,
               "replica_anchor": f"x{factor:.3f}: the engine over the step loads on {rep}"}
    n = topo.nranks
    return Result.of(coll, nbytes, n, algorithm, r.protocol, t, r.steps, model="flow", topology=topo.name,
                     nchannels=r.nchannels, pipeline=r.pipeline, explain=explain)


def anchor(coll, nbytes: int, topo: Topology, algorithm: str, proto, nchannels=None, pipeline=None,
           root: int = 0) -> tuple[float, str | None]:
    """(factor, replica spec): what the engine's data term is over this model's on a replica of the
    cluster (:func:`sim.prediction.replica.replica`, ``REPLICA_NODES`` nodes, two scalable units when the cluster
    has several), or (1.0, None) where there is none. Up to ``REPLICA_NODES`` nodes the replica is the cluster itself,
so there the model is the engine (as :mod:`sim.prediction.replica` is).

    Why: the engine starts each transfer when its own chunk has arrived, so steps that load different
    links overlap (hierarchical_ring's phases: NVLink, then the NICs, then NVLink); the overlap is a
    share of the data term that depends on the node, not on the node count, so the replica measures it
    (hierarchical_ring: 23-29% slow unanchored, within 4% anchored, 8 to 64 nodes)."""
    from .replica import REPLICA_NODES, replica, replica_spec
    m = int(topo.hardware.nodes or 1)
    if m <= REPLICA_NODES:
        rep = topo       # the replica is the cluster (as in sim.prediction.replica): the model is the engine here
    elif replica_spec(topo, REPLICA_NODES) is None or root >= REPLICA_NODES * len(topo.hosts[0]):
        return 1.0, None
    else:
        rep = replica(topo, REPLICA_NODES)
    if covers(coll, algorithm, rep) is not None:
        return 1.0, None
    from .engine_model import engine_predict as run_engine  # the engine model without the api's budget (a replica)
    model = _predict(coll, nbytes, rep, algorithm, proto, nchannels, pipeline, root)
    engine = run_engine(coll, nbytes, rep, algorithm, proto, nchannels=nchannels, pipeline=pipeline, root=root)
    lat = model.explain.get("latency_us", 0.0)
    fixed = model.time_us - model.explain["bandwidth_term_us"]   # latency term and launch: the same in both
    data_model, data_engine = model.time_us - fixed, engine.time_us - fixed
    if data_model <= 0 or data_engine <= 0 or lat < 0:
        return 1.0, None
    return data_engine / data_model, rep.name


def _predict(coll, nbytes: int, topo: Topology, algorithm: str, proto, nchannels, pipeline, root) -> Result:
    """The unanchored step model on ``topo``."""
    loads = step_loads(algorithm, coll, topo, root)
    n = topo.nranks
    chunk = coll.chunk_nbytes(nbytes, n, loads.nchunks)
    raw = np.array([l.bandwidth_GBps for l in topo.links]) * 1e3            # bytes per us
    explain: dict = {}
    if proto.name == IDEAL.name:
        nch, pieces, lat = nchannels or 1, pipeline or 1, 0.0
        eff, wire = raw, proto.wire_bytes(chunk)
        per_step_latency = loads.latency_us + proto.hop_latency_us
        launch = proto.launch_us
    else:
        from ..nccl.execution import is_duplex, link_efficiency, plan_nccl
        plan = plan_nccl(coll, nbytes, topo, algorithm, proto, nchannels=nchannels, pipeline=pipeline,
                         steps=loads.steps, split=loads.nchunks, root=root)
        nch, pieces, lat = plan.nchannels, plan.pieces, plan.latency_us
        duplex = is_duplex(coll, topo)
        factor: dict[tuple, float] = {}
        eff = raw * np.array([factor.setdefault((l.kind, l.bandwidth_GBps), link_efficiency(topo, l, "", duplex))
                              for l in topo.links])
        wire = plan.engine_protocol.wire_bytes(chunk)
        per_step_latency = np.zeros(loads.steps)
        launch = 0.0
        explain.update({"latency_us": lat, "payload_share": plan.payload_share})
    busy = loads.chunks * wire / eff[loads.link]
    per_step = np.zeros(loads.steps)
    if len(busy):
        per_step[loads.step[loads.bounds]] = np.maximum.reduceat(busy, loads.bounds)
    data = float(per_step.sum() + per_step_latency.sum())
    t = lat + data + launch
    worst = int(np.argmax(busy)) if len(busy) else None
    explain.update({"bandwidth_term_us": data, "step_model": f"{loads.steps} steps, each its busiest link's load"})
    if worst is not None:
        explain["busiest_step_link"] = f"{topo.link_label(int(loads.link[worst]))} in step {int(loads.step[worst])}"
    return Result.of(coll, nbytes, n, algorithm, proto.name, t, loads.steps, model="flow", topology=topo.name,
                     nchannels=nch, pipeline=pieces, explain=explain)


__all__ = ["SPINE_TOLERANCE", "STEP_ALGORITHMS", "TOLERANCE", "StepLoads", "anchor", "covers", "step_loads", "step_predict"]
