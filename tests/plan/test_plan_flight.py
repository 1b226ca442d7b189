"""The same planned step feeds the flight recorder: a rank that skips a bucket hangs the job."""
import pytest

from sim.planning import plan_step
from sim.planning.flight_export import flight_scenario, flight_workload_spec, rank_sequences

WL = {"model": {"params": "100M", "layers": 4, "dtype": "bfloat16"},
      "parallelism": {"strategy": "ddp", "bucket_mb": 25}, "compute": {"layer_forward_ms": 2}}


def test_every_rank_calls_the_same_sequence_on_its_own_groups():
    w = {"model": {"params": "1B", "layers": 4, "hidden": 1024},
         "parallelism": {"strategy": "ddp", "tp": 4}, "compute": {"layer_forward_ms": 1, "tokens_per_step": 8192}}
    p = plan_step(w, "dgx-h100")
    seqs = rank_sequences(p)
    assert len(seqs) == 8
    assert all([(c["op"], c["nbytes"]) for c in s] == [(c["op"], c["nbytes"]) for c in seqs[0]] for s in seqs.values())
    assert {c["ranks"] for c in seqs[5] if c["group"] == "tp"} == {(4, 5, 6, 7)}
    assert {c["ranks"] for c in seqs[5] if c["group"] == "dp"} == {(1, 5)}


def test_flight_workload_keeps_calls_and_groups():
    flight = pytest.importorskip("sim.flight.rank_workload")
    p = plan_step(WL, "dgx-h100")
    w = flight.from_dict(flight_workload_spec(p))
    assert w.world_size == 8
    assert [(c.op, c.nbytes) for c in w.calls(3)] == [(t.op, t.nbytes) for t in p.collectives]


def test_a_rank_skipping_a_bucket_hangs_and_is_named():
    scenarios = pytest.importorskip("sim.flight.scenarios")
    p = plan_step(WL, "dgx-h100")
    assert scenarios.run_scenario(flight_scenario(p))["outcome"] == "finished"
    out = scenarios.run_scenario(flight_scenario(p, faults=[{"kind": "skip", "rank": 2, "call": 1}]))
    assert out["outcome"] == "hang"
    assert out["diagnosis"]["culprits"] == [2]


def test_fsdp_prefetch_becomes_a_non_blocking_call_before_the_compute():
    p = plan_step({"model": {"params": "100M", "layers": 3}, "parallelism": {"strategy": "fsdp"},
                   "compute": {"layer_forward_ms": 2}}, "dgx-h100")
    prog = flight_workload_spec(p)["program"]
    first = [i for i, x in enumerate(prog) if isinstance(x, dict) and "compute_us" in x][0]
    # gather of layer 0 (waited on), then the prefetch of layer 1 (not waited on), then layer 0 computes
    assert [x.get("wait") for x in prog[:first]] == [True, False]
    assert prog[-1] == "wait"
