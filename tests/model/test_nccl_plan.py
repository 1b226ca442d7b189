"""One NCCL recipe (sim.nccl.execution.plan_nccl) for the engine and the flow model; NCCL's tree correction."""
import dataclasses

import pytest

import sim
from sim.algorithms import analytic
from sim.collectives import get_collective
from sim.nccl.execution import nccl_channels, plan_nccl
from sim.nccl.machine import machine
from sim.presets import load_topology

AR = get_collective("all_reduce")
C6 = "hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200"


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "broadcast", "reduce"])
@pytest.mark.parametrize("size", [8, 64 << 10, 1 << 30])
def test_flow_closed_form_steps_give_the_engines_plan(coll, size):
    # the flow model passes the ring's closed-form nsteps; the engine reads them off its program
    topo, c = load_topology("dgx-h100:nodes=4"), get_collective(coll)
    for proto in ("LL", "LL128", "Simple"):
        eng = plan_nccl(c, size, topo, "ring", proto)
        flow = plan_nccl(c, size, topo, "ring", proto, steps=analytic.ring_steps(coll, topo.nranks))
        # ``split`` (shards per piece) only sizes the pieces of pipelined collectives (ring: broadcast, reduce)
        assert eng.pipelined == (coll in ("broadcast", "reduce")) and (eng.split == 1 or not eng.pipelined)
        assert eng == dataclasses.replace(flow, split=eng.split)


def test_flow_and_engine_report_the_same_latency_term():
    kw = dict(algorithm="ring", protocol="LL")
    e = sim.simulate("all_reduce", 4096, "dgx-h100:nodes=4", **kw)
    f = sim.simulate("all_reduce", 4096, "dgx-h100:nodes=4", model="flow", **kw)
    assert e.explain["latency_us"] == f.explain["latency_us"]
    assert (e.nchannels, e.explain["channels_spread_over_nics"]) == (f.nchannels, True) == (8, True)


def test_channels_spread_over_nics_only_across_nodes():
    assert nccl_channels(load_topology("dgx-h100:nodes=2"), "ring") == (True, 8)
    assert nccl_channels(load_topology("dgx-h100:nodes=2"), "nvls") == (False, 1)
    assert nccl_channels(load_topology("dgx-h100"), "tree") == (False, 1)
    assert nccl_channels(load_topology("dgx-h100:nodes=2"), "ring", 3) == (True, 3)


@pytest.mark.parametrize("size,proto,factor", [(64 << 10, "LL", 0.6), (4 << 10, "LL", 0.7), (256 << 10, "LL128", 0.6),
                                               (32, "LL", 1.0), (1 << 30, "Simple", 1.0)])
def test_tree_all_reduce_takes_nccls_correction_factor(size, proto, factor):
    # LL128 across nodes needs NICs within PXB of the GPUs (Polaris' are behind the CPU): the same nodes with PXB NICs
    topo = load_topology(C6 + (",nic_path=PXB" if proto == "LL128" else ""))
    p = plan_nccl(AR, size, topo, "tree", proto)
    assert p.tree_correction == factor   # treeCorrectionFactor[proto][log2(size / 64)], none outside 64 B..256 MiB
    assert p.engine_protocol.payload_efficiency == pytest.approx(p.payload_share * p.small_share * factor, rel=1e-15)
    ring = plan_nccl(AR, size, topo, "ring", proto)
    assert ring.tree_correction == 1.0


def test_tree_correction_slows_only_the_data_term(monkeypatch):
    # LL at 64 KiB: factor 0.6 (log2(64 KiB / 64) = 10); without it the data term is 0.6 x as long
    import sim.nccl.tuner as tuner
    size = 64 << 10
    assert tuner.TREE_CORRECTION["LL"][10] == 0.6
    r = sim.simulate("all_reduce", size, C6, algorithm="tree", protocol="LL")
    monkeypatch.setitem(tuner.TREE_CORRECTION, "LL", (1.0,) * 23)
    u = sim.simulate("all_reduce", size, C6, algorithm="tree", protocol="LL")
    assert r.explain["tree_correction"] == 0.6 and "tree_correction" not in u.explain
    assert r.explain["latency_us"] == u.explain["latency_us"]
    assert u.explain["bandwidth_term_us"] == pytest.approx(0.6 * r.explain["bandwidth_term_us"], rel=1e-5)
    # 32 B is below NCCL's table (log2(32 / 64) < 0): no factor
    assert "tree_correction" not in sim.simulate("all_reduce", 32, C6, algorithm="tree", protocol="LL").explain


def test_machine_is_read_once_per_topology():
    topo = load_topology("dgx-h100:nodes=2")
    assert machine(topo) is machine(topo)
    assert machine(load_topology("dgx-h100:nodes=2")) == machine(topo)   # a new object reads the same facts
