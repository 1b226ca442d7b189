"""p29 F13, F12, F18: flight-recorder dumps with wrong types or impossible values are refused or noted (never
read as an empty rank or a quiet "none"); the dumps' text is printed escaped; `flight simulate --dump` does not
write into a folder of dumps it did not simulate."""
import json
import os

import pytest

from sim.cli import main
from sim.flight.analyze import analyze
from sim.flight.loader import load_dir

RANKS = [0, 1, 2]


def _entry(seq, **over):
    e = {"record_id": 100 + seq, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
         "profiling_name": "nccl:all_reduce", "input_sizes": [[1024]], "output_sizes": [[1024]],
         "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "completed" if seq < 3 else "scheduled",
         "retired": False, "is_p2p": False, "timeout_ms": 600000, "time_created_ns": 10**12 + seq * 10**6,
         "time_discovered_started_ns": None, "time_discovered_completed_ns": None}
    e.update(over)
    return e


def _dump(rank, entries=None, **over):
    d = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": json.dumps(RANKS)}},
         "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3,
                             "last_completed_collective": 2}},
         "entries": [_entry(s) for s in (1, 2, 3)] if entries is None else entries}
    d.update(over)
    return d


def _write(folder, dumps):
    folder.mkdir(exist_ok=True)
    for r, d in dumps.items():
        (folder / f"rank_{r}.json").write_text(json.dumps(d))
    return folder


# ---- F13: wrong types and impossible values ---------------------------------------------------------------
def test_entries_that_are_not_a_list_are_refused_not_read_as_an_empty_rank(tmp_path):
    # the trial's flight/types: rank 0's `entries` is the string "nope"; read as no calls, rank 0 was named the
    # culprit of the others' hangs
    d = _write(tmp_path / "d", {0: _dump(0, entries="nope"), 1: _dump(1), 2: _dump(2)})
    ds = load_dir(str(d))
    assert sorted(ds.dumps) == [1, 2] and ds.refused_ranks == (0,)
    assert "'entries' is a str, not a list" in ds.refused[str(d / "rank_0.json")]
    diagnosis = analyze(ds)
    assert diagnosis["ranks"] == [1, 2] and diagnosis["missing_dumps"] == [0]
    # said to be refused (its file is there), not to have "never reached" a call
    assert "is there but was refused" in diagnosis["details"] and "never reached" not in diagnosis["details"]


@pytest.mark.parametrize("field, value, words", [
    ("collective_seq_id", -5, "collective_seq_id is -5"),
    ("collective_seq_id", float("nan"), "collective_seq_id is nan"),
    ("collective_seq_id", 2.5, "collective_seq_id is 2.5"),
    ("input_sizes", [[10**30]], "input_sizes dimension is 1000000000"),
    ("input_sizes", "big", "input_sizes is 'big'"),
])
def test_impossible_sequence_ids_and_sizes_refuse_the_dump(tmp_path, field, value, words):
    bad = [_entry(1), _entry(2, **{field: value}), _entry(3)]
    d = tmp_path / "d"
    d.mkdir()
    for r in RANKS:   # pickled as PyTorch writes them: JSON cannot hold NaN the way a pickle does
        import pickle
        (d / f"rank_{r}").write_bytes(pickle.dumps(_dump(r, entries=bad if r == 0 else None), protocol=2))
    ds = load_dir(str(d))
    assert ds.refused_ranks == (0,), ds.refused
    assert "entry #1 (record 102)" in ds.refused[str(d / "rank_0")] and words in ds.refused[str(d / "rank_0")]


def test_a_status_counter_that_is_not_a_number_refuses_the_dump(tmp_path):
    status = {"0": {"last_enqueued_collective": float("nan"), "last_completed_collective": 2}}
    d = tmp_path / "d"
    d.mkdir()
    import pickle
    for r in RANKS:
        (d / f"rank_{r}").write_bytes(pickle.dumps(_dump(r, **({"pg_status": status} if r == 1 else {}))))
    ds = load_dir(str(d))
    assert ds.refused_ranks == (1,) and "last_enqueued_collective is nan" in ds.refused[str(d / "rank_1")]


def test_member_lists_that_do_not_parse_refuse_the_dump(tmp_path):
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1"}}   # cut short: was read as no members
    d = _write(tmp_path / "d", {0: _dump(0, pg_config=cfg), 1: _dump(1), 2: _dump(2)})
    ds = load_dir(str(d))
    assert ds.refused_ranks == (0,) and "not a list of ranks" in ds.refused[str(d / "rank_0.json")]


def test_damaged_clocks_and_timeouts_are_noted_and_not_used(tmp_path, capsys):
    import pickle
    bad = [_entry(1), _entry(2, time_created_ns=float("nan"), timeout_ms=-1), _entry(3)]
    d = tmp_path / "d"
    d.mkdir()
    for r in RANKS:
        (d / f"rank_{r}").write_bytes(pickle.dumps(_dump(r, entries=bad if r == 2 else None)))
    ds = load_dir(str(d))
    assert sorted(ds.dumps) == RANKS and not ds.refused   # one bad clock does not hide the rest of the dump
    (note,) = ds.damaged.values()
    assert note.startswith("1 entry holds values no recorder writes (first: record 102:")
    assert "time_created_ns nan" in note and "timeout_ms -1" in note
    e = ds.dumps[2]["entries"][1]
    assert e["created_ns"] is None and e["damaged"] == {"time_created_ns": "nan", "timeout_ms": "-1"}
    assert main(["flight", "analyze", str(d)]) == 0
    out = capsys.readouterr().out
    assert f"  note {d / 'rank_2'}: 1 entry holds values no recorder writes" in out
    assert main(["flight", "analyze", str(d), "--format", "json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["damaged"]) == [str(d / "rank_2")]


# ---- F12: the dumps' text is printed escaped --------------------------------------------------------------
def test_escape_sequences_and_line_breaks_in_dumps_do_not_reach_the_terminal(tmp_path, capsys):
    # the trial's flight/escapes: rank 0's call at the open sequence id has a forged profiling name, so the
    # report quotes it (a collective type mismatch naming rank 0)
    evil_name = "nccl:\x1b[2J\x1b[31mall_reduce\u202e\n#forged line"
    entries = [_entry(1), _entry(2), _entry(3, profiling_name=evil_name)]
    d = _write(tmp_path / "d", {0: _dump(0, entries=entries), 1: _dump(1), 2: _dump(2)})
    assert main(["flight", "analyze", str(d)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert not any(line.startswith("#forged") for line in out.splitlines())
    assert "\\x1b[2J\\x1b[31mall_reduce\\u202e\\n#forged line" in out   # shown, escaped, on its own report line


# ---- F18: --dump into a folder of someone else's dumps ----------------------------------------------------
def test_simulate_refuses_a_folder_holding_a_real_jobs_dumps(tmp_path, capsys):
    d = tmp_path / "incident"
    d.mkdir()
    (d / "_dump_0").write_bytes(b"a real dump")
    (d / "rank_0.json").write_text('{"mine": 1}')   # a user's file with the name the simulator writes
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    assert main(["flight", "simulate", "ddp-skip", "--dump", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not simulate (_dump_0, rank_0.json)" in err[0] and "new or empty folder" in err[0]
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before   # nothing written, nothing replaced


def test_simulate_may_rewrite_its_own_earlier_dumps(tmp_path, capsys):
    d = tmp_path / "sim"
    assert main(["flight", "simulate", "ddp-skip", "--dump", str(d)]) == 0
    (d / "notes.txt").write_text("not a dump")   # other files do not matter
    assert main(["flight", "simulate", "ddp-size", "--dump", str(d)]) == 0
    capsys.readouterr()
    assert sorted(os.listdir(d)) == ["notes.txt"] + [f"rank_{r}.json" for r in range(4)]
    assert analyze(load_dir(str(d)))["error_type"] == "size_mismatch"   # the second run's dumps, read as one job
