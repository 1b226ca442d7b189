"""``pg_status`` is keyed by each rank's local process-group uid, not by the group's global name.

PyTorch writes ``pg_status`` as ``std::to_string(pg_id)`` (``ProcessGroupNCCL::uid_``, a per-process counter,
the same number each entry carries as ``pg_id``), while ``pg_config`` and the entries' ``process_group`` use the
global group name. Comparing ``pg_status["11"]`` across ranks compares unrelated groups. The published
16-rank Megatron dumps (nvidia-resiliency-ext's fixtures) have it: the expected culprits below come from
their own files (``*_reference.txt``: PyTorch-style analysis; ``fault_injection.log``: the injected faults),
never from collsim's output.
"""
import os
import pickle
import shutil
from pathlib import Path

import pytest

from sim.flight.analyze import analyze
from sim.flight.loader import load_dir, normalise

_TRACES = Path(os.environ.get("COLLSIM_TRACES") or Path(__file__).resolve().parents[2].parent / "shared" / "traces")


def _published(name: str) -> Path:
    p = _TRACES / "flight_recorder" / name
    if not p.exists():
        pytest.skip(f"published flight-recorder dumps not found at {p} (set COLLSIM_TRACES to their folder)")
    return p


def _reference(folder: Path) -> tuple[str, list[int]]:
    """(process group, missing ranks) from the fixture's reference output, a table whose last row reads
    ``74 | EXPERT_MODEL_PARALLEL_GROUP,0 | nccl:all_to_all | 4027x5120 | BFloat16 | 12``."""
    text = next(folder.glob("*_reference.txt")).read_text()
    row = [c.strip() for c in text.strip().splitlines()[-1].split("|")]
    return row[0], sorted(int(r) for r in row[-1].split(","))


def _faulty(folder: Path) -> set[int]:
    """The injected faults: ``Fault ranks: [12, 14]`` in fault_injection.log."""
    line = next(ln for ln in (folder / "fault_injection.log").read_text().splitlines() if ln.startswith("Fault ranks"))
    return {int(r) for r in line.split(":", 1)[1].strip(" []").split(",")}


@pytest.mark.parametrize("case", ["nvrx_megatron_moe_16rank_gpu_error_1st", "nvrx_megatron_moe_16rank_lock_gil_1st"])
def test_published_megatron_dumps_name_the_reference_culprits(case):
    folder = _published(case)
    pg, missing = _reference(folder)
    d = analyze(load_dir(str(folder)))
    # gpu_error: group 74 (EXPERT_MODEL_PARALLEL_GROUP), rank 12; lock_gil: group 72, ranks 9 and 14. The old
    # reading compared pg_status by local uid and named [12, 13, 14, 15] in an invented group '11', and [8..15]
    assert (d["error_type"], d["process_group"], d["culprits"]) == ("missing_rank", pg, missing)
    assert set(d["culprits"]) <= _faulty(folder)
    assert d["missing_dumps"] == []
    # every group the analysis reports is one of pg_config's (global names), none made of pg_status uids
    named = {n for r in range(16) for n in load_dir(str(folder)).dumps[r]["pg_config"]}
    assert set(d["process_groups"]) <= named
    for f in d["other_findings"] + d["secondary"]:
        assert f["process_group"] in named


def test_lost_dumps_are_unknown_not_blamed(tmp_path):
    # lock_gil with three dumps lost: rank 3's truncated, rank 5's overwritten, rank 9's deleted. Before, six
    # healthy ranks [0, 1, 2, 4, 6, 7] were named; the faulty ranks are 9 and 14 (fault_injection.log)
    src = _published("nvrx_megatron_moe_16rank_lock_gil_1st")
    for f in src.glob("_dump_*"):
        shutil.copyfile(f, tmp_path / f.name)
    (tmp_path / "_dump_3").write_bytes((src / "_dump_3").read_bytes()[:1000])
    (tmp_path / "_dump_5").write_bytes(b"junkjunk\n")
    (tmp_path / "_dump_9").unlink()
    d = analyze(load_dir(str(tmp_path)))
    assert d["culprits"] and set(d["culprits"]) <= _faulty(src)
    assert (d["process_group"], d["culprits"]) == ("72", [14])   # the reference's group; rank 9 left nothing
    assert d["missing_dumps"] == [3, 5, 9] and "no dump read from rank(s) [3, 5, 9]" in d["details"]
    assert "unknown" in d["details"]
    # a finding that rests only on a lost dump is listed, after the ones that records support
    silent = [f for f in d["other_findings"] if "left no readable dump" in f["details"]]
    assert silent and d["other_findings"].index(silent[0]) > 0
    assert "-1 collective" not in str(d)


def _entry(rid, uid, name, seq, *, done=True, p2p=False, op="all_reduce"):
    return {"record_id": rid, "pg_id": uid, "process_group": (name, f"group {name}"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "is_p2p": p2p, "profiling_name": f"nccl:{op}",
            "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
            "state": "completed" if done else "scheduled", "retired": False, "time_created_ns": 1000 * rid}


def _status(last, done):
    return {"last_enqueued_collective": last, "last_started_collective": -1, "last_completed_collective": done}


def test_local_uid_keys_are_mapped_to_global_groups(tmp_path):
    # 6 ranks; group "5" = [0, 1, 2] at seq ~10, group "6" = [3, 4, 5] at seq ~50. Each rank's own subgroup is
    # its local uid 1 (uid 0: the default group), so every dump keys pg_status "1" for a different group.
    # Rank 2 stops after seq 10 of group "5": the culprit. Read by name, pg_status "1" would say ranks 0-2
    # (at 11 and 10) are behind ranks 3-5 (at 50).
    world = "[0, 1, 2, 3, 4, 5]"
    for r in range(6):
        name, members = ("5", "[0, 1, 2]") if r < 3 else ("6", "[3, 4, 5]")
        last = (11 if r < 2 else 10) if r < 3 else 50
        entries = [_entry(s, 1, name, s, done=s < last or r >= 3) for s in range(last - 2, last + 1)]
        raw = {"version": "2.9",
               "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": world},
                             name: {"name": name, "desc": f"group {name}", "ranks": members}},
               "pg_status": {"0": _status(-1, -1), "1": _status(last, last if r >= 3 else last - 1)},
               "entries": entries}
        (tmp_path / f"_dump_{r}").write_bytes(pickle.dumps(raw, protocol=2))
    ds = load_dir(str(tmp_path))
    # uid 0 appears in no entry of a dump whose uids are not names: unknown, dropped
    assert set(ds.dumps[0]["pg_status"]) == {"5"} and set(ds.dumps[4]["pg_status"]) == {"6"}
    assert ds.dumps[0]["pg_status_unmapped"] == ["0"]
    d = analyze(ds)
    assert (d["error_type"], d["process_group"], d["culprits"], d["collective_seq_id"]) == ("missing_rank", "5", [2], 11)
    assert "1" not in d["process_groups"]


def test_unmappable_and_p2p_status_is_dropped():
    # a uid no entry names, in a dump whose entries show uids are not names, is unknown: dropped, listed
    raw = {"pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"},
                         "33": {"name": "33", "desc": "TP", "ranks": "[0, 1]"}},
           "pg_status": {"0": _status(7, 7), "3": _status(900, 899), "4": _status(12, 12)},
           "entries": [_entry(1, 4, "33", 12),
                       _entry(2, 0, "0", 5), _entry(3, 0, "0", 5, p2p=True, op="send 0->1")]}
    d = normalise(raw)
    # uid 4 is group "33"; uid 0's latest call is a send, so its numbers count sends (p2p_seq_id): dropped
    assert d["pg_status"] == {"33": _status(12, 12)} and d["pg_status_unmapped"] == ["0", "3"]
    # the simulator's layout (uid == name, the same keys as pg_config) and gloo's unnamed config still map
    sim = normalise({"pg_config": {"0": {"name": "0", "ranks": "[0, 1]"}, "7": {"name": "7", "ranks": "[0, 1]"}},
                     "pg_status": {"0": _status(3, 3), "7": _status(2, 1)}, "entries": []})
    assert set(sim["pg_status"]) == {"0", "7"} and sim["pg_status_unmapped"] == []
    gloo = normalise({"pg_config": {"": {"name": "", "ranks": "[0, 1]"}}, "pg_status": {"0": _status(3, 3)}})
    assert gloo["pg_status"] == {"0": _status(3, 3)}
