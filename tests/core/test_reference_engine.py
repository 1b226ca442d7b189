"""The reference engine (plain SimPy, sim.engine.reference) against the fast engine (sim.engine).

Two independent implementations of one link model: a process per op with a Resource per link, and the
batched array loop with symmetry. They must give the same times and per-link bytes on every algorithm,
collective and protocol (small worlds), so either one's bug shows up as a disagreement.
"""
import json

import numpy as np
import pytest

import sim
from sim.algorithms import algorithms, build_program, why_not
from sim.engine import simulate_program as fast
from sim.engine.reference import simulate_program as reference
from sim.nccl.protocols import IDEAL, SIMPLE
from sim.presets import load_topology

# small worlds that between them let every algorithm run: a ring, IB SHARP, two NVLS nodes, one NVLS node
TOPOLOGIES = ["ring:n=5", "switch:n=6,sharp=1", "dgx-h100:nodes=2,gpus_per_node=2,sharp=1", "dgx-h100:gpus_per_node=4"]


def _cases():
    for spec in TOPOLOGIES:
        topo = load_topology(spec)
        for name, algo in algorithms().items():
            for coll in algo.collectives:
                if why_not(name, coll, topo.nranks, topo) is None:
                    yield pytest.param(spec, name, coll, id=f"{spec}-{name}-{coll}")


def _close(a, b, rel=1e-9):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.allclose(a, b, rtol=rel, atol=rel * max(1.0, float(np.abs(b).max(initial=0))))


@pytest.mark.parametrize("spec,name,coll", list(_cases()))
def test_same_times_and_link_bytes(spec, name, coll):
    topo = load_topology(spec)
    p = build_program(name, coll, topo.nranks, topology=topo, nchannels=2, pipeline=2, root=1)
    nbytes = 1e5 * topo.nranks
    for proto in (IDEAL, SIMPLE):
        want = fast(p, topo, nbytes, proto)                       # symmetry where it applies
        each = fast(p, topo, nbytes, proto, symmetry="off")      # op by op, for per-op times
        got = reference(p, topo, nbytes, proto)
        assert got.time_us == pytest.approx(want.time_us, rel=1e-9)
        assert _close(got.link_bytes, want.link_bytes) and _close(got.link_busy_us, want.link_busy_us)
        assert _close(got.op_start_us, each.op_start_us) and _close(got.op_end_us, each.op_end_us)


def test_every_algorithm_is_covered():
    seen = {c.values[1] for c in _cases()}
    assert seen == set(algorithms()), f"no small topology runs {set(algorithms()) - seen}"


@pytest.mark.parametrize("spec,name,coll", list(_cases()))
def test_same_answer_through_the_nccl_plan(spec, name, coll):
    # NCCL protocols: effective links, channels over NICs, flow-control windows, steady-state extrapolation
    from sim.errors import CollsimError
    from sim.nccl.tuner import protocol_not_run
    for protocol in ("LL", "LL128", "Simple"):
        if protocol_not_run(name, protocol):   # no NCCL kernel runs it: refused by both engines' entry point
            with pytest.raises(CollsimError, match="protocol only|point-to-point"):
                sim.simulate(coll, 1 << 20, spec, name, protocol)
            continue
        want = sim.simulate(coll, 1 << 20, spec, name, protocol)
        got = sim.simulate(coll, 1 << 20, spec, name, protocol, engine="reference")
        assert got.time_us == pytest.approx(want.time_us, rel=1e-9)
        assert got.link_bytes.keys() == want.link_bytes.keys()
        assert all(got.link_bytes[k] == pytest.approx(v, rel=1e-9) for k, v in want.link_bytes.items())


@pytest.mark.slow
@pytest.mark.parametrize("algorithm,protocol", [("ring", "LL"), ("tree", "LL128"), ("tree", "Simple"),
                                                ("nvls_tree", "Simple"), ("nvls", "Simple")])
def test_same_answer_on_two_dgx_nodes(algorithm, protocol):
    # 16 ranks, thousands of ops, many same-instant ties between data dependencies and flow control
    kw = dict(algorithm=algorithm, protocol=protocol)
    want = sim.simulate("all_reduce", 8 << 20, "dgx-h100:nodes=2,sharp=1", **kw)
    got = sim.simulate("all_reduce", 8 << 20, "dgx-h100:nodes=2,sharp=1", engine="reference", **kw)
    assert got.time_us == pytest.approx(want.time_us, rel=1e-9)


def test_fifo_and_cut_through_by_hand():
    # 4 ranks on one switch: rank 0 sends 1 MB to 1, 2 and 3 (a binomial-free broadcast by hand):
    # the three copies queue on rank 0's uplink (FIFO), each crosses two hops cut-through.
    topo = load_topology("switch:n=4,bandwidth_GBps=100,latency_us=1")
    p = sim.Program.from_ops("broadcast", 4, 1, [0, 0, 0], [1, 2, 3], [0, 0, 0], [0, 0, 0], [False] * 3,
                             algorithm="by-hand", steps=1)
    run = reference(p, topo, 1e6)
    up = 1e6 / 100e3   # 10 us on the uplink; the downlink adds only its latency (cut-through)
    lat = sum(topo.links[i].latency_us for i in topo.route(0, 1))
    assert run.op_end_us.tolist() == pytest.approx([up + lat, 2 * up + lat, 3 * up + lat])


def test_cli_engine_reference_and_its_errors(cli):
    args = ["simulate", "-t", "ring:n=4", "-a", "ring", "-p", "ideal", "-b", "1M", "-e", "1M", "--format", "json"]
    times = []
    for extra in ([], ["--engine", "reference"]):
        code, out, _ = cli(*args, *extra)
        assert code == 0
        times.append(json.loads(out)["results"][0]["time_us"])
    assert times[0] == pytest.approx(times[1], rel=1e-12)
    code, _, err = cli(*args, "--engine", "reference", "--model", "tuner")
    assert code == 2 and "collsim: error:" in err and "--model engine" in err and "Traceback" not in err


def test_a_program_too_big_to_read_is_refused_not_run(cli):
    code, _, err = cli("simulate", "-t", "ring:n=512", "-a", "ring", "-p", "ideal", "-b", "1M", "-e", "1M", "--engine", "reference")
    assert code == 2 and "collsim: error:" in err and "default engine" in err


def test_unknown_engine_is_named():
    with pytest.raises(sim.CollsimError, match="unknown engine 'fast'.*default, reference"):
        sim.simulate("all_reduce", 1 << 20, "ring:n=4", "ring", "ideal", engine="fast")
