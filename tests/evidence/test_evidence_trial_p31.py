"""A hostile tester's findings on the evidence readers (thirty-first pass), each pinned: the reading of a
log is shared by every command, the NCCL release a log prints is the one predicted, damaged fields are
refused, and what a report leaves out it says. Expected values come from the published files
(../shared/traces/SOURCES.md), the nccl-tests definitions, or a second path through the code (simulate
with the release given by hand)."""
import json
import os
import re
import subprocess
import sys

import pytest
from tracedata import published

from sim.collectives import get_collective
from sim.errors import CollsimError
from sim.evidence.job import Call, Job
from sim.evidence.job_compare import MAX_PREDICTED, agreement, compare_job
from sim.evidence.load import read_job
from sim.evidence.nccl_log import read_log, topology_spec
from sim.io.nccl_tests_format import NCCL_RECORD, parse_nccl_tests, program_output
from sim.presets import load_topology

A100_LOG = ("nccl_logs", "a100pcie_nvlink_x2_single_node", "nccl.log")
P5_LOG = ("nccl_logs", "aws_p5_h100x16_efa", "nccl-test-output-v2.22.3-1.log")
P4D_LOG = ("nccl_logs", "aws_p4d_a100x16_efa", "README_launcher_log_lines124-719.txt")
P5_SPEC = "dgx-h100:nodes=2,fabric=efa2,nics_per_node=8,nic_gbps=400,nvls=1"


def collsim(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, timeout=timeout)


# ---- one reading of a log's table, for every command ------------------------------------------------
def test_record_host_starts_where_no_name_character_precedes():
    # a record found inside a longer run of name characters is the same record (the leftmost match starts at
    # the run's start): the guard only stops the search from retrying the name at every position
    m = NCCL_RECORD.search("abc.de-1:12:34 [3] NCCL INFO x")
    assert (m.group("host"), m.group("dev")) == ("abc.de-1", "3")
    assert NCCL_RECORD.search("NCCL INFO " + "x" * 50_000) is None


def test_every_reader_gets_the_same_table_out_of_a_debug_log():
    # the published A100 log's nccl-tests rows are cut by NCCL INFO records of the same call (SOURCES.md)
    path = str(published(*A100_LOG))
    text = open(path).read()
    rows = parse_nccl_tests(text)
    assert [r["nbytes"] for r in rows] == [8 << 20 << i for i in range(11)]
    assert [r["nbytes"] for r in rows] == [r["nbytes"] for r in read_log(path).nccl_tests]
    assert "NCCL INFO" not in program_output(text)
    assert program_output("no records here\n 8 2 float") == "no records here\n 8 2 float"


def test_compare_reads_the_table_trace_reads():
    p = collsim("compare", "-m", str(published(*A100_LOG)), "-t", "fully-connected:n=2,bandwidth_GBps=240,kind=nvlink",
                "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["nbytes"] for r in doc["rows"]] == [8 << 20 << i for i in range(11)]
    # measured busbw from the table's own time, by nccl-tests' definition for all_reduce on 2 ranks: 2(n-1)/n = 1
    first = doc["rows"][0]
    assert first["measured_busbw_GBps"] == pytest.approx((8 << 20) / first["measured_time_us"] / 1e3, rel=1e-9)


def test_compare_reads_the_collective_from_all_reduce_columns():
    p = collsim("compare", "-m", str(published(*P5_LOG)), "-t", P5_SPEC, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["collective"] == "all_reduce" and "names no collective" in p.stderr


# ---- the NCCL release a log prints is the one predicted ---------------------------------------------
def test_compare_predicts_with_the_printed_release_and_says_so():
    p = collsim("compare", "-m", str(published(*P5_LOG)), "-t", P5_SPEC, "--format", "json")
    doc = json.loads(p.stdout)
    assert doc["nccl_version"] == "2.22" and any("prints NCCL 2.22.3" in n for n in doc["notes"])
    by_size = {r["nbytes"]: r for r in doc["rows"]}
    # the same prediction asked the other way: simulate with the release given by hand
    s = collsim("simulate", "-t", P5_SPEC, "-b", "32M", "-e", "32M", "--nccl-version", "2.22", "--format", "json")
    want = json.loads(s.stdout)["results"][0]
    assert by_size[32 << 20]["predicted_time_us"] == pytest.approx(want["time_us"], rel=1e-9)
    assert by_size[32 << 20]["algorithm"] == want["algorithm"]
    # and the flag overrides it
    o = collsim("compare", "-m", str(published(*P5_LOG)), "-t", P5_SPEC, "--nccl-version", "2.30", "--format", "json")
    assert json.loads(o.stdout)["nccl_version"] == "2.30"


def test_trace_predicts_with_the_release_the_log_prints():
    p = collsim("trace", str(published(*P5_LOG)), "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["nccl_version"] == "2.22"
    assert any("the NCCL log prints NCCL 2.22.3" in n for n in doc["notes"])


def test_banner_without_a_record_still_names_the_release_and_p4d_has_four_nics():
    log = read_log(str(published(*P4D_LOG)))
    assert log.version == "2.9.9"          # "[1,0]<stdout>:NCCL version 2.9.9+cuda11.2", no NCCL INFO prefix
    spec, why = topology_spec(log)
    assert "nics_per_node=4" in spec and "nic_gbps=100" in spec   # AWS: p4d carries 4 x 100 Gb/s EFA
    assert load_topology(spec).nranks == 16


# ---- one job at a time ---------------------------------------------------------------------------------
def test_a_log_of_another_job_is_refused_beside_a_trace():
    trace = str(published("kineto", "hta_resnet_a100x2", "nccl_data.json.gz"))
    with pytest.raises(CollsimError, match="different jobs"):
        read_job([trace, str(published(*P5_LOG))])


def test_topology_out_from_a_log_without_per_call_lines(tmp_path):
    log = tmp_path / "setup.log"
    log.write_text("h1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                   "h1:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
                   "h1:1:2 [0] NCCL INFO Using network IB\n")
    out = tmp_path / "spec.txt"
    p = collsim("trace", str(log), "--topology-out", str(out))
    assert p.returncode == 0, p.stderr
    spec = out.read_text().strip()
    assert load_topology(spec).nranks == 16 and "no per-call lines" in p.stderr


# ---- what the kernel names say, and what they do not ------------------------------------------------
def test_sendrecv_names_no_protocol_and_is_not_counted_against_the_model():
    calls = [Call(source="t", rank=0, op="all_to_all", nbytes=4096, group_size=4, duration_us=10.0,
                  nccl_algorithm="p2p", nccl_protocol=None, choice_source="kernel name", backend="nccl"),
             Call(source="t", rank=0, op="all_reduce", nbytes=4096, group_size=4, duration_us=10.0,
                  nccl_algorithm="ring", nccl_protocol="LL", choice_source="kernel name", backend="nccl")]
    rows = [{"collective": "all_to_all", "nbytes": 4096, "group_size": 4, "model_algorithm": "p2p", "model_protocol": "LL"},
            {"collective": "all_reduce", "nbytes": 4096, "group_size": 4, "model_algorithm": "ring", "model_protocol": "LL"}]
    a = agreement(Job(calls=calls), rows)
    assert a["calls"] == 2 and a["algorithm_rate"] == 1.0
    assert a["protocol_calls"] == 1 and a["protocol_rate"] == 1.0   # only the call whose protocol is named


def _trace(tmp_path, args: dict, name="t.json"):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 990.0, "dur": 20.0, "pid": 1, "tid": 1,
           "args": {"Collective name": "allreduce", "dtype": "Float", **args}},
          {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "ts": 1000.0,
           "dur": 10.0, "pid": 0, "tid": 7, "args": {"Collective name": "allreduce", **args}}]
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 0, "world_size": 8}}))
    return str(path)


@pytest.mark.parametrize("field,value", [("Group size", True), ("Group size", 0), ("In msg nelems", -5),
                                         ("In msg nelems", 2.5)])
def test_damaged_trace_fields_are_refused_naming_the_field(tmp_path, field, value):
    args = {"In msg nelems": 1024, "Group size": 8}
    args[field] = value
    with pytest.raises(CollsimError, match=re.escape(repr(field)) + ".*damaged"):
        read_job([_trace(tmp_path, args)])


def test_group_size_and_rank_list_that_disagree_are_said(tmp_path):
    job = read_job([_trace(tmp_path, {"In msg nelems": 1024, "Group size": 4,
                                      "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"})])
    assert {c.group_size for c in job.calls} == {4} and all(c.group_ranks is None for c in job.calls)
    assert any("'Process Group Ranks' lists 8" in n for n in job.notes)


# ---- bounded work, said ------------------------------------------------------------------------------
def test_a_report_predicts_at_most_max_predicted_distinct_collectives():
    calls = [Call(source="t", rank=0, op="all_reduce", nbytes=4 * (i + 1), group_size=2, duration_us=float(i + 1),
                  backend="gloo") for i in range(MAX_PREDICTED + 5)]
    notes: list = []
    doc = compare_job(Job(calls=calls, world_size=2), load_topology("ring:n=2"))
    rows = doc["collectives"]
    assert sum(r["predicted_us"] is not None for r in rows) == MAX_PREDICTED
    # the ones predicted are those with the most recorded time (the largest durations here)
    unpredicted = {r["nbytes"] for r in rows if r["predicted_us"] is None}
    assert unpredicted == {4 * (i + 1) for i in range(5)}
    assert any(f"5 of {MAX_PREDICTED + 5} distinct collectives are not predicted" in n for n in doc["notes"] + notes)


def test_unpredicted_rows_without_a_group_size_are_said():
    calls = [Call(source="t", rank=0, op="all_reduce", nbytes=1024, group_size=None, duration_us=5.0, backend="gloo")]
    doc = compare_job(Job(calls=calls), load_topology("ring:n=2"))
    assert doc["collectives"][0]["predicted_us"] is None
    assert any("no process-group size" in n for n in doc["notes"])
    assert get_collective("all_reduce").name == doc["collectives"][0]["collective"]


def test_flight_rank_lists_are_cut_in_text_and_kept_in_json():
    from sim.flight.analyze import rank_text
    assert rank_text(range(2_000_000)) == "[0-1999999]"
    many = list(range(0, 100, 2))            # 50 single ranks: 16 shown, the rest counted
    assert rank_text(many).endswith(", ... 34 more]") and rank_text(many).startswith("[0, 2, 4")


def test_report_folder_holding_an_input_is_refused_before_anything_is_written(tmp_path):
    measured = tmp_path / "report.html"
    measured.write_text(open(published(*A100_LOG)).read())
    p = collsim("compare", "-m", str(measured), "-t", "fully-connected:n=2,bandwidth_GBps=240,kind=nvlink",
                "--report", str(tmp_path))
    assert p.returncode != 0 and "would write over" in p.stderr
    assert sorted(os.listdir(tmp_path)) == ["report.html"]        # nothing written, the input intact


def test_bench_topology_name_gets_a_pointer_to_calibrate():
    with pytest.raises(CollsimError, match="calibrate"):
        load_topology("local:gloo:2")


def test_rank_zero_timeout_names_the_ranks_that_never_joined(monkeypatch, capsys):
    from real.measure import worker
    from real.measure.launchers import Job as LaunchJob
    job = LaunchJob(launcher="mpi", rank=0, world=3, local_rank=0, local_world=None, master_addr="10.0.0.1",
                    master_port=29571, serve_store=True)

    class DistStoreError(RuntimeError):
        pass
    monkeypatch.setenv("RANK", "0")
    worker._failed(DistStoreError("wait timeout after 30000ms, keys: /collsim/join/answer/1, /collsim/join/answer/2"), job)
    err = capsys.readouterr().err
    assert "rank(s) 1, 2 never joined" in err and "is rank 0 running" not in err
