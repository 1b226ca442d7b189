"""nccl-tests times back-to-back calls, and a rooted chain's calls overlap: broadcast and reduce cost a period.

Expected values come from outside the model: ABCI 2.0's published broadcast (public cases ABCI-A-*-BC, 8 A100
per node, InfiniBand) takes the same time at 4 B on 2 and on 16 nodes (7.79 and 7.71 us), where one call
alone would cross a chain 8 times longer; and closed forms: every link of a chain carries the call's bytes
once, so at large sizes a call costs the size over the busiest link, whatever the chain's length, and a
reduce (the chain run backwards) costs what a broadcast does. The engine and the flow model are two
implementations of the same period and must agree.
"""
import json
import os

import pytest

import sim

CASES = os.path.join(os.path.dirname(sim.__file__), "data", "public_cases.json")
ABCI = "dgx-a100:nodes={},nics_per_node=4,nic_gbps=200,fabric=ib"


def _published(case_id: str, size: int) -> float:
    case = next(c for c in json.load(open(CASES))["cases"] if c["id"] == case_id)
    return next(r["time_us"] for r in case["rows"] if r["size"] == size)


def test_a_small_broadcast_costs_the_same_on_2_and_16_nodes_as_published():
    t2, t16 = (sim.simulate("broadcast", 4, ABCI.format(n), nccl_version="2.18") for n in (2, 16))
    measured = _published("ABCI-A-16-BC", 4) / _published("ABCI-A-2-BC", 4)       # 0.99
    assert t16.time_us / t2.time_us == pytest.approx(measured, rel=0.1)
    # one call alone crosses the whole chain: 8x the ranks, several times the time (NCCL's own n-hop model)
    assert t16.explain["single_call_us"] > 4 * t2.explain["single_call_us"]
    for r, n in ((t2, 2), (t16, 16)):   # within a factor 1.6 of the measurement (one call alone: 8-56x)
        assert r.time_us / _published(f"ABCI-A-{n}-BC", 4) < 1.6
        assert r.explain["single_call_us"] / _published(f"ABCI-A-{n}-BC", 4) > 5


@pytest.mark.parametrize("coll", ["broadcast", "reduce"])
def test_a_large_call_costs_its_busiest_link_whatever_the_chain(coll):
    size = 1 << 30
    t2, t16 = (sim.simulate(coll, size, f"dgx-h100:nodes={n}", algorithm="ring", protocol="Simple") for n in (2, 16))
    assert t16.time_us == pytest.approx(t2.time_us, rel=0.05)
    busiest = max(t16.link_busy_us.values())
    assert t16.explain["bandwidth_term_us"] == pytest.approx(busiest, rel=1e-9)


def test_a_reduce_costs_what_a_broadcast_does():
    for size in (1 << 12, 1 << 26):
        b, r = (sim.simulate(c, size, "dgx-h100:nodes=4", algorithm="ring", protocol="Simple") for c in ("broadcast", "reduce"))
        assert r.time_us == pytest.approx(b.time_us, rel=0.02)


@pytest.mark.parametrize("size", [1 << 16, 1 << 26])
def test_the_engine_and_the_flow_model_agree_on_the_period(size):
    e, f = (sim.simulate("broadcast", size, "dgx-h100:nodes=4", algorithm="ring", protocol="Simple", model=m)
            for m in ("engine", "flow"))
    assert f.time_us == pytest.approx(e.time_us, rel=0.01)


def test_the_tuner_model_times_the_period_and_nccl_still_chooses_by_its_own_model():
    r = sim.simulate("broadcast", 8, "dgx-h100:nodes=16", model="tuner")
    assert r.time_us < r.explain["single_call_us"] / 5
    chosen = sim.simulate("broadcast", 8, "dgx-h100:nodes=16")
    assert "n-hop" not in chosen.explain.get("selected_by", "")   # selection unchanged: NCCL's tuner ranks pairs
    assert chosen.explain["tuner_time_us"] == pytest.approx(r.explain["single_call_us"], rel=1e-9)


def test_collectives_that_close_a_ring_keep_one_call():
    r = sim.simulate("all_reduce", 8, "dgx-h100:nodes=16")
    assert "single_call_us" not in r.explain
