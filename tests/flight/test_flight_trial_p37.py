"""Trial p37: ``flight analyze`` bounded by entries (not only bytes), a refused dump's rank unknown rather than a
culprit, malformed sequence ids and group fields refused, the 2-rank tie named as one, messages that say what a
file is, and the ``flight`` help and ``simulate --dump`` over an earlier simulation's folder.

Expected values come from the inputs (how many entries were written, which rank was damaged and how) or from
docs/flight.md's rules, never from collsim's output.
"""
import gzip
import json
import os
import pickle
import time

import pytest

from sim.errors import CollsimError
from sim.flight import loader
from sim.flight.analyze import analyze
from sim.flight.scenarios import load_scenario, run_scenario

TWO = ("workload: {builtin: ddp_step, world_size: 2, buckets: 2, bucket_nbytes: 4M, steps: 1}\n"
       "faults: [{kind: skip, rank: 1, call: 1}]\n")   # the tester's two.yaml


def _sim(tmp_path, scenario: str, name: str = "d"):
    """The scenario's simulated dumps written to tmp_path/name (rank_N.json)."""
    d = tmp_path / name
    run_scenario(load_scenario(scenario), dump_dir=str(d))
    return d


def _edit(path, change) -> None:
    dump = json.loads(path.read_text())
    change(dump)
    path.write_text(json.dumps(dump))


def _entry(seq: int, op: str = "all_reduce", pg: str = "0", state: str = "completed") -> dict:
    return {"record_id": seq, "pg_id": int(pg), "process_group": [pg, "default_pg"], "collective_seq_id": seq,
            "p2p_seq_id": 0, "is_p2p": False, "profiling_name": f"nccl:{op}", "input_sizes": [[4]],
            "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": state,
            "retired": True}


def _dump(world: int, entries: list, last: int) -> dict:
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
            "pg_status": {"0": {"last_enqueued_collective": last, "last_started_collective": -1,
                                "last_completed_collective": -1}}, "entries": entries}


# ---- 1. a bound on the entries read, per dump and per folder -------------------------------------------------
def test_a_dump_of_one_entry_repeated_past_the_limit_is_refused_quickly(tmp_path):
    # the tester's memo pickle: one entry referenced over and over, a few KB gzip'd
    n = loader.MAX_DUMP_ENTRIES + 1
    dump = _dump(2, [_entry(1)] * n, 1)
    for r in range(2):
        with gzip.open(tmp_path / f"rank_{r}.gz", "wb") as f:
            f.write(pickle.dumps(dump, 2))
    assert (tmp_path / "rank_0.gz").stat().st_size < 10_000
    t0 = time.monotonic()
    with pytest.raises(CollsimError) as e:
        loader.load_dir(str(tmp_path))
    assert time.monotonic() - t0 < 15   # before: every entry normalised (12 such files: 47 s, 1.8 GB)
    assert f"{n:,} entries" in str(e.value) and "--last" in str(e.value)


def test_a_folder_past_the_total_is_refused_in_one_line_and_last_n_reads_it(tmp_path, cli, monkeypatch):
    monkeypatch.setattr(loader, "MAX_DIR_ENTRIES", 10)   # the rule, at a size a test can afford
    for r in range(3):   # 3 dumps of 6 entries: 18 > 10
        (tmp_path / f"rank_{r}.json").write_text(json.dumps(_dump(3, [_entry(s) for s in range(1, 7)], 6)))
    code, out, err = cli("flight", "analyze", tmp_path)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "over 10 entries" in err and "--last 3" in err          # 10 entries shared by 3 files: 3 each
    ds = loader.load_dir(str(tmp_path), last=3)                      # 9 entries: within the limit
    assert [e["seq"] for e in ds.dumps[0]["entries"]] == [4, 5, 6]   # the newest, as a ring buffer of 3 keeps
    assert ds.dumps[0]["pg_status"]["0"]["last_enqueued_collective"] == 6   # the counters are read whole
    code, out, _ = cli("flight", "analyze", tmp_path, "--last", "3")
    assert code == 0 and "the last 3 entries of each" in out


def test_last_must_be_a_positive_count(tmp_path, cli):
    code, out, err = cli("flight", "analyze", tmp_path, "--last", "0")
    assert code == 2 and out == "" and "--last" in err and len(err.strip().splitlines()) == 1


# ---- 2. a refused dump's rank is unknown ---------------------------------------------------------------------
def test_a_refused_dump_in_a_healthy_job_is_unknown_not_a_culprit(tmp_path):
    d = _sim(tmp_path, "healthy")
    os.truncate(d / "rank_1.json", 2000)   # the file is there, cut short
    got = analyze(loader.load_dir(str(d)))
    # every other rank's calls completed, which needs rank 1 in each: nothing points at it (docs/flight.md)
    assert got["culprits"] == [] and got["error_type"] == "none" and got["missing_dumps"] == [1]
    assert "refused" in got["details"] and "unknown" in got["details"]


def test_a_refused_dump_where_the_others_wait_is_named_by_elimination_saying_the_file_is_there(tmp_path):
    d = _sim(tmp_path, "ddp-skip")   # rank 2 skips a call: the others wait at seq 6
    (d / "rank_2.json").write_bytes(b"\x17" + bytes(range(200)))   # random-looking bytes, not a dump
    got = analyze(loader.load_dir(str(d)))
    assert got["culprits"] == [2]   # the only member not seen waiting (as with a missing file)
    assert "is there but was refused" in got["details"] and "not a flight-recorder dump" in got["details"]
    assert "crashed or killed" not in got["details"]   # that explains a missing file, not this one


def test_a_refused_dump_beside_calls_only_retired_is_named(tmp_path):
    # gloo retires a call that failed too (docs/flight.md): completion is not shown, so rank 2 may be why
    for r in (0, 1):
        entries = [_entry(s, state="scheduled") for s in (1, 2)]
        (tmp_path / f"rank_{r}").write_bytes(pickle.dumps(_dump(3, entries, 2)))
    (tmp_path / "rank_2").write_bytes(pickle.dumps(_dump(3, [_entry(1)], 1))[:40])   # truncated
    got = analyze(loader.load_dir(str(tmp_path)))
    assert got["culprits"] == [2] and "truncated" in got["details"]


# ---- 3. malformed fields are refused, naming the field -------------------------------------------------------
def _shift(d):
    for e in d["entries"]:
        e["collective_seq_id"] += 10 ** 15


def _all_seq_one(d):
    for e in d["entries"]:
        e["collective_seq_id"] = 1


def _bad_group(d):
    for e in d["entries"]:
        e["process_group"] = [[1], "x"]


MALFORMED = {
    "seq-shifted": (_shift, "past this rank's own pg_status last_enqueued_collective"),
    "seq-repeated": (_all_seq_one, "share collective_seq_id 1"),
    "process-group": (_bad_group, "process_group is [[1], 'x']"),
    "pg-config": (lambda d: d.update(pg_config={"0": [1, 2]}), "pg_config '0' is [1, 2]"),
    "pg-status": (lambda d: d.update(pg_status={"0": "x"}), "pg_status '0' is 'x'"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_fields_refuse_the_dump_and_the_culprit_is_still_found(tmp_path, name):
    change, words = MALFORMED[name]
    d = _sim(tmp_path, "ddp-skip")   # rank 2 skips; rank 1 is edited
    _edit(d / "rank_1.json", change)
    ds = loader.load_dir(str(d))
    assert ds.refused_ranks == (1,) and words in ds.refused[str(d / "rank_1.json")]
    got = analyze(ds)
    assert got["culprits"] == [2] and got["missing_dumps"] == [1]


def test_a_coalesced_batch_shares_its_id_as_pytorch_writes_it(tmp_path):
    # PyTorch's fr_trace reads a run of one id ending in the coalesced entry as one call
    batch = [_entry(1), _entry(2), _entry(2, "all_gather"), _entry(2, "coalesced"), _entry(3)]
    for r in range(2):
        (tmp_path / f"rank_{r}.json").write_text(json.dumps(_dump(2, batch, 3)))
    ds = loader.load_dir(str(tmp_path))
    assert sorted(ds.dumps) == [0, 1] and not ds.refused


def test_an_id_that_goes_back_is_refused(tmp_path):
    entries = [_entry(1), _entry(2), _entry(1)]
    (tmp_path / "rank_0.json").write_text(json.dumps(_dump(2, entries, 2)))
    (tmp_path / "rank_1.json").write_text(json.dumps(_dump(2, entries[:2], 2)))
    ds = loader.load_dir(str(tmp_path))
    assert ds.refused_ranks == (0,) and "comes after 2" in ds.refused[str(tmp_path / "rank_0.json")]


# ---- 4. the tie: both sides named, as the details say --------------------------------------------------------
def test_a_two_rank_skip_is_a_tie_naming_both(tmp_path, cli):
    (tmp_path / "two.yaml").write_text(TWO)
    got = run_scenario(load_scenario(str(tmp_path / "two.yaml")))["diagnosis"]
    # rank 1 is a call behind rank 0: a skip by 1 or an extra call by 0, and 2 ranks cannot say which
    assert got["error_type"] == "missing_rank" and got["culprits"] == [0, 1] and "a tie" in got["details"]


def test_a_status_only_tie_names_both():
    # no entries (includeCollectives=False): rank 0 last enqueued 6, rank 1 5
    dumps = {r: loader.normalise(_dump(2, [], 6 - r)) for r in range(2)}
    got = analyze(dumps)
    assert got["culprits"] == [0, 1] and "a tie" in got["details"]


# ---- 5. messages that say what the file is -------------------------------------------------------------------
def test_files_that_are_not_dumps_are_named_for_what_they_are(tmp_path):
    (tmp_path / "rank_0.json").write_text(json.dumps(_dump(8, [_entry(1)], 1)))
    (tmp_path / "rank_1.json").write_text("[1, 2]")
    (tmp_path / "rank_2").write_bytes(b"")
    (tmp_path / "rank_3").write_text("host:1:1 [0] NCCL INFO Bootstrap : Using eth0\n")
    (tmp_path / "rank_4").write_bytes(b"\x17\x00\xff" * 100)
    os.symlink("/dev/zero", tmp_path / "rank_6")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "rank_5.json")
    ds = loader.load_dir(str(tmp_path))   # returns: the FIFO and /dev/zero are not opened
    why = {os.path.basename(p): text for p, text in ds.refused.items()}
    assert "JSON or text starting with '['" in why["rank_1.json"]
    assert "it is empty" in why["rank_2"]
    assert "it is text" in why["rank_3"] and "NCCL INFO" in why["rank_3"]
    assert "binary data" in why["rank_4"] and "buffers" not in why["rank_4"]
    assert "symbolic link to a character device" in why["rank_6"]
    if hasattr(os, "mkfifo"):
        assert "FIFO" in why["rank_5.json"]
    assert "invalid load key" not in " ".join(why.values())
    assert set(ds.refused_ranks) >= {1, 2, 3, 4, 6} and "rank_6" not in ds.skipped


def test_last_enqueued_said_once_when_every_absent_rank_has_none():
    # 5 ranks: 0-2 wait at seq 1, 3 and 4 recorded nothing in the group
    dumps = {r: loader.normalise(_dump(5, [_entry(1, state="scheduled")] if r < 3 else [], 1 if r < 3 else -1))
             for r in range(5)}
    got = analyze(dumps)
    assert got["culprits"] == [3, 4]
    assert "(last enqueued: none recorded for each)" in got["details"] and "none recorded, none" not in got["details"]


# ---- 6. help, and --dump over an earlier simulation's folder -------------------------------------------------
def test_help_texts(capsys):
    from sim.cli import main
    texts = {}
    for sub in ("", "analyze", "simulate", "demo"):
        with pytest.raises(SystemExit):
            main(["flight"] + ([sub] if sub else []) + ["--help"])
        texts[sub] = " ".join(capsys.readouterr().out.split())
    assert "``" not in texts[""]
    assert all(name in texts["analyze"] for name in ("_dump_0", ".pkl", ".gz", "rank_0"))
    for sub in ("analyze", "simulate", "demo"):
        assert "--format {text,json} text (default)" in texts[sub]


def test_a_smaller_rerun_names_the_larger_runs_dumps_it_leaves(tmp_path):
    d = tmp_path / "d"
    run_scenario(load_scenario("tpdp-degraded-link"), dump_dir=str(d))   # 8 ranks
    out = run_scenario(load_scenario("ddp-skip"), dump_dir=str(d))        # 4 ranks
    assert out["dumps_left"] == [f"rank_{r}.json" for r in range(4, 8)]
    assert sorted(p.name for p in d.iterdir()) == [f"rank_{r}.json" for r in range(8)]   # nothing deleted


def test_a_crashed_ranks_old_dump_is_refused_before_writing(tmp_path):
    d = _sim(tmp_path, "healthy")   # 4 ranks, every one dumps
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    with pytest.raises(CollsimError, match="rank_1.json"):   # ddp-crash: rank 1 dies and writes none
        run_scenario(load_scenario("ddp-crash"), dump_dir=str(d))
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before

