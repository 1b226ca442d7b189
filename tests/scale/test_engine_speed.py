"""The engine's speed-ups change nothing: batched events, the numpy path and the dependency filter give
bit-identical times to the op-at-a-time loop."""
import numpy as np
import pytest

import sim.engine.loop as loop
from sim.algorithms import build_program
from sim.engine import simulate_program
from sim.engine.fast import dependencies
from sim.nccl.protocols import get_protocol
from sim.presets import load_topology

CASES = [  # (topology, collective, nchannels, pipeline, protocol): links shared, not shared, multi-hop
    ("switch:n=64", "all_reduce", 3, 1, "ideal"),          # 3 channels queue on every port (FIFO)
    ("ring:n=60", "all_gather", 1, 2, "LL"),                # pipelined pieces on one ring
    ("fully-connected:n=50", "broadcast", 2, 4, "ideal"),   # a chain: one hop busy at a time
    ("switch:n=12,latency_us=0", "all_to_all", 1, 1, "ideal"),  # many ops launch at once on shared ports
    ("dgx-h100:nodes=2", "all_reduce", 1, 1, "ideal"),      # 8-link routes through a shared spine
]


def _run(spec, coll, nch, pipe, proto, vector_min, monkeypatch):
    monkeypatch.setattr(loop, "VECTOR_MIN", vector_min)
    topo = load_topology(spec)
    prog = build_program("ring", coll, topo.nranks, nchannels=nch, pipeline=pipe, root=3)
    return simulate_program(prog, topo, 1 << 24, get_protocol(proto), symmetry="off")


@pytest.mark.parametrize("case", CASES, ids=[c[0] + "-" + c[1] for c in CASES])
def test_numpy_path_is_bit_identical_to_the_loop(case, monkeypatch):
    fast = _run(*case, vector_min=2, monkeypatch=monkeypatch)          # numpy for every group it can take
    slow = _run(*case, vector_min=10 ** 12, monkeypatch=monkeypatch)   # never numpy
    assert fast.time_us == slow.time_us
    assert np.array_equal(fast.op_start_us, slow.op_start_us)
    assert np.array_equal(fast.op_end_us, slow.op_end_us)
    assert fast.events == slow.events


def test_same_instant_completions_share_one_event():
    n = 64
    topo = load_topology(f"ring:n={n},bandwidth_GBps=100,latency_us=1")
    run = simulate_program(build_program("ring", "all_reduce", n), topo, 1 << 30, symmetry="off")
    assert len(run.op_index) == 2 * (n - 1) * n
    assert run.events == 2 * (n - 1)     # one per step: all n ranks' transfers of a step land together
    assert run.time_us == pytest.approx(2 * (n - 1) * (1 + (1 << 30) / n / 100e3), rel=1e-12)


def test_events_are_batched_per_instant_not_lost_under_contention():
    # 4 channels on one switch: a step's 4 channels land one serialisation apart, each instant one event
    n = 32
    topo = load_topology(f"switch:n={n}")
    prog = build_program("ring", "all_reduce", n, nchannels=4)
    run = simulate_program(prog, topo, 1 << 28, symmetry="off")
    assert run.events == len(np.unique(run.op_end_us))
    assert run.events < prog.nops / (n / 2)


def test_symmetric_and_op_by_op_agree_with_contention():
    topo = load_topology("switch:n=32")
    prog = build_program("ring", "all_reduce", 32, nchannels=4, pipeline=2)
    full = simulate_program(prog, topo, 1 << 26, symmetry="off")
    fast = simulate_program(prog, topo, 1 << 26)
    assert fast.symmetric and len(fast.op_index) * 32 == len(full.op_index)
    assert fast.time_us == pytest.approx(full.time_us, rel=1e-12)
    assert np.allclose(fast.link_busy_us, full.link_busy_us)


@pytest.mark.parametrize("coll", ["all_reduce", "all_to_all", "reduce"])
def test_dependencies_of_a_subset_match_the_full_computation(coll):
    prog = build_program("ring", coll, 6, nchannels=2, pipeline=2, root=2)
    order, lo, hi = dependencies(prog)
    for some in (np.arange(0, prog.nops, 5), np.array([0]), np.flatnonzero(prog.step == prog.step.max())):
        o2, lo2, hi2 = dependencies(prog, some)   # only writes to the slots these ops read are sorted
        for i, op in enumerate(some):
            assert sorted(order[lo[op]:hi[op]]) == sorted(o2[lo2[i]:hi2[i]])
