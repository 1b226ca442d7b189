"""Review fixes: malformed dumps are refused (not tracebacks), bad `faults:` shapes are named, and a run
where every rank crashes says so instead of "finished"."""
import json

import pytest

from sim.cli import main
from sim.errors import CollsimError
from sim.flight.analyze import analyze
from sim.flight.faults import parse_faults
from sim.flight.loader import load_dir
from sim.flight.scenarios import format_text, run_scenario

GOOD = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
        "pg_status": {"0": {"last_completed_collective": "1"}},
        "entries": [{"process_group": ["0", "default_pg"], "collective_seq_id": 1,
                     "profiling_name": "gloo:all_reduce", "state": "scheduled"}]}
MALFORMED = {  # each crashed normalise() before the fix; now the refusal names the field and its shape
    "entries-int": ('{"entries": 5}', "'entries' is a int, not a list"),
    "pg_status-int": ('{"pg_status": 5}', "pg_status is a int, not a mapping"),
    "pg_config-list": ('{"entries": [], "pg_config": [1]}', "pg_config is a list, not a mapping"),
    "ranks-not-int": ('{"entries": [], "pg_config": {"0": {"ranks": [0, "a"]}}}', "not a list of ranks"),
    "deep-json": ('{"entries":' + "[" * 200000 + "]" * 200000 + "}", "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_dump_is_refused_beside_a_good_one(tmp_path, name):
    text, why = MALFORMED[name]
    (tmp_path / "rank_0.json").write_text(json.dumps(GOOD))
    (tmp_path / "rank_1.json").write_text(text)
    ds = load_dir(str(tmp_path))
    assert sorted(ds.dumps) == [0] and ds.refused_ranks == (1,)
    assert why in ds.refused[str(tmp_path / "rank_1.json")]
    d = analyze(ds)   # the analyzer sees rank 1 as refused, not missing, and does not crash
    assert d["ranks"] == [0] and list(d["refused"]) == [str(tmp_path / "rank_1.json")]


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_cli_when_every_dump_is_malformed_prints_one_error_line(tmp_path, capsys, name):
    (tmp_path / "rank_0.json").write_text(MALFORMED[name][0])
    assert main(["flight", "analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("collsim: error: no readable flight-recorder dump")
    assert MALFORMED[name][1] in err[0]


@pytest.mark.parametrize("raw, word", [(5, "not int 5"), ("skip", "not str"), ({"kind": "skip"}, "not dict"),
                                       ([5], "item 5 is a int"), ([["skip", 2]], "is a list")])
def test_faults_of_the_wrong_shape_are_named(raw, word):
    with pytest.raises(CollsimError, match="faults must be a list of mappings like {kind: skip") as e:
        parse_faults(raw, 4)
    assert word in str(e.value)


def test_faults_none_and_empty_still_mean_no_faults():
    assert parse_faults(None, 4) == [] and parse_faults([], 4) == []


def test_every_rank_crashing_is_not_reported_as_finished():
    sc = {"name": "all-crash", "workload": {"builtin": "ddp_step", "world_size": 4, "buckets": 3,
                                             "bucket_nbytes": "4M", "steps": 2},
          "faults": [{"kind": "crash", "rank": r, "at_us": 1} for r in range(4)]}
    out = run_scenario(sc)
    assert out["outcome"] == "crashed: all ranks"
    assert out["collectives"] == [] and sorted(out["crashed"]) == [0, 1, 2, 3]
    d = out["diagnosis"]
    assert d["error_type"] == "all_ranks_crashed" and d["culprits"] == [0, 1, 2, 3]
    assert "rank 3 at 0.001 ms" in d["details"]
    text = format_text(out)
    assert "outcome: crashed: all ranks (0, 1, 2, 3) by 0.001 ms" in text and "finished in" not in text
    assert "diagnosis: all_ranks_crashed; culprit rank(s) [0, 1, 2, 3]" in text


def test_one_rank_crashing_still_hangs_the_others():
    sc = {"name": "one-crash", "workload": {"builtin": "ddp_step", "world_size": 4},
          "faults": [{"kind": "crash", "rank": 1, "at_us": 1}]}
    out = run_scenario(sc)
    assert out["outcome"] == "hang" and out["diagnosis"]["culprits"] == [1]
