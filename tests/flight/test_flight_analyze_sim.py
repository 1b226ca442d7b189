"""The analyzer on simulated dumps: for each fault class, the right culprit(s) and class."""
import json

import pytest

from sim.cli import main
from sim.flight.analyze import analyze
from sim.flight.loader import load_dir, normalise
from sim.flight.scenarios import load_scenario, run_scenario

CASES = [  # scenario, error_type, culprits, process group, collective_seq_id
    ("healthy", "none", [], None, None),
    ("ddp-skip", "missing_rank", [2], "0", 6),  # identical buckets: rank 2 never reaches the last seq id
    ("ddp-wrong-collective", "collective_type_mismatch", [1], "0", 3),
    ("ddp-size", "size_mismatch", [3], "0", 5),
    ("ddp-dtype", "dtype_mismatch", [0], "0", 2),
    ("ddp-straggler", "straggler", [2], "0", 4),
    ("ddp-crash", "missing_rank", [1], "0", 4),
    ("fsdp-skip", "collective_type_mismatch", [3], "0", 4),
    ("tpdp-degraded-link", "slow_link", [2, 3], "2", None),
    ("tpdp-link-down", "stuck_collective", [2, 3], "2", 2),
    ("tpdp-link-down-rerouted", "slow_link", [2, 3], "2", None),
    ("tpdp-link-down-ring-topology", "slow_link", [2, 3], "2", None),
    ("tpdp-nic-down-switch-topology", "stuck_collective", [2, 3], "2", 2),
]


@pytest.mark.parametrize("name,kind,culprits,pg,seq", CASES, ids=[c[0] for c in CASES])
def test_each_fault_class_is_named(name, kind, culprits, pg, seq):
    d = run_scenario(load_scenario(name))["diagnosis"]
    assert (d["error_type"], d["culprits"], d["process_group"]) == (kind, culprits, pg)
    if seq is not None:
        assert d["collective_seq_id"] == seq


def test_link_down_in_tp_group_explains_the_dp_groups_waiting():
    d = run_scenario(load_scenario("tpdp-link-down"))["diagnosis"]
    # ranks 2 and 3 are absent from their DP groups only because they are stuck in their TP group
    assert {tuple(f["culprits"]) for f in d["secondary"]} == {(2,), (3,)}
    assert all("blocked in group 2" in f["details"] for f in d["secondary"])


def test_skip_with_unequal_buckets_is_seen_as_a_shift():
    sc = {"workload": {"world_size": 4, "steps": 2, "program": [
        {"compute_us": 1000}, {"all_reduce": "1M"}, {"compute_us": 1000}, {"all_reduce": "2M"},
        {"compute_us": 1000}, {"all_reduce": "3M"}, {"compute_us": 1000}, {"all_reduce": "4M"}, "wait"]},
          "faults": [{"kind": "skip", "rank": 1, "call": 1}]}
    d = run_scenario(sc)["diagnosis"]
    assert (d["error_type"], d["culprits"], d["collective_seq_id"]) == ("missing_rank", [1], 2)
    assert "skipped 1 collective" in d["details"]


def test_extra_call_by_one_rank_out_of_four():
    sc = {"workload": {"world_size": 4, "program": [{"all_reduce": "1M"}, "wait"],
                       "rank_programs": {0: [{"all_reduce": "1M"}, {"all_reduce": "1M"}, "wait"]}}}
    d = run_scenario(sc)["diagnosis"]
    assert (d["error_type"], d["culprits"], d["collective_seq_id"]) == ("extra_collective", [0], 2)


def test_json_dumps_round_trip_and_cli_json(tmp_path, capsys):
    out = run_scenario(load_scenario("ddp-size"), dump_dir=str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"rank_{r}.json" for r in range(4)]
    from_files = analyze(load_dir(str(tmp_path)))
    assert from_files == out["diagnosis"]
    assert main(["flight", "analyze", str(tmp_path), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["culprits"] == [3] and d["collective_seq_id"] == 5 and d["error_type"] == "size_mismatch" and d["details"]


def test_tie_in_a_two_rank_group_names_both_and_says_so():
    sc = {"workload": {"world_size": 2, "program": [{"all_reduce": "1M"}, "wait"]},
          "faults": [{"kind": "wrong_collective", "rank": 1, "call": 0, "collective": "broadcast"}]}
    d = run_scenario(sc)["diagnosis"]
    assert d["culprits"] == [0, 1] and "tie" in d["details"]


def test_straggler_threshold_is_a_parameter():
    dumps = {k: normalise(v) for k, v in _dumps("ddp-straggler").items()}
    assert analyze(dumps, straggler_ms=60)["error_type"] == "none"  # the delay is 50 ms
    assert analyze(dumps, straggler_ms=10)["culprits"] == [2]


def _dumps(name):
    from sim.flight.faults import apply_rank_faults, parse_faults
    from sim.flight.rank_workload import from_dict
    from sim.flight.replay import run
    sc = load_scenario(name)
    w = from_dict(sc["workload"])
    return run(apply_rank_faults(w, parse_faults(sc["faults"]))).dumps()
