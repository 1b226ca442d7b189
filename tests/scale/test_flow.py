"""The flow model agrees with the chunk-level engine where both run, and says where it does not."""
import numpy as np
import pytest

import sim
import sim.prediction.flow as flow
from sim.errors import CollsimError
from sim.prediction.flow import flow_simulate, ring_flows, ring_time_us
from sim.presets import load_topology

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]


def _both(coll, nbytes, spec, proto, **kw):
    topo = load_topology(spec)
    e = sim.simulate(coll, nbytes, topo, algorithm="ring", protocol=proto, **kw)
    f = sim.simulate(coll, nbytes, topo, algorithm="ring", protocol=proto, model="flow", **kw)
    return e, f


def test_1024_rank_ring_closed_form():
    n, s = 1024, 1 << 30
    r = sim.simulate("all_reduce", s, f"ring:n={n},bandwidth_GBps=100,latency_us=1", "ring", "ideal", model="flow")
    assert r.model == "flow" and r.steps == 2 * (n - 1)
    assert r.time_us == pytest.approx(2 * (n - 1) * (1 + s / n / 100e3), rel=1e-9)


@pytest.mark.parametrize("spec", ["ring:n=6", "switch:n=8", "fully-connected:n=5", "dgx-h100:gpus_per_node=4"])
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_equals_engine_when_no_link_is_shared(spec, coll):
    for proto, nch in (("ideal", 1), ("ideal", 3), ("LL", 1), ("Simple", 2)):
        for nbytes in (1 << 16, 1 << 26):
            e, f = _both(coll, nbytes, spec, proto, nchannels=nch, root=1)
            assert f.time_us == pytest.approx(e.time_us, rel=1e-6), (proto, nch, nbytes)
            assert (f.nchannels, f.pipeline, f.steps) == (e.nchannels, e.pipeline, e.steps)


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("proto", ["ideal", "LL128", "Simple"])
def test_equals_engine_across_nodes_with_one_nic(coll, proto):
    # one NIC per node: every node's flows use their own NIC and leaf port, nothing is shared
    for nbytes in (1 << 16, 1 << 30):
        e, f = _both(coll, nbytes, "dgx-h100:nodes=4,nics_per_node=1", proto)
        assert f.time_us == pytest.approx(e.time_us, rel=1e-6)


@pytest.mark.parametrize("spec", ["gb200-nvl72:gpus_per_node=4,nodes=2", "dgx-h100:nodes=2", "dgx-h100:nodes=4"])
@pytest.mark.parametrize("proto", ["ideal", "LL128"])
def test_shared_spine_costs_the_engine_at_most_a_few_chunks(spec, proto):
    # Flows of several nodes cross the aggregated spine link at once. The engine serves them first come,
    # first served, so the later ones start a chunk or two late; the flow model shares the link fluidly.
    n = load_topology(spec).nranks
    for coll in ("all_reduce", "all_gather"):
        e, f = _both(coll, 1 << 30, spec, proto)
        wire = (1 << 30) / n / (f.nchannels * f.pipeline) / f.explain.get("payload_share", 1.0)
        chunk_us = wire / (f.explain["bottleneck_GBps"] * 1e3)
        assert 0 <= e.time_us - f.time_us <= 2.5 * chunk_us + 1e-6


def test_within_one_percent_of_the_engine_at_128_ranks_despite_the_shared_spine():
    e, f = _both("all_reduce", 1 << 30, "dgx-h100:nodes=16", "ideal")
    assert abs(f.time_us / e.time_us - 1) < 0.01


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=40", "gb200-nvl72:gpus_per_node=8,nodes=6", "hgx-a100-4:nodes=6"])
def test_tier_aggregation_equals_counting_every_route(spec):
    # dgx-h100:nodes=40 spans two scalable units (32 + 8 nodes): the partial one must look the same
    from sim.nccl.execution import channel_order, link_efficiency
    topo = load_topology(spec)
    nch = topo.meta["nics_per_node"]
    for orders in (None, [channel_order(topo, c, nch) for c in range(nch)]):
        kw = {"efficiency": lambda l: link_efficiency(topo, l)}
        a = ring_flows(topo, orders, method="routes", **kw)
        b = ring_flows(topo, orders, method="tiers", **kw)
        assert (a.period, b.period) == (topo.meta["gpus_per_node"],) * 2
        assert np.allclose(a.latency_us, b.latency_us) and np.allclose(a.us_per_byte, b.us_per_byte)


def test_rotation_aggregation_equals_counting_every_route():
    topo = load_topology("switch:n=12")
    a, b = ring_flows(topo, method="rotation"), ring_flows(topo, method="routes")
    assert (a.period, b.period) == (1, 1)
    assert np.allclose(a.us_per_byte, b.us_per_byte) and np.allclose(a.latency_us, b.latency_us)


@pytest.mark.parametrize("pieces", [1, 3])
def test_periodic_regime_shortcut_changes_nothing(pieces, monkeypatch):
    # a heterogeneous ring (slow every 4th hop) reaches a periodic regime; skipping cycles is exact
    rings = flow.Rings(64, 4, np.array([[0.5, 0.5, 0.5, 3.0]]), np.array([[1e-5, 1e-5, 1e-5, 4e-5]]), "routes")
    fast = ring_time_us(rings, 5000, pieces, 1e6, 0.3)
    monkeypatch.setattr(flow, "_cycle", lambda history: None)
    slow = ring_time_us(rings, 5000, pieces, 1e6, 0.3)
    assert fast == pytest.approx(slow, rel=1e-9)


def test_sixteen_thousand_gpus_from_the_cli(cli):
    code, out, _ = cli("simulate", "--topology", "dgx-h100:nodes=2048", "--model", "flow", "--algorithm", "ring",
                       "-b", "1G", "-e", "1G", "--format", "json")
    assert code == 0
    import json
    payload = json.loads(out)
    row = payload["results"][0]
    assert payload["nranks"] == 16384 and row["algorithm"] == "ring" and row["steps"] == 2 * 16383
    # bandwidth can't beat the NIC: busbw below 50 GB/s x NCCL's network efficiency
    assert 0 < row["busbw_GBps"] < 50 * 0.78


def test_what_the_flow_model_does_not_cover():
    with pytest.raises(CollsimError, match="all_to_all"):
        flow_simulate("all_to_all", 1 << 20, "ring:n=4", "ring", "ideal")
    with pytest.raises(CollsimError, match="tree"):
        flow_simulate("all_reduce", 1 << 20, "ring:n=4", "tree", "ideal")
    with pytest.raises(CollsimError, match="root"):
        flow_simulate("broadcast", 1 << 20, "ring:n=4", "ring", "ideal", root=9)
