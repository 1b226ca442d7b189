"""Invariants every prediction must keep, checked with hypothesis over random small topologies,
collectives, sizes, algorithms and protocols (kept fast: at most 8 GPUs, a few dozen examples each).

* time never decreases with size;
* more bandwidth or less latency on a link never makes a collective slower;
* the reference SimPy engine and the default engine agree;
* ``verify`` holds for every built-in algorithm at every world size it supports (2..12);
* the large-scale models agree with the engine where both run, within their documented tolerance;
* busbw never exceeds what the algorithm can move through a GPU's own links (the narrowest cut
  around one GPU: every GPU sends its share of the data out through them).
"""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import algorithms, build_program, why_not
from sim.collectives import get_collective
from sim.presets import load_topology
from sim.topology import Topology
from sim.verify import verify

FAST = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
PROTOCOLS = ("ideal", "LL", "LL128", "Simple")


@st.composite
def topologies(draw, max_gpus: int = 8) -> str:
    """A small topology spec: a textbook ring/switch/full mesh, or a hardware preset of 2..8 GPUs."""
    kind = draw(st.sampled_from(["ring", "switch", "fully-connected", "dgx-h100", "dgx-a100", "dgx-h100-2n"]))
    if kind == "dgx-h100-2n":
        return f"dgx-h100:nodes=2,gpus_per_node={draw(st.sampled_from([2, 4]))}"
    if kind.startswith("dgx"):
        return f"{kind}:gpus_per_node={draw(st.integers(2, max_gpus))}"
    bw = draw(st.sampled_from([25.0, 100.0, 400.0]))
    lat = draw(st.sampled_from([0.5, 1.0, 5.0]))
    return f"{kind}:n={draw(st.integers(2, max_gpus))},bandwidth_GBps={bw},latency_us={lat}"


@st.composite
def runs(draw):
    """(collective, topology spec, algorithm, protocol) that can run."""
    spec = draw(topologies())
    topo = load_topology(spec)
    coll = draw(st.sampled_from(COLLECTIVES))
    usable = [a for a in algorithms() if why_not(a, coll, topo.nranks, topo) is None]
    assume(usable)
    algo = draw(st.sampled_from(usable))
    proto = draw(st.sampled_from(PROTOCOLS))
    try:
        sim.simulate(coll, 1 << 10, topo, algo, proto, model="engine")
    except sim.CollsimError:
        assume(False)   # an (algorithm, protocol) pair NCCL does not run (NVLS with LL...)
    return coll, spec, algo, proto


sizes = st.integers(min_value=1, max_value=1 << 26)


@FAST
@given(runs(), sizes, sizes)
def test_time_never_decreases_with_size(run, a, b):
    coll, spec, algo, proto = run
    small, big = sorted((a, b))
    r_small = sim.simulate(coll, small, spec, algo, proto, model="engine")
    r_big = sim.simulate(coll, big, spec, algo, proto, model="engine")
    # NCCL's own size rules are steps, and a size past a step can be faster than one just before it:
    # small messages run on fewer channels (enqueue.cc: nc drops while nbytes < nc x threads x threshold)
    # and tree all_reduce takes treeCorrectionFactor by log2 size. Where either differs between the two
    # sizes, NCCL's model is not monotone either; everywhere else the time must not decrease.
    x, y = r_small.explain, r_big.explain
    assume(x.get("nccl_channels_threads_used") == y.get("nccl_channels_threads_used"))
    assume(x.get("tree_correction") == y.get("tree_correction"))
    assert r_big.time_us >= r_small.time_us * (1 - 1e-9), (r_small.time_us, r_big.time_us)


def _faster(topo: Topology, link: int, bandwidth: float, latency: float) -> Topology:
    """``topo`` with link ``link`` ``bandwidth`` times as fast and ``latency`` times its latency."""
    links = list(topo.links)
    l = links[link]
    links[link] = dataclasses.replace(l, bandwidth_GBps=l.bandwidth_GBps * bandwidth, latency_us=l.latency_us * latency)
    return Topology.build(topo.name, topo.nodes, links, topo.meta)


@FAST
@given(runs(), sizes, st.data())
def test_a_faster_link_never_slows_a_collective(run, nbytes, data):
    coll, spec, algo, _ = run
    proto = "ideal"   # NCCL protocols take their latency term from the machine's facts, not the link table
    topo = load_topology(spec)
    assume(topo.meta.get("symmetry") == "rotation")   # textbook topologies: every link a uniform wire
    link = data.draw(st.integers(0, len(topo.links) - 1))
    bw = data.draw(st.sampled_from([1.0, 1.5, 4.0]))
    lat = data.draw(st.sampled_from([1.0, 0.5, 0.0]))
    faster = _faster(topo, link, bw, lat)
    # routes follow latency, so a lower latency can move a route onto a link another transfer uses
    # (recursive_hd on a 4-ring: one faster link turns a distance-2 route, and two transfers then share
    # it): that is routing, not the link; the property is about the same routes on a faster link
    n = topo.nranks
    assume(all(topo.route(a, b) == faster.route(a, b) for a in range(n) for b in range(n) if a != b))
    base = sim.simulate(coll, nbytes, topo, algo, proto, model="engine").time_us
    better = sim.simulate(coll, nbytes, faster, algo, proto, model="engine").time_us
    assert better <= base * (1 + 1e-9), (topo.link_label(link), bw, lat, base, better)


@FAST
@given(runs(), st.integers(1, 1 << 22))
def test_reference_and_default_engines_agree(run, nbytes):
    coll, spec, algo, proto = run
    fast = sim.simulate(coll, nbytes, spec, algo, proto, model="engine")
    ref = sim.simulate(coll, nbytes, spec, algo, proto, model="engine", engine="reference")
    assert ref.time_us == pytest.approx(fast.time_us, rel=1e-9)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(algorithms())), st.sampled_from(COLLECTIVES), st.integers(2, 12), st.data())
def test_verify_holds_for_every_algorithm_at_every_supported_world_size(name, coll, n, data):
    # with a host layout where the algorithm needs one (hosts of k GPUs), else without a topology
    k = data.draw(st.sampled_from([d for d in (1, 2, 3, 4) if n % d == 0]))
    topo = load_topology(f"dgx-h100:nodes={n // k},gpus_per_node={k}") if n // k >= 1 and k >= 2 else None
    if why_not(name, coll, n, topo) is not None:
        topo = None
    assume(why_not(name, coll, n, topo) is None)
    root = data.draw(st.integers(0, n - 1)) if get_collective(coll).rooted else 0
    assert verify(build_program(name, coll, n, topology=topo, root=root)).ok


# documented tolerances: sim.prediction.replica within 2% of the engine (docs/performance.md: equal where neither
# extrapolates, the two extrapolate from different ops budgets past it),
# sim.prediction.flow_alltoall is within about 10% (the engine's start-up queue), the textbook algorithms' step model within sim.prediction.flow_steps.TOLERANCE, and the
# ring's flows within 2.25 chunk times where nodes share the aggregated spine (docs/performance.md,
# "The flow model's rings"; rooted chains across nodes are its documented weak spot and are left out)
EXACT = {"tree": 0.02, "nvls_tree": 0.02, "nvls": 0.02, "p2p": 0.10}   # p2p: the engine queues up to ~10% more (sim.prediction.flow_alltoall)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.sampled_from(["dgx-h100:nodes=2", "dgx-h100:nodes=4", "dgx-a100:nodes=2", "dgx-h100:nodes=2,gpus_per_node=4",
                        "dgx-h100"]),
       st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]),
       st.sampled_from(["LL", "LL128", "Simple"]), st.integers(1 << 10, 1 << 26), st.data())
def test_large_scale_models_agree_with_the_engine(spec, coll, proto, nbytes, data):
    from sim.prediction.flow import flow_covers
    from sim.prediction.flow_steps import TOLERANCE
    topo = load_topology(spec)
    covered = [a for a in algorithms() if why_not(a, coll, topo.nranks, topo) is None and flow_covers(get_collective(coll), a, topo) is None]
    assume(covered)
    algo = data.draw(st.sampled_from(covered))
    assume(not (algo == "ring" and get_collective(coll).rooted and topo.nhosts > 1))
    try:
        e = sim.simulate(coll, nbytes, topo, algo, proto, model="engine")
    except sim.CollsimError:
        assume(False)
    f = sim.simulate(coll, nbytes, topo, algo, proto, model="flow")
    if algo == "ring":
        n, x = topo.nranks, f.explain
        chunk_us = nbytes / (n * f.nchannels * f.pipeline) / (x["payload_share"] * x["bottleneck_GBps"] * 1e3)
        assert abs(f.time_us - e.time_us) <= 2.25 * chunk_us + 1e-6 * e.time_us, (f.time_us, e.time_us, chunk_us)
    else:
        assert abs(f.time_us / e.time_us - 1) <= EXACT.get(algo, TOLERANCE), (algo, f.time_us, e.time_us)


@FAST
@given(runs(), st.integers(1 << 16, 1 << 28))
def test_busbw_never_exceeds_a_gpus_own_links(run, nbytes):
    coll, spec, algo, proto = run
    topo = load_topology(spec)
    r = sim.simulate(coll, nbytes, topo, algo, proto, model="engine")
    n = topo.nranks
    prog = build_program(algo, coll, n, topology=topo)
    gpu = lambda i: topo.nodes[topo.gpus[i]].name
    # every GPU's out and in bandwidth: the cut between it and the rest of the machine
    out_bw = min(sum(l.bandwidth_GBps for l in topo.links if l.src == gpu(i)) for i in range(n))
    in_bw = min(sum(l.bandwidth_GBps for l in topo.links if l.dst == gpu(i)) for i in range(n))
    # busbw's bus factor counts the bytes a ring moves per GPU; an in-network reduction (switches in
    # the program) moves fewer, S instead of 2(n-1)/n S for all_reduce, so it may show up to 2(n-1)/n more
    factor = {"all_reduce": 2 * (n - 1) / n}.get(coll, 1.0) if prog.switches else 1.0
    assert r.busbw_GBps <= factor * min(out_bw, in_bw) * (1 + 1e-9), (r.busbw_GBps, out_bw, in_bw)
