"""Reading dumps: the restricted unpickler refuses hostile pickles; gloo's JSON quirks are normalised."""
import json
import pickle

import pytest

from sim.cli import main
from sim.errors import CollsimError
from sim.flight.analyze import analyze
from sim.flight.loader import RefusedDump, load_dir, normalise, rank_of, read_raw


def _gloo_dump(rank, seqs):
    # the shape torch 2.13 writes for gloo: state always "scheduled", pg name empty in pg_config
    return {"version": "2.10", "comm_lib_version": "",
            "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1, 2]"}},
            "pg_status": {"0": {"last_enqueued_collective": max(seqs), "last_started_collective": -1,
                                "last_completed_collective": max(seqs) - 1}},
            "entries": [{"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": s,
                         "p2p_seq_id": 0, "op_id": s, "profiling_name": "gloo:all_reduce", "time_created_ns": 10 + s,
                         "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes": [[1024]],
                         "output_dtypes": ["Float"], "state": "scheduled", "time_discovered_started_ns": None,
                         "time_discovered_completed_ns": None, "retired": s < max(seqs), "is_p2p": False,
                         "timeout_ms": 5000, "thread_id": "1", "thread_name": "python3"}
                        for i, s in enumerate(seqs)]}


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):  # would create a file when unpickled by pickle.load
        return (open, (self.path, "w"))


def test_hostile_pickle_is_refused_without_running_it(tmp_path, capsys):
    target = tmp_path / "pwned"
    d = tmp_path / "dumps"
    d.mkdir()
    for r in (0, 2):
        (d / f"rank_{r}").write_bytes(pickle.dumps(_gloo_dump(r, [1, 2, 3])))
    evil = _gloo_dump(1, [1, 2, 3])
    evil["entries"][0]["frames"] = Evil(str(target))
    (d / "rank_1").write_bytes(pickle.dumps(evil))
    with pytest.raises(RefusedDump, match="builtins.open|io.open"):
        read_raw(str(d / "rank_1"))
    ds = load_dir(str(d))
    assert not target.exists()
    assert sorted(ds.dumps) == [0, 2] and ds.refused_ranks == (1,)
    assert "only plain data is allowed" in ds.refused[str(d / "rank_1")]
    res = analyze(ds)
    # an unreadable dump is a finding (issue 15): the rank is named, and the evidence says it was unreadable
    assert res["culprits"] == [1] and "unreadable" in res["evidence"]["1"]
    assert main(["flight", "analyze", str(d)]) == 0
    assert "refused" in capsys.readouterr().out and not target.exists()


def test_pickle_of_any_class_is_refused(tmp_path):
    import collections
    p = tmp_path / "rank_0"
    p.write_bytes(pickle.dumps({"entries": collections.OrderedDict()}))
    with pytest.raises(RefusedDump, match="collections.OrderedDict"):
        read_raw(str(p))
    p.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(RefusedDump):
        read_raw(str(p))


def test_json_form_quirks_are_normalised(tmp_path):
    raw = _gloo_dump(0, [1, 2])
    raw["pg_status"]["0"] = {k: str(v) for k, v in raw["pg_status"]["0"].items()}  # JSON form: strings
    for e in raw["entries"]:
        e["process_group"] = list(e["process_group"])
        e["time_discovered_started_ns"] = e["time_discovered_completed_ns"] = 0
    (tmp_path / "rank_0.json").write_text(json.dumps(raw))
    d = load_dir(str(tmp_path)).dumps[0]
    assert d["backend"] == "gloo" and d["pg_status"]["0"]["last_completed_collective"] == 1
    assert [(e["seq"], e["op"], e["completed"], e["started_ns"]) for e in d["entries"]] == [
        (1, "all_reduce", True, None), (2, "all_reduce", False, None)]


def test_gloo_skip_shape_names_the_rank_behind(tmp_path):
    for r in range(3):
        (tmp_path / f"rank_{r}").write_bytes(pickle.dumps(_gloo_dump(r, [1, 2, 3] if r < 2 else [1, 2])))
    d = analyze(load_dir(str(tmp_path)))
    assert (d["error_type"], d["culprits"], d["collective_seq_id"]) == ("missing_rank", [2], 3)
    assert d["process_groups"]["0"]["ranks"] == [0, 1, 2]


def test_pg_status_alone_still_counts(tmp_path):
    # dumps taken with includeCollectives=False: no entries, only pg_status
    for r in range(3):
        raw = _gloo_dump(r, [1, 2, 3] if r != 1 else [1, 2])
        raw["entries"] = []
        (tmp_path / f"rank_{r}").write_bytes(pickle.dumps(raw))
    d = analyze(load_dir(str(tmp_path)))
    assert d["culprits"] == [1] and d["collective_seq_id"] == 3


def test_names_and_errors(tmp_path):
    assert [rank_of(n) for n in ("rank_0", "rank_12.json", "nccl_trace_rank_3", "notes")] == [0, 12, 3, None]
    with pytest.raises(CollsimError, match="not a directory"):
        load_dir(str(tmp_path / "missing"))
    (tmp_path / "rank_0").write_text("{not json")
    with pytest.raises(CollsimError, match="no readable flight-recorder dump"):
        load_dir(str(tmp_path))
    assert normalise({"entries": []})["entries"] == []
