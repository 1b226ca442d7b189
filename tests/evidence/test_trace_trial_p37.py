"""A hostile tester's findings on ``collsim trace`` (thirty-seventh pass), each pinned: damaged id fields are
refused naming the event, a log of two runs is refused where the second starts, one rank's trace cannot be
counted twice into one step, the printed topology reproduces the prediction, two outputs never share a file,
the NCCL release whose rules ran is named, flight-recorder lateness respects the hosts' clocks, stray files in
a trace folder are skipped and listed, and JSON errors say what happened. Expected values come from the files
written here, the published files (../shared/traces/SOURCES.md), or a second path through the code."""
import json
import os
import pickle
import re

import pytest
from tracedata import published

from sim.evidence.job import Call, Job
from sim.evidence.job_compare import stragglers
from sim.nccl.versions import release

A100 = ("nccl_logs", "a100pcie_nvlink_x2_single_node")
ALLREDUCE_1M = {"Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144, "Group size": 2,
                "dtype": "Float", "Process Group Ranks": "[0, 1]", "External id": 5}
KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _events(offset=0.0):
    """One rank's step offset..offset+1000 us: a 1 MiB all_reduce issued at +90 us whose kernel runs 300 us
    from +100 (tied to its launch by correlation 7). The record_param_comms event is traceEvents[1]."""
    return [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": offset, "dur": 1000.0, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": offset + 90, "dur": 20.0, "pid": 1, "tid": 1,
         "args": dict(ALLREDUCE_1M)},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": offset + 95, "dur": 5.0, "pid": 1, "tid": 1,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": KERNEL, "ts": offset + 100, "dur": 300.0, "pid": 0, "tid": 9,
         "args": {"correlation": 7, "External id": 5}},
    ]


def _trace(path, rank=0, offset=0.0, events=None):
    path.write_text(json.dumps({"distributedInfo": {"rank": rank, "world_size": 2},
                                "traceEvents": events if events is not None else _events(offset)}))
    return path


def _one_line_error(cli, *args):
    code, _out, err = cli(*args)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


# ---- 1: one malformed id field is refused naming the event, not a traceback ---------------------------------
@pytest.mark.parametrize("index,where,key,value,kind", [
    (1, None, "tid", [1], "a list"),
    (1, None, "pid", {"a": 1}, "an object"),
    (3, "args", "correlation", [1], "a list"),
    (1, "args", "External id", {"a": 1}, "an object"),
])
def test_a_damaged_id_field_is_refused_naming_the_event(cli, tmp_path, index, where, key, value, kind):
    events = _events()
    (events[index] if where is None else events[index]["args"])[key] = value
    line = _one_line_error(cli, "trace", _trace(tmp_path / "rank0.json", events=events), "-t", "switch:n=2")
    assert f"event {index} " in line and key in line and kind in line and "damaged" in line


def test_a_stream_named_by_text_is_still_read(cli, tmp_path):
    # Chrome traces may name a thread ("stream 7"): a name is an id, not damage
    events = _events()
    events[3]["tid"] = "stream 7"
    code, out, err = cli("trace", _trace(tmp_path / "rank0.json", events=events), "-t", "switch:n=2", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["collectives"][0]["measured_us"] == 300.0


def _dump_entry(seq, created_ns, dtypes=("Float",), op="nccl:all_reduce", pg=("0", "default_pg")):
    return {"record_id": seq, "pg_id": 0, "process_group": list(pg), "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": op, "time_created_ns": created_ns, "input_sizes": [[1024, 256]],
            "input_dtypes": list(dtypes), "output_sizes": [[1024, 256]], "output_dtypes": ["Float"],
            "state": "completed", "time_discovered_started_ns": created_ns + 1000,
            "time_discovered_completed_ns": created_ns + 2_000_000, "retired": True, "timeout_ms": 600000,
            "is_p2p": False, "duration_ms": 1.0}


def _write_dumps(folder, late_ns=0, bad_dtypes=False):
    """Ranks 0 and 1 of one default group, three all_reduce calls 10 ms apart; rank 1 issues them ``late_ns``
    late, and with ``bad_dtypes`` its input_dtypes are [[1]] (no recorder writes that)."""
    folder.mkdir(exist_ok=True)
    for rank in (0, 1):
        dtypes = [[1]] if bad_dtypes and rank == 1 else ["Float"]
        dump = {"version": "2.9", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3,
                                    "last_completed_collective": 3}},
                "entries": [_dump_entry(s, 10**12 + s * 10**7 + (late_ns if rank == 1 else 0), dtypes) for s in (1, 2, 3)]}
        (folder / f"rank_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    return folder


def test_flight_dtypes_no_recorder_writes_are_noted_not_a_traceback(cli, tmp_path):
    code, out, err = cli("trace", _write_dumps(tmp_path / "d", bad_dtypes=True), "-t", "switch:n=2", "--format", "json")
    assert code == 0 and "Traceback" not in err, err
    doc = json.loads(out)
    (note,) = [n for n in doc["notes"] if "input_dtypes" in n]
    assert note.count("3 flight-recorder entries") == 1 and "rank 1" in note and "[[1]]" in note
    # rank 0's calls keep their size (1024 x 256 float); rank 1's are not given one
    sized = {r["nbytes"]: r["ranks"] for r in doc["collectives"]}
    assert sized == {1024 * 256 * 4: [0], None: [1]}


# ---- 2: one file holding two runs is refused, saying where the second starts ---------------------------------
def test_a_log_of_two_runs_in_one_file_is_refused_naming_the_split(cli, tmp_path):
    fault, good = published(*A100, "nccl-fault.log").read_text(), published(*A100, "nccl.log").read_text()
    mixed = tmp_path / "mixed.log"
    mixed.write_text(fault + good)
    second = len(fault.splitlines()) + 1   # the good run's first line
    assert good.splitlines()[0].startswith("# Collective test starting")
    line = _one_line_error(cli, "trace", mixed)
    assert f"starts at line {second}" in line and f"head -n {second - 1}" in line and f"tail -n +{second}" in line
    # the second half, split as the line says, reads as the run it came from
    (tmp_path / "run2.log").write_text("\n".join(mixed.read_text().splitlines()[second - 1:]) + "\n")
    rows = []
    for log in (tmp_path / "run2.log", published(*A100, "nccl.log")):
        code, out, err = cli("trace", log, "--format", "json")
        assert code == 0, err
        rows.append([(r["nbytes"], r["calls"], r["measured_us"]) for r in json.loads(out)["collectives"]])
    assert rows[0] == rows[1]


# ---- 3: several traces claiming one rank are not summed into one step ---------------------------------------
def test_two_traces_claiming_one_rank_at_once_are_refused(cli, tmp_path):
    a = _trace(tmp_path / "a.json", rank=0)
    b = _trace(tmp_path / "b.json", rank=0, offset=1.0)   # a copy, every ts moved by 1 us
    line = _one_line_error(cli, "trace", a, b, "-t", "switch:n=2")
    assert "a.json" in line and "b.json" in line and "rank 0" in line and "overlapping" in line


def test_two_windows_of_one_rank_keep_the_share_of_one_step(cli, tmp_path):
    a = _trace(tmp_path / "a.json", rank=0)
    b = _trace(tmp_path / "b.json", rank=0, offset=10_000.0)   # the next profiled step, later
    code, out, err = cli("trace", a, b, "-t", "switch:n=2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["collectives"][0]["calls"] == 2
    assert doc["step"]["comm_share"] == pytest.approx(300.0 / 1000.0)   # one 300 us kernel in a 1000 us step


# ---- 4: the printed topology reproduces the prediction ---------------------------------------------------------
def test_the_printed_topology_reproduces_the_prediction(cli):
    log = published(*A100, "nccl.log")
    code, out, err = cli("trace", log, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    # SOURCES.md / docs/traces.md: NCCL's topology dump shows NVLink at 240 GB/s between the two cards
    assert doc["topology"] == doc["topology_spec"] == "fully-connected:n=2,bandwidth_GBps=240,kind=nvlink"
    code, out2, err = cli("trace", log, "-t", doc["topology"], "--format", "json")
    assert code == 0, err
    assert [r["predicted_us"] for r in json.loads(out2)["collectives"]] == [r["predicted_us"] for r in doc["collectives"]]
    code, out, _ = cli("trace", log, "-t", "fully-connected:n=2")
    assert out.splitlines()[0].endswith("predicted on fully-connected:n=2")


# ---- 5: two outputs never write one file ---------------------------------------------------------------------
def test_two_outputs_naming_one_file_are_refused(cli, tmp_path):
    log = published(*A100, "nccl.log")
    r = tmp_path / "r.md"
    line = _one_line_error(cli, "trace", log, "--topology-out", r, "--out", r)
    assert "--out" in line and "--topology-out" in line and "same file" in line and not r.exists()
    os.symlink(tmp_path, tmp_path / "here")   # the same folder by another name
    assert "same file" in _one_line_error(cli, "trace", log, "--topology-out", tmp_path / "here" / "t.txt",
                                          "--out", tmp_path / "t.txt")
    (tmp_path / "h1.txt").write_text("")
    os.link(tmp_path / "h1.txt", tmp_path / "h2.txt")   # one file, two names
    assert "same file" in _one_line_error(cli, "trace", log, "--topology-out", tmp_path / "h1.txt",
                                          "--out", tmp_path / "h2.txt")
    assert (tmp_path / "h1.txt").read_text() == ""


# ---- 6: the release whose rules ran is named, as sim/nccl/versions.py decides ---------------------------------
def test_a_29_log_is_predicted_with_the_rules_of_the_entry_that_stands_for_it(cli):
    log = published("nccl_logs", "aws_p4d_a100x16_efa", "README_launcher_log_lines124-719.txt")
    code, out, err = cli("trace", log, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["nccl_rules"] == release("2.9.9").version == "2.8"
    assert any("NCCL 2.9.9" in n and "2.8's rules" in n and "2.8-2.9" in n for n in doc["notes"])
    # the same predictions as asking for 2.8 by hand
    code, out, err = cli("trace", log, "--nccl-version", "2.8", "--format", "json")
    assert code == 0, err
    assert [r["predicted_us"] for r in json.loads(out)["collectives"]] == [r["predicted_us"] for r in doc["collectives"]]


def test_the_docs_and_help_say_what_the_release_table_does(cli):
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "traces.md")).read()
    said = re.search(r"a 2\.9\.9 run gets (\d+\.\d+)'s", docs)
    assert said and said.group(1) == release("2.9.9").version
    # what the help promises for a recorded 2.17 is what nearest_documented gives it
    from sim.commands.trace import _release_help
    assert "2.10-2.17: 2.18's" in _release_help()
    from sim.nccl.versions import nearest_documented
    assert nearest_documented((2, 17)).version == "2.18"


# ---- 7: flight-recorder lateness: one process group at a time, above the hosts' clock skew ------------------
def test_flight_lateness_below_the_clock_skew_of_hosts_names_nobody(cli, tmp_path):
    code, out, err = cli("trace", _write_dumps(tmp_path / "d", late_ns=3_000_000), "-t", "switch:n=2", "--format", "json")
    assert code == 0, err
    st = json.loads(out)["stragglers"]
    late = {t["rank"]: t["late_us_median"] for t in st["ranks"]}
    assert late == {0: 0.0, 1: 3000.0} and st["named"] == [] and "10 ms" in st["rule"]


def test_published_megatron_dumps_name_no_straggler_as_flight_analyze(cli):
    code, out, err = cli("trace", published("flight_recorder", "nvrx_megatron_moe_16rank_gpu_error_1st"),
                         "-t", "dgx-h100:nodes=2", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["stragglers"]["named"] == []


def test_calls_of_two_process_groups_and_point_to_point_calls_are_not_matched():
    # groups {0,1} and {2,3} each run their own 1 MiB all_reduce, the second 1 ms later; rank 0 and 1 send
    # to different peers at different times: nobody is late for a call it shares with another rank
    calls = [Call(source="t", rank=r, op="all_reduce", nbytes=1 << 20, group_size=2,
                  group_ranks=(0, 1) if r < 2 else (2, 3), launch_us=0.0 if r < 2 else 1000.0) for r in range(4)]
    calls += [Call(source="t", rank=r, op="send", nbytes=1 << 20, group_size=2, launch_us=5000.0 * r) for r in (0, 1)]
    st = stragglers(Job(calls=calls))
    assert st["named"] == [] and {t["rank"]: t["late_us_median"] for t in st["ranks"]} == {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}


# ---- 8: stray files in a trace folder are skipped and listed; a folder of folders names them ------------------
def test_stray_files_in_a_trace_folder_are_skipped_and_listed(cli, tmp_path):
    folder = tmp_path / "tf"
    folder.mkdir()
    _trace(folder / "rank0.json", rank=0)
    _trace(folder / "rank1.json", rank=1)
    (folder / "notes.txt").write_text("profiled on Tuesday\n")
    (folder / "config.json").write_text('{"lr": 0.1}')
    code, out, err = cli("trace", folder, "-t", "switch:n=2", "--format", "json", "--out", folder / "report.json")
    assert code == 0, err
    code, out, err = cli("trace", folder, "-t", "switch:n=2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    (note,) = [n for n in doc["notes"] if "not read" in n]
    assert "3 file(s)" in note and all(n in note for n in ("config.json", "notes.txt", "report.json"))
    assert doc["ranks"] == [0, 1] and doc["collectives"][0]["calls"] == 1
    # named on the command line, a file that is no trace is refused
    assert "notes.txt" in _one_line_error(cli, "trace", folder / "notes.txt", "-t", "switch:n=2")


def test_a_folder_of_trace_folders_names_them(cli, tmp_path):
    for job in ("job_a", "job_b"):
        (tmp_path / job).mkdir()
        _trace(tmp_path / job / "rank0.json")
    line = _one_line_error(cli, "trace", tmp_path, "-t", "switch:n=2")
    assert str(tmp_path / "job_a") in line and str(tmp_path / "job_b") in line


# ---- 9: messages ------------------------------------------------------------------------------------------------
def test_json_errors_say_what_happened(cli, tmp_path):
    text = json.dumps({"traceEvents": _events()})
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    line = _one_line_error(cli, "trace", tmp_path / "cut.json", "-t", "switch:n=2")
    assert "truncated" in line and "export" in line
    (tmp_path / "deep.json").write_text('{"traceEvents": ' + "[" * 200 + "]" * 200 + "}")
    line = _one_line_error(cli, "trace", tmp_path / "deep.json", "-t", "switch:n=2")
    assert "nested" in line and "safely" in line and "not a collsim file" not in line


def test_format_has_a_help_string():
    import argparse

    from sim.commands import trace
    parser = argparse.ArgumentParser()
    trace.register(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["trace"]
    (fmt,) = [a for a in sub._actions if a.dest == "format"]
    assert fmt.help and "json" in fmt.help


def test_unpredicted_collectives_are_counted_in_words():
    # two sends and one all_reduce without a size: "the evidence gives 2 no known collective" read as garble; the
    # note says what is lacking and how many, each count beside its reason
    from sim.evidence.job import Call, Job
    from sim.evidence.job_compare import compare_job
    from sim.presets import load_topology
    calls = [Call(source="t", rank=0, op="send", nbytes=4096 * k, group_size=2, duration_us=10.0, backend="nccl")
             for k in (1, 2)]
    calls.append(Call(source="t", rank=0, op="all_reduce", nbytes=None, group_size=2, duration_us=10.0, backend="nccl"))
    doc = compare_job(Job(calls=calls, world_size=2), load_topology("ring:n=2"))
    note = next(n for n in doc["notes"] if "not predicted" in n)
    assert note.startswith("3 distinct collective(s) are not predicted"), note
    assert "no known collective (point-to-point calls are not predicted): 2" in note and "gives 2 no" not in note
    assert "no input shape or element count): 1" in note


def test_nccl_env_alone_keeps_the_release_the_log_prints(cli):
    # NCCL's variables say how NCCL was set, not which NCCL ran: with --nccl-env and no --nccl-version the log's
    # own release (2.22.3, its banner) still picks the rules, as without the variables; --nccl-version overrides
    from sim.nccl.versions import LATEST
    log = str(published("nccl_logs", "aws_p5_h100x16_efa", "nccl-test-output-v2.22.3-1.log"))
    docs = {}
    for extra in ((), ("--nccl-env", "NCCL_ALGO=Ring"), ("--nccl-env", "NCCL_ALGO=Ring", "--nccl-version", LATEST.version)):
        code, out, err = cli("trace", log, *extra, "--format", "json")
        assert code == 0, err
        docs[extra[:2] + extra[2:3]] = json.loads(out)
    plain, env, asked = docs.values()
    assert env["nccl_rules"] == plain["nccl_rules"] != LATEST.version
    assert asked["nccl_rules"] == LATEST.version
    assert any("2.22.3" in n and "--nccl-env" in n for n in env["notes"])
    ran = {r["model_algorithm"] for r in env["collectives"] if r.get("predicted_us") is not None}
    assert ran == {"ring"}, ran   # the variables did take effect
