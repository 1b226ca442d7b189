"""The engine against the closed forms, where the closed forms are exact."""
import numpy as np
import pytest

from sim.algorithms import analytic, build_program
from sim.engine import simulate_program
from sim.presets import load_topology

SIZES = [1 << 10, 1 << 16, 1 << 20, 1 << 26, 1 << 30]


@pytest.mark.parametrize("n", range(2, 17))
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])
def test_ring_matches_closed_form(n, collective):
    topo = load_topology(f"ring:n={n},bandwidth_GBps=100,latency_us=1")
    prog = build_program("ring", collective, n, root=n - 1)
    for nbytes in SIZES:
        got = simulate_program(prog, topo, nbytes).time_us
        want = analytic.ring_time_us(collective, n, nbytes, 100.0, 1.0)
        assert got == pytest.approx(want, rel=1e-9), (n, nbytes)


@pytest.mark.parametrize("n,pieces", [(2, 2), (3, 4), (8, 3), (16, 5)])
@pytest.mark.parametrize("latency_us", [0.01, 1.0, 40.0])
def test_pipelined_ring_matches_closed_form_in_both_regimes(n, pieces, latency_us):
    topo = load_topology(f"ring:n={n},bandwidth_GBps=50,latency_us={latency_us}")
    for collective in ("all_reduce", "all_gather", "broadcast"):
        prog = build_program("ring", collective, n, pipeline=pieces)
        for nbytes in (1 << 12, 1 << 24):
            got = simulate_program(prog, topo, nbytes).time_us
            assert got == pytest.approx(analytic.ring_time_us(collective, n, nbytes, 50.0, latency_us, pieces), rel=1e-9)


def test_ring_all_reduce_on_eight_ranks_is_fourteen_steps_of_alpha_plus_s_over_8b():
    import sim
    for nbytes in (1 << 20, 1 << 24, 1 << 30):
        r = sim.simulate("all_reduce", nbytes, "ring:n=8,bandwidth_GBps=100,latency_us=1", algorithm="ring", protocol="ideal")
        assert r.steps == 14
        assert r.time_us == pytest.approx(14 * (1 + nbytes / 8 / 100e3), rel=1e-9)


@pytest.mark.parametrize("spec", ["switch:n=6,latency_us=2", "fully-connected:n=5"])
def test_ring_on_switch_and_mesh_costs_what_it_costs_on_a_ring(spec):
    topo = load_topology(spec)
    n = topo.nranks
    lat = topo.meta["latency_us"]
    for nbytes in (4096, 1 << 28):
        got = simulate_program(build_program("ring", "all_reduce", n), topo, nbytes).time_us
        assert got == pytest.approx(analytic.ring_time_us("all_reduce", n, nbytes, 100.0, lat), rel=1e-9)


def test_engine_is_deterministic():
    topo = load_topology("switch:n=8")
    prog = build_program("ring", "all_to_all", 8, nchannels=2)
    a = simulate_program(prog, topo, 1 << 22, symmetry="off")
    b = simulate_program(prog, topo, 1 << 22, symmetry="off")
    assert a.time_us == b.time_us and np.array_equal(a.op_end_us, b.op_end_us)
