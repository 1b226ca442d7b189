"""Trial p32 (helperA's report): ``flight demo --dump`` over a real job's dumps, ``--nprocs`` without bound,
``flight simulate`` quadratic in world size, ``flight analyze`` skipping files silently, reading the rank from
any trailing number, and printing one line per missing rank.

Expected values come from the inputs (file names, the published dumps' own reference output) or from hand
reasoning written next to them, never from collsim's output.
"""
import gzip
import json
import os
import shutil
import zlib
from pathlib import Path

import pytest

import sim.flight.replay as replay
from sim.errors import CollsimError
from sim.flight import loader
from sim.flight.analyze import analyze, rank_text, ranks_short
from sim.flight.faults import apply_rank_faults, parse_faults
from sim.flight.rank_workload import ddp_step, from_dict
from sim.flight.records import write_dumps
from sim.flight.scenarios import load_scenario, run_scenario

_TRACES = Path(os.environ.get("COLLSIM_TRACES") or Path(__file__).resolve().parents[2].parent / "shared" / "traces")
GPU_ERROR = _TRACES / "flight_recorder" / "nvrx_megatron_moe_16rank_gpu_error_1st"


def _published() -> Path:
    if not GPU_ERROR.exists():
        pytest.skip(f"published flight-recorder dumps not found at {GPU_ERROR} (set COLLSIM_TRACES)")
    return GPU_ERROR


def _reference_culprits(folder: Path) -> list[int]:
    """Missing ranks from the fixture's own reference table (last column of its last row)."""
    row = (folder / "gpu_error_1st_reference.txt").read_text().strip().splitlines()[-1].split("|")
    return sorted(int(r) for r in row[-1].split(","))


def _simulated_dumps(world: int = 4, skip_rank: int = 2) -> dict:
    """Dumps of a ddp_step job in which ``skip_rank`` skips its 2nd all_reduce (so it is the culprit)."""
    w = ddp_step(world_size=world, buckets=2, bucket_nbytes="1M", steps=1)
    r = replay.run(apply_rank_faults(w, parse_faults([{"kind": "skip", "rank": skip_rank, "call": 1}], world)))
    return r.dumps()


def _snapshot(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


# ---- 1. flight demo --dump over someone else's dumps -------------------------------------------------------
@pytest.fixture
def demo_spy(monkeypatch):
    """Replace the gloo job by a stand-in that records its calls and writes the dumps of a simulated job
    (rank 2 skips), so the CLI's checks and its analysis of the folder run without starting torch."""
    fd = pytest.importorskip("real.measure.flight_demo")
    calls = []

    def fake_run_demo(directory, nprocs=3, fault="skip", timeout_s=5.0, form="pickle"):
        calls.append((directory, nprocs))
        write_dumps(directory, _simulated_dumps(world=4))
        return {"injected": "rank 2 skips the 2nd all_reduce", "faulty_rank": 2, "exitcodes": [0] * 4,
                "files": sorted(os.listdir(directory))}
    monkeypatch.setattr(fd, "run_demo", fake_run_demo)
    return fd, calls


def test_demo_refuses_a_folder_of_real_dumps_before_running_anything(tmp_path, cli, demo_spy):
    _, calls = demo_spy
    src = _published()
    d = tmp_path / "incident"
    d.mkdir()
    for r in range(4):   # the tester's case: a real job's dumps copied as rank_0..rank_3
        shutil.copy(src / f"_dump_{r}", d / f"rank_{r}")
    before = _snapshot(d)
    code, out, err = cli("flight", "demo", "--dump", d)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "holds flight-recorder dumps (rank_0, rank_1, rank_2, rank_3)" in lines[0]
    assert "give a new or empty folder" in lines[0]
    assert calls == [] and _snapshot(d) == before   # nothing ran, nothing replaced, nothing added


def test_demo_refuses_a_simulated_folder_that_simulate_may_reuse(tmp_path, cli, demo_spy):
    _, calls = demo_spy
    d = tmp_path / "sim"
    assert cli("flight", "simulate", "ddp-skip", "--dump", d)[0] == 0
    assert cli("flight", "simulate", "ddp-skip", "--dump", d)[0] == 0   # simulate rewrites its own rank_N.json
    # the demo writes rank_N pickles: beside rank_N.json they would be two dumps per rank
    code, _, err = cli("flight", "demo", "--dump", d)
    assert code == 2 and "rank_0.json" in err and calls == []


def test_run_demo_itself_refuses_before_starting_a_process(tmp_path, monkeypatch):
    fd = pytest.importorskip("real.measure.flight_demo")
    monkeypatch.setattr(fd.multiprocessing, "get_context", lambda *a: pytest.fail("a process was started"))
    (tmp_path / "_dump_0").write_bytes(b"a real dump")
    with pytest.raises(CollsimError, match=r"holds flight-recorder dumps \(_dump_0\)"):
        fd.run_demo(str(tmp_path), nprocs=3)
    assert (tmp_path / "_dump_0").read_bytes() == b"a real dump"


def test_demo_into_a_folder_of_other_files_keeps_them_and_lists_them(tmp_path, cli, demo_spy):
    _, calls = demo_spy
    d = tmp_path / "out"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    code, out, _ = cli("flight", "demo", "--dump", d)
    assert code == 0 and calls == [(str(d), 3)]
    assert (d / "notes.txt").read_text() == "mine"
    assert "skipped 1 file(s)" in out and "notes.txt" in out
    assert "culprit rank(s): [2]" in out   # the stand-in's rank 2 skipped a call


# ---- 13. --nprocs bound -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cpus,limit", [(1, 4), (2, 8), (16, 64), (100, 64)])   # 4 per core, at most 64
def test_nprocs_limit_follows_the_cores(monkeypatch, cpus, limit):
    fd = pytest.importorskip("real.measure.flight_demo")
    monkeypatch.setattr(fd, "usable_cpus", lambda: cpus)
    assert fd.nprocs_limit() == limit
    fd.check_nprocs(limit)
    with pytest.raises(CollsimError, match=rf"--nprocs {limit + 1}: over this machine's limit of {limit} ranks.*"
                                           rf"use --nprocs {limit} or fewer"):
        fd.check_nprocs(limit + 1)


def test_demo_nprocs_500_is_one_line_and_starts_nothing(cli, demo_spy, monkeypatch, tmp_path):
    fd, calls = demo_spy
    monkeypatch.setattr(fd, "usable_cpus", lambda: 2)
    code, out, err = cli("flight", "demo", "--nprocs", 500)
    assert code == 2 and calls == [] and len(err.strip().splitlines()) == 1
    assert "limit of 8 ranks" in err and "--nprocs 8 or fewer" in err
    assert cli("flight", "demo", "--nprocs", 8, "--dump", tmp_path / "d")[0] == 0 and calls[-1][1] == 8


# ---- 4. flight simulate: linear per step, results unchanged, the limit up front --------------------------------
class _CheckedModel(replay._Model):
    """The model with its O(1) counters checked against the full scans they replace, after every step (the run
    loop asks ``all_live_finished`` after each one)."""
    asked = 0

    def all_live_finished(self):
        full_finished = all(r in self.finished for r in range(self.w.world_size) if r not in self.crashed)
        full_pending = any(e["state"] != "completed" for r, es in self.entries.items() if r not in self.crashed
                           for e in es)
        assert (super().all_live_finished(), self.pending()) == (full_finished, full_pending)
        _CheckedModel.asked += 1
        return full_finished


@pytest.mark.parametrize("faults", [
    [],
    [{"kind": "skip", "rank": 2, "call": 1}],
    [{"kind": "crash", "rank": 1, "at_us": 2_000}, {"kind": "crash", "rank": 5, "at_us": 900_000}],
    [{"kind": "crash", "rank": 3, "at_us": 10_000_000}],            # after rank 3 finished its program
    [{"kind": "crash", "rank": r, "at_us": 1_000 * (r + 1)} for r in range(8)],   # every rank
    [{"kind": "link_down", "ranks": [2, 3], "at_us": 3000}],
])
def test_incremental_counters_equal_the_full_scans(monkeypatch, faults):
    monkeypatch.setattr(replay, "_Model", _CheckedModel)
    _CheckedModel.asked = 0
    w = from_dict({"builtin": "tp_dp_step", "world_size": 8, "tp": 2, "layers": 2, "steps": 2})
    fs = parse_faults(faults, 8)
    replay.run(apply_rank_faults(w, fs), link_faults=[f for f in fs if f.kind in ("link_down", "degraded_link")],
               crashes=fs, timeout_ms=1000)
    assert _CheckedModel.asked > 10


def test_dumps_share_one_member_list_per_group():
    dumps = _simulated_dumps(world=8)
    texts = [d["pg_config"]["0"]["ranks"] for d in dumps.values()]
    # one string for the 8 dumps, not 8 copies (N copies of an N-rank list made 4,096 ranks take 0.9 GB)
    assert texts[0] == "[0, 1, 2, 3, 4, 5, 6, 7]" and all(t is texts[0] for t in texts)


def test_too_large_a_workload_is_refused_up_front():
    # ddp_step, 3 buckets, 2 steps: forward + 3 x (backward slice, all_reduce) + wait + optimizer = 9 items a step,
    # 18 per rank; 65,536 ranks -> 1,179,648 items, over the 600,000 limit
    with pytest.raises(CollsimError, match=r"1,179,648 program items \(65,536 ranks x 2 steps\), over the flight "
                                           r"simulator's limit of 600,000: use fewer ranks or steps"):
        run_scenario({"workload": {"builtin": "ddp_step", "world_size": 65536, "buckets": 3, "steps": 2}})


def test_a_1024_rank_run_prints_a_short_answer(cli, tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("workload: {builtin: ddp_step, world_size: 1024, buckets: 3, bucket_nbytes: 4M, steps: 1}\n"
                 "faults: [{kind: skip, rank: 2, call: 1}]\n")
    code, out, _ = cli("flight", "simulate", f)
    # rank 2 skips: every other rank, 0-1 and 3-1023, waits; one range, not 1,023 numbers
    assert code == 0 and "rank(s) [0-1, 3-1023] wait in all_reduce" in out and len(out) < 4000


# ---- 5. skipped files listed; gzip read, bounded ------------------------------------------------------------
def test_gzipped_published_dumps_give_the_reference_culprit(tmp_path, cli):
    src = _published()
    d = tmp_path / "gz"
    d.mkdir()
    for r in range(16):
        (d / f"_dump_{r}.gz").write_bytes(gzip.compress((src / f"_dump_{r}").read_bytes()))
    code, out, _ = cli("flight", "analyze", d, "--format", "json")
    got = json.loads(out)
    assert code == 0 and got["ranks"] == list(range(16)) and got["skipped"] == []
    assert got["culprits"] == _reference_culprits(src)


def test_a_dump_and_its_gzip_copy_are_two_files_for_one_rank_named(tmp_path, cli):
    dumps = _simulated_dumps()
    write_dumps(str(tmp_path), dumps)
    (tmp_path / "rank_3.json.gz").write_bytes(gzip.compress((tmp_path / "rank_3.json").read_bytes()))
    code, _, err = cli("flight", "analyze", tmp_path)
    assert code == 2 and "two dumps for rank 3" in err and "rank_3.json and rank_3.json.gz" in err


def test_skipped_files_are_listed_in_text_and_json(tmp_path, cli):
    write_dumps(str(tmp_path), _simulated_dumps())
    (tmp_path / "train.log.3").write_text("a log")
    (tmp_path / "dump3").write_text("no separator before the number")
    (tmp_path / "sub").mkdir()
    code, out, _ = cli("flight", "analyze", tmp_path, "--format", "json")
    got = json.loads(out)
    assert code == 0 and got["ranks"] == [0, 1, 2, 3] and got["skipped"] == ["dump3", "sub", "train.log.3"]
    assert got["culprits"] == [2]
    text = cli("flight", "analyze", tmp_path)[1]
    assert "skipped 3 file(s) or folder(s)" in text and "dump3, sub, train.log.3" in text


def _bomb(path: Path, mib: int) -> None:
    """A gzip file of ``mib`` MiB of zeros, written a MiB at a time (a few hundred KB on disk)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(c.compress(bytes(1 << 20)))
        f.write(c.flush())


def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path):
    bomb = tmp_path / "rank_0.json.gz"
    _bomb(bomb, (loader.MAX_DUMP_BYTES >> 20) + 8)
    assert bomb.stat().st_size < 2 << 20
    # refused (its peak memory, a few 1 MiB pieces, is measured by benchmarks/bench_hostile_inputs.py)
    with pytest.raises(loader.RefusedDump, match="decompresses to more than 256 MiB"):
        loader.read_raw(str(bomb))


def test_a_bomb_beside_good_dumps_is_refused_and_the_rest_read(tmp_path):
    write_dumps(str(tmp_path), {r: d for r, d in _simulated_dumps().items() if r != 0})
    _bomb(tmp_path / "rank_0.json.gz", (loader.MAX_DUMP_BYTES >> 20) + 1)
    ds = loader.load_dir(str(tmp_path))
    assert sorted(ds.dumps) == [1, 2, 3] and ds.refused_ranks == (0,)
    assert "256 MiB" in ds.refused[str(tmp_path / "rank_0.json.gz")]


def test_a_truncated_gzip_dump_is_refused_naming_it(tmp_path):
    blob = gzip.compress(json.dumps(_simulated_dumps()[0]).encode())
    (tmp_path / "rank_0.json.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(loader.RefusedDump, match=r"rank_0\.json\.gz: the gzip data is truncated"):
        loader.read_raw(str(tmp_path / "rank_0.json.gz"))


# ---- 6. the rank from the name ------------------------------------------------------------------------------
@pytest.mark.parametrize("name,rank", [
    ("rank_3.json", 3), ("rank3", 3), ("nccl_trace_rank_12", 12), ("_dump_15", 15), ("dump-7.pkl", 7),
    ("rank0_node7.json", 0),    # "rank" and its number win over the node's number
    ("node7_rank1.json", 1), ("5", 5), ("5.json", 5),
    ("train.log.3", None),      # a "." before the number: not a dump
    ("rank_3.log", None), ("dump3", None), ("worker0.1234.pt.trace.json", None), ("notes.txt", None),
])
def test_rank_from_the_file_name(name, rank):
    assert loader.rank_of(name) == rank
    assert loader.dump_rank(name + ".gz") == rank


def test_host_suffixed_names_are_read_as_their_ranks(tmp_path, cli):
    dumps = _simulated_dumps()
    for r, d in dumps.items():   # the tester's rank0_node7.json ... rank3_node8.json
        (tmp_path / f"rank{r}_node{7 + r // 2}.json").write_text(json.dumps(d))
    code, out, _ = cli("flight", "analyze", tmp_path, "--format", "json")
    got = json.loads(out)
    assert code == 0 and got["ranks"] == [0, 1, 2, 3] and got["culprits"] == [2]


def test_two_files_for_one_rank_are_both_named(tmp_path, cli):
    write_dumps(str(tmp_path), _simulated_dumps())
    shutil.copy(tmp_path / "rank_1.json", tmp_path / "_dump_1")
    code, _, err = cli("flight", "analyze", tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "two dumps for rank 1" in err and "_dump_1 and rank_1.json" in err


def test_a_parent_folder_names_its_dump_subfolders(tmp_path, cli):
    for job in ("jobA", "jobB"):
        write_dumps(str(tmp_path / job), _simulated_dumps())
    code, _, err = cli("flight", "analyze", tmp_path)
    assert code == 2 and "subfolder(s) jobA, jobB hold dumps: give one of them" in err


# ---- 14. output bounded when a group lists many ranks without dumps ------------------------------------------
def test_many_missing_ranks_give_ranges_not_one_line_each(tmp_path, cli):
    n = 200_000
    members = json.dumps(list(range(n)))
    for r, d in _simulated_dumps().items():   # 4 dumps whose default group lists 200,000 ranks
        d["pg_config"]["0"]["ranks"] = members
        (tmp_path / f"rank_{r}.json").write_text(json.dumps(d))
    code, out, _ = cli("flight", "analyze", tmp_path)
    assert code == 0 and len(out) < 3000 and len(out.splitlines()) < 20
    assert f"process group '0' (default_pg): ranks [0-{n - 1}]" in out
    assert f"rank(s) 4-{n - 1}: no dump" in out
    got = json.loads(cli("flight", "analyze", tmp_path, "--format", "json")[1])
    assert len(got["missing_dumps"]) == n - 4   # JSON keeps every rank where it lists ranks
    lost = {k: v for k, v in got["evidence"].items() if k not in ("0", "1", "2", "3")}
    assert lost == {f"4-{n - 1}": "no dump"}   # one key for the run, not 199,996


def test_lost_ranks_evidence_is_one_key_per_run_split_by_reason():
    # ranks 0, 1 and 9 of a 10-rank group left dumps: 2-8 did not, and rank 5's file was refused (unreadable)
    dumps = {r: loader.normalise(d) for r, d in _simulated_dumps(world=10, skip_rank=1).items() if r in (0, 1, 9)}
    got = analyze(loader.DumpSet(dumps, refused={"x/rank_5": "bad"}, refused_why={5: "x/rank_5: bad"}))
    assert got["missing_dumps"] == [2, 3, 4, 5, 6, 7, 8]
    # one key per run, split where the reason changes
    assert {k: v for k, v in got["evidence"].items() if k not in ("0", "1", "9")} == {
        "2-4": "no dump", "5": "dump unreadable (refused: see 'refused')", "6-8": "no dump"}


def test_rank_lists_short_and_long():
    assert ranks_short([3, 1, 2]) == "[1, 2, 3]"
    assert ranks_short(range(17)) == "[0-16]"   # past 16 ranks: ranges
    evens = list(range(0, 100, 2))              # 50 runs of one: 16 shown, 34 more
    assert rank_text(evens) == "[" + ", ".join(str(r) for r in range(0, 32, 2)) + ", ... 34 more]"
    assert rank_text(list(range(5)) + list(range(7, 3_000_000))) == "[0-4, 7-2999999]"


# ---- 15. wording ---------------------------------------------------------------------------------------------
def test_a_timeout_without_hang_prints_its_time(cli, tmp_path):
    f = tmp_path / "t.yaml"   # the tester's timeout.yaml: a 5 s straggler and a 1 ms watchdog
    f.write_text("workload: {builtin: ddp_step, world_size: 4, buckets: 3, bucket_nbytes: 4M, steps: 2}\n"
                 "faults: [{kind: straggler, rank: 2, call: 1, delay_us: 5000000}]\ntimeout_ms: 1\n")
    code, out, _ = cli("flight", "simulate", f)
    outcome = next(ln for ln in out.splitlines() if ln.startswith("outcome:"))
    assert code == 0 and outcome.startswith("outcome: timeout at ") and " - ms" not in outcome
    assert "with no hang" in outcome


def _entry(seq: int, completed: bool) -> dict:
    return {"pg": "0", "pg_desc": "default_pg", "seq": seq, "op": "all_reduce", "input_sizes": [[4]],
            "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"], "completed": completed,
            "created_ns": None, "started_ns": None, "completed_ns": None, "is_p2p": False}


@pytest.mark.parametrize("done,said", [
    ((False, False), "rank(s) [0, 1] wait in all_reduce"),
    ((True, True), "rank(s) [0, 1] called all_reduce, which their records mark completed"),
    ((True, False), "rank(s) [0, 1] called all_reduce: rank(s) [0] mark it completed"),
])
def test_ranks_ahead_of_a_missing_rank_are_not_said_to_wait_when_their_records_say_completed(done, said):
    # gloo retires the call the others made without rank 2 (timed out): the records say completed
    dumps = {r: {"pg_config": {"0": {"ranks": [0, 1, 2], "desc": "default_pg"}},
                 "pg_status": {"0": {"last_enqueued_collective": 2 if r < 2 else 1}},
                 "entries": [_entry(1, True)] + ([_entry(2, done[r])] if r < 2 else [])} for r in range(3)}
    d = analyze(dumps)
    assert (d["error_type"], d["culprits"]) == ("missing_rank", [2]) and said in d["details"]


def test_builtin_scenarios_still_give_the_documented_answers():
    # docs/flight.md's table, unchanged by the incremental counters
    out = run_scenario(load_scenario("ddp-skip"))
    assert out["outcome"] == "hang" and round(out["hang_at_us"] / 1e3, 3) == 80.852
    assert (out["diagnosis"]["error_type"], out["diagnosis"]["culprits"]) == ("missing_rank", [2])
    crash = run_scenario(load_scenario("ddp-crash"))   # rank 1 crashes at 45 ms and writes no dump
    assert crash["diagnosis"]["culprits"] == [1] and list(crash["crashed"]) == [1]


def test_four_of_sixteen_dumps_name_no_culprit_where_every_group_read_matches(tmp_path, cli):
    # the published job's rank 12 lost its GPU (the reference names 12). With only ranks 0-3's dumps, every
    # stuck group among them has all its members in matching calls: no rank read is behind, so naming one
    # group's members (and the transport) was a tie broken by order; the answer points at the unread ranks
    src = _published()
    for r in range(4):
        shutil.copy(src / f"_dump_{r}", tmp_path / f"_dump_{r}")
    code, out, _ = cli("flight", "analyze", tmp_path, "--format", "json")
    got = json.loads(out)
    assert code == 0 and got["error_type"] == "stuck_collective" and got["culprits"] == []
    assert got["missing_dumps"] == list(range(4, 16)) and "without a dump" in got["details"]
    assert {f["process_group"] for f in got["other_findings"]} >= {"35", "36"}   # the tie, still reported
