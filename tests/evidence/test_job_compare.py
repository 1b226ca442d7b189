"""The comparison on hand-made jobs whose answers are known by arithmetic."""
import pytest

from sim import simulate
from sim.evidence.job import Call, Job
from sim.evidence.job_compare import compare_job, step_shares, stragglers
from sim.presets import load_topology


def _call(rank, op="all_reduce", nbytes=1 << 20, start=0.0, dur=100.0, launch=None, **kw):
    return Call(source="t", rank=rank, op=op, nbytes=nbytes, group_size=4, start_us=start, duration_us=dur,
                launch_us=start - 10 if launch is None else launch, **kw)


def test_rows_median_spread_slowest_and_prediction():
    calls = [_call(r, start=1000.0 * k, dur=100.0 + 10 * r + k) for r in range(4) for k in range(3)]
    doc = compare_job(Job(calls=calls), load_topology("switch:n=4"))
    (row,) = doc["collectives"]
    assert (row["calls"], row["ranks"]) == (3, [0, 1, 2, 3])
    assert row["per_rank_us"] == {"0": 101.0, "1": 111.0, "2": 121.0, "3": 131.0}
    assert row["measured_us"] == pytest.approx(116.0) and row["spread_us"] == 30.0 and row["slowest_rank"] == 3
    want = simulate("all_reduce", 1 << 20, "switch:n=4")
    assert row["predicted_us"] == pytest.approx(want.time_us)
    assert (row["model_algorithm"], row["model_protocol"]) == (want.algorithm, want.protocol)


def test_all_gather_is_predicted_at_the_gathered_size():
    calls = [_call(r, op="all_gather", nbytes=65536) for r in range(4)]
    (row,) = compare_job(Job(calls=calls), load_topology("switch:n=4"))["collectives"]
    assert (row["nbytes"], row["nccl_tests_nbytes"]) == (65536, 4 * 65536)
    assert row["predicted_us"] == pytest.approx(simulate("all_gather", 4 * 65536, "switch:n=4").time_us)


def test_agreement_counts_calls():
    want = simulate("all_reduce", 1 << 20, "switch:n=4")
    other = "tree" if want.algorithm != "tree" else "ring"
    calls = [_call(0, nccl_algorithm=want.algorithm, nccl_protocol=want.protocol, choice_source="NCCL log"),
             _call(1, nccl_algorithm=want.algorithm, nccl_protocol="LL" if want.protocol != "LL" else "Simple",
                   choice_source="NCCL log"),
             _call(2, nccl_algorithm=other, nccl_protocol=want.protocol, choice_source="NCCL log"), _call(3)]
    a = compare_job(Job(calls=calls), load_topology("switch:n=4"))["agreement"]
    assert a["calls"] == 3 and a["algorithm_rate"] == pytest.approx(2 / 3)
    assert a["protocol_rate"] == pytest.approx(2 / 3) and a["rate"] == pytest.approx(1 / 3) and a["caveat"] is None


def test_exposed_time_is_what_compute_does_not_cover():
    # rank 0: step 0..1000 us; all_reduce 100..300 with compute 0..150 and 250..400 -> 100 us exposed
    job = Job(calls=[_call(0, start=100.0, dur=200.0)], spans={0: (0.0, 1000.0)}, compute={0: [(0.0, 150.0), (250.0, 400.0)]})
    (b,) = step_shares(job)["by_collective"]
    assert (b["time_us"], b["share"], b["exposed_us"], b["exposed_share"]) == (200.0, 0.2, 100.0, 0.1)


def test_late_rank_is_named():
    calls = [_call(r, start=1000.0 * k + 600, launch=1000.0 * k + (500 if r == 2 else 3 * r)) for r in range(4) for k in range(5)]
    s = stragglers(Job(calls=calls))
    assert s["named"] == [2]
    assert {t["rank"]: t["late_us_median"] for t in s["ranks"]} == {0: 0.0, 1: 3.0, 2: 500.0, 3: 9.0}


def test_no_straggler_in_jitter():
    calls = [_call(r, start=1000.0 * k + 100, launch=1000.0 * k + 5 * r) for r in range(4) for k in range(5)]
    assert stragglers(Job(calls=calls))["named"] == []


def test_a_group_outside_the_topology_is_moved_with_a_note():
    calls = [Call(source="t", rank=r, op="all_reduce", nbytes=4096, group_size=2, group_ranks=(8, 9), duration_us=5.0)
             for r in (8, 9)]
    doc = compare_job(Job(calls=calls), load_topology("switch:n=4"))
    assert doc["collectives"][0]["predicted_us"] == pytest.approx(simulate("all_reduce", 4096, "switch:n=2").time_us)
    assert any("[8, 9] lies outside" in n for n in doc["notes"])
