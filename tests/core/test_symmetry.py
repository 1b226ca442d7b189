"""The rotation-symmetry quotient gives the same answer as the op-by-op run."""
import numpy as np
import pytest

from sim.algorithms import build_program
from sim.engine import simulate_program
from sim.presets import load_topology


@pytest.mark.parametrize("spec", ["ring:n=7", "switch:n=6", "fully-connected:n=5"])
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_quotient_equals_op_by_op(spec, collective):
    topo = load_topology(spec)
    prog = build_program("ring", collective, topo.nranks, nchannels=2, pipeline=2)
    assert prog.rotation_holds()
    for nbytes in (1 << 12, 1 << 26):
        full = simulate_program(prog, topo, nbytes, symmetry="off")
        fast = simulate_program(prog, topo, nbytes, symmetry="on")
        assert fast.symmetric and not full.symmetric
        assert fast.time_us == pytest.approx(full.time_us, rel=1e-12)
        assert np.allclose(fast.link_bytes, full.link_bytes)
        assert np.allclose(fast.link_busy_us, full.link_busy_us)
        assert len(fast.op_index) * topo.nranks == len(full.op_index)


def test_rooted_programs_are_not_treated_as_symmetric():
    prog = build_program("ring", "broadcast", 6, root=2)
    assert prog.rotation is None
    with pytest.raises(ValueError):
        simulate_program(prog, load_topology("ring:n=6"), 1 << 20, symmetry="on")


def test_1024_rank_ring_is_exact_and_uses_one_op_per_orbit():
    n, nbytes = 1024, 1 << 30
    prog = build_program("ring", "all_reduce", n)
    run = simulate_program(prog, load_topology(f"ring:n={n},bandwidth_GBps=100,latency_us=1"), nbytes)
    assert run.symmetric and len(run.op_index) == 2 * (n - 1)
    assert run.time_us == pytest.approx(2 * (n - 1) * (1 + nbytes / n / 100e3), rel=1e-9)
