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


# ---- node-level rotation: every host moves to the next (rail-optimised clusters) -------------------------
@pytest.mark.parametrize("spec", ["dgx-a100:nodes=3,nics_per_node=4", "dgx-h100:nodes=4,nics_per_node=1"])
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("proto", ["Simple", "LL", "ideal"])
def test_host_rotation_equals_op_by_op(spec, collective, proto):
    # NCCL's rings spread over the NICs (one channel per NIC, each rotated inside every host) are
    # invariant under "every host to the next"; simulating one host's ops must change nothing: the
    # time, every link's bytes and busy time, and every op's start and end (what the trace shows)
    from sim.collectives import get_collective
    from sim.engine.trace_export import expand_times
    from sim.nccl.execution import effective_topology, plan_nccl, spread_program
    from sim.nccl.protocols import IDEAL
    topo, coll = load_topology(spec), get_collective(collective)
    if proto == "ideal":
        prog, t, p = build_program("ring", coll, topo.nranks, topology=topo, nchannels=2), topo, IDEAL
    else:
        plan = plan_nccl(coll, 1 << 26, topo, "ring", proto)
        prog, t, p = spread_program("ring", coll, topo, plan.nchannels, 2), effective_topology(topo), plan.engine_protocol
    full = simulate_program(prog, t, 1 << 26, p, symmetry="off")
    fast = simulate_program(prog, t, 1 << 26, p)
    hosts = topo.nhosts
    if proto != "ideal" or spec.endswith("nics_per_node=1"):
        assert fast.symmetric and len(fast.op_index) * hosts == len(full.op_index)
    assert fast.time_us == full.time_us
    assert np.array_equal(fast.link_bytes, full.link_bytes)
    assert np.allclose(fast.link_busy_us, full.link_busy_us, rtol=1e-12, atol=0)
    for a, b in zip(expand_times(fast, prog), expand_times(full, prog)):
        assert np.array_equal(a, b)


def test_host_rotation_is_not_used_where_routes_share_the_spine():
    # dgx-h100 has a NIC per GPU: a ring leaving a host on rail 7 enters the next on rail 0 through the
    # one aggregated spine, whose links every host's traffic shares (fixed by the rotation)
    from sim.engine.symmetry import find_shift, host_shift
    topo = load_topology("dgx-h100:nodes=4")
    prog = build_program("ring", "all_reduce", topo.nranks, topology=topo)
    assert host_shift(topo) is not None and find_shift(prog, 8) is not None
    assert not simulate_program(prog, topo, 1 << 20).symmetric


def test_find_shift_rejects_programs_that_are_not_invariant():
    from sim.engine.symmetry import find_shift
    topo = load_topology("dgx-h100:nodes=4")
    assert find_shift(build_program("tree", "all_reduce", topo.nranks, topology=topo), 8) is None
    assert find_shift(build_program("ring", "broadcast", 32, root=3), 8) is None


def test_host_rotation_is_kept_to_programs_whose_ties_it_preserves():
    # hierarchical_ring's op set is invariant under the host shift, but same-instant ties on a link are
    # served in op-index order, which the shift does not preserve: the quotient would be 0.6% off
    from sim.engine.symmetry import find_shift
    topo = load_topology("dgx-h100:nodes=2,gpus_per_node=2,sharp=1")
    prog = build_program("hierarchical_ring", "all_reduce", topo.nranks, topology=topo, nchannels=2, pipeline=2)
    assert find_shift(prog, 2) is not None
    run = simulate_program(prog, topo, 4e5)
    assert not run.symmetric
    assert run.time_us == simulate_program(prog, topo, 4e5, symmetry="off").time_us
