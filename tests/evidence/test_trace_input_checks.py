"""What ``collsim trace`` and ``plan --from-trace`` do with evidence that is damaged, mislabelled or mixed:
times no profiler records, Open MPI-tagged logs, collsim's own flight dumps, traces of two jobs, and a
recorded step the model does not reproduce. Expected values come from the files written here (or from
../shared/traces/SOURCES.md), never from a snapshot of collsim's output."""
import json
import pickle
import re

import pytest
from tracedata import published

from sim import simulate
from sim.evidence.load import _sniff, read_job
from sim.evidence.nccl_log import log_job, parse_log

ALLREDUCE_1M = {"Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144, "Group size": 2,
                "dtype": "Float", "Process Group Ranks": "[0, 1]"}


def _one_line_error(cli, *args):
    code, _out, err = cli(*args)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


def _gpu_trace(path, kernel_dur=300.0, rank=0, world=2, gpu="NVIDIA A100-SXM4-80GB", kernel=None, extra=()):
    """One rank's step 0..1000 us: a compute kernel 0..200 and an NCCL all_reduce of 1 MiB (float, 2 ranks)
    starting at 100 us and lasting ``kernel_dur`` (written as given: a float, or raw JSON text)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0, "dur": 1000.0, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "ts": 0.0, "dur": 200.0, "pid": 0, "tid": 7},
        {"ph": "X", "cat": "kernel", "pid": 0, "tid": 9, "args": ALLREDUCE_1M, "ts": 100.0, "dur": "@DUR@",
         "name": kernel or "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"},
        *extra]
    text = json.dumps({"deviceProperties": [{"id": 0, "name": gpu}],
                       "distributedInfo": {"rank": rank, "world_size": world}, "traceEvents": events})
    path.write_text(text.replace('"@DUR@"', kernel_dur if isinstance(kernel_dur, str) else repr(float(kernel_dur))))
    return path


# ---- 5: times no profiler records ----------------------------------------------------------------------
@pytest.mark.parametrize("dur", ["-2129.38", "1e300", "1" + "0" * 400, "NaN"])
def test_impossible_kernel_durations_are_refused_naming_the_event(cli, tmp_path, dur):
    trace = _gpu_trace(tmp_path / "rank0.json", dur)
    line = _one_line_error(cli, "trace", trace, "--topology", "switch:n=2")
    assert "ncclDevKernel_AllReduce" in line and "dur" in line and "export it again" in line


def test_a_day_long_event_is_refused_but_a_long_real_one_is_read(cli, tmp_path):
    day_us = 86_400e6
    assert "dur" in _one_line_error(cli, "trace", _gpu_trace(tmp_path / "a.json", day_us * 1.01), "-t", "switch:n=2")
    code, out, err = cli("trace", _gpu_trace(tmp_path / "b.json", 600e6), "-t", "switch:n=2", "--format", "json")
    assert code == 0, err  # a 10-minute kernel (a watchdog's timeout) is slow, not impossible
    assert json.loads(out)["collectives"][0]["measured_us"] == 600e6


def test_absurd_timestamp_is_refused(cli, tmp_path):
    bad = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1e300, "dur": 1.0, "pid": 1, "tid": 1}
    line = _one_line_error(cli, "trace", _gpu_trace(tmp_path / "t.json", extra=[bad]), "-t", "switch:n=2")
    assert "aten::mm" in line and "ts" in line


def test_damaged_flight_clocks_are_counted_and_not_used(cli, tmp_path):
    def entry(seq, dur_ms, created_ns):
        return {"record_id": seq, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
                "profiling_name": "nccl:all_reduce", "time_created_ns": created_ns, "duration_ms": dur_ms,
                "input_sizes": [[1024]], "input_dtypes": ["Float"], "state": "completed", "retired": True,
                "is_p2p": False}
    for rank, durs in ((0, (-5, 1.5, 2.5)), (1, (1e308, 1.5, 2.5))):
        dump = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_completed_collective": 3}},
                "entries": [entry(s + 1, d, 10**30 if (rank, s) == (1, 1) else 10**12 + s) for s, d in enumerate(durs)]}
        (tmp_path / f"rank_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    code, out, err = cli("trace", tmp_path, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    (row,) = doc["collectives"]
    # the valid durations are 1.5 and 2.5 ms on each rank; -5 ms and 1e308 ms are not used
    assert (row["measured_min_us"], row["measured_max_us"]) == (1500.0, 2500.0)
    (note,) = [n for n in doc["notes"] if "clocks no recorder writes" in n]
    assert note.split(": ")[1].startswith("3 flight-recorder entries")  # two durations and one 1e30 ns clock


# ---- 7: Open MPI's tagged logs are not JSON --------------------------------------------------------------
def test_sniff_tells_an_open_mpi_log_from_a_json_array(tmp_path):
    cases = {"mpi.log": "[1,0]<stdout>:# nThread 1 nGpus 1\n[1,0]<stdout>:host:1:1 [0] NCCL INFO NCCL version 2.22.3\n",
             "mpi.txt": "[1,3]<stderr>:warning\n", "array.json": '[{"ph": "X", "name": "a", "ts": 1, "dur": 1}]',
             "empty_array.json": "[ ]", "object.json": '{"traceEvents": []}'}
    want = {"mpi.log": "log", "mpi.txt": "log", "array.json": "trace", "empty_array.json": "trace", "object.json": "trace"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert _sniff(str(tmp_path / name)) == want[name], name


def test_an_open_mpi_tagged_log_is_read_as_a_log(cli, tmp_path):
    p5 = published("nccl_logs", "aws_p5_h100x16_efa", "nccl-test-output-v2.22.3-1.log")
    lines = p5.read_text().splitlines(keepends=True)
    first = next(i for i, l in enumerate(lines) if l.startswith("[1,"))
    stripped = tmp_path / "p5_nowarn.log"
    stripped.write_text("".join(lines[first:]))  # without the ssh warnings, the file starts "[1,0]<stdout>:"
    assert stripped.read_text().startswith("[1,0]<stdout>:")
    code, out, err = cli("trace", stripped, "--format", "json")
    assert code == 0, err
    (log,) = json.loads(out)["logs"]
    assert (log["version"], log["nranks"], log["nnodes"]) == ("2.22.3", 16, 2)  # SOURCES.md: NCCL 2.22.3, 2x8 H100


# ---- 8: collsim's own flight dumps (rank_N.json) ---------------------------------------------------------
def _json_dump(rank, world=2, seqs=(1, 2)):
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
            "pg_status": {"0": {"last_enqueued_collective": max(seqs), "last_completed_collective": max(seqs)}},
            "entries": [{"record_id": s, "process_group": ["0", "default_pg"], "collective_seq_id": s,
                         "profiling_name": "nccl:all_reduce", "time_created_ns": 10**12 + s * 10**6 + rank,
                         "duration_ms": 0.25 * s, "input_sizes": [[4096]], "input_dtypes": ["Float"],
                         "state": "completed", "retired": True, "is_p2p": False} for s in seqs]}


def test_json_flight_dumps_named_rank_n_json_are_read(cli, tmp_path):
    for rank in (0, 1):
        (tmp_path / f"rank_{rank}.json").write_text(json.dumps(_json_dump(rank), indent=1))
    code, out, err = cli("trace", tmp_path, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)["collectives"]
    assert (row["collective"], row["nbytes"], row["calls"], row["ranks"]) == ("all_reduce", 4096 * 4, 2, [0, 1])
    assert (row["measured_min_us"], row["measured_max_us"]) == (250.0, 500.0)


def test_collsim_reads_the_dumps_flight_simulate_writes(cli, tmp_path):
    dumps = tmp_path / "sd"
    code, _, err = cli("flight", "simulate", "ddp-skip", "--dump", dumps)
    assert code == 0, err
    assert sorted(p.name for p in dumps.iterdir()) == [f"rank_{r}.json" for r in range(4)]  # ddp-skip: world_size 4
    code, out, err = cli("trace", dumps, "--topology", "dgx-h100:gpus_per_node=4", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["ranks"] == [0, 1, 2, 3]


def test_profiler_traces_named_rank_n_json_stay_traces(cli, tmp_path):
    for rank in (0, 1):
        _gpu_trace(tmp_path / f"rank_{rank}.json", rank=rank)
    job = read_job([str(tmp_path)])
    assert job.ranks() == [0, 1] and {c.duration_us for c in job.calls} == {300.0}


# ---- 9: one job per command; the recorded step against the model ---------------------------------------
def test_traces_of_different_jobs_are_refused_naming_both(cli, tmp_path):
    a = _gpu_trace(tmp_path / "a.json", world=2, gpu="NVIDIA A100-PG509-200")
    b = _gpu_trace(tmp_path / "b.json", rank=1, world=8, gpu="Tesla V100-SXM2-32GB")
    line = _one_line_error(cli, "trace", a, b, "--topology", "switch:n=8")
    assert "a.json" in line and "b.json" in line and "world size 2" in line and "world size 8" in line
    assert "V100" in line and "different jobs" in line
    c = _gpu_trace(tmp_path / "c.json", rank=1, world=2, gpu="Tesla V100-SXM2-32GB")
    assert "GPU" in _one_line_error(cli, "trace", a, c, "--topology", "switch:n=2")
    d = _gpu_trace(tmp_path / "d.json", rank=1, world=2, gpu="NVIDIA A100-PG509-200")
    code, _, err = cli("trace", a, d, "--topology", "switch:n=2")
    assert code == 0, err


def test_the_same_trace_twice_is_counted_once(cli, tmp_path):
    a = _gpu_trace(tmp_path / "a.json")
    b = tmp_path / "b.json"
    b.write_text(a.read_text())
    code, out, err = cli("trace", a, b, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["collectives"][0]["calls"] == 1
    assert doc["step"]["comm_share"] == pytest.approx(300.0 / 1000.0)  # one 300 us kernel in a 1000 us step
    assert any("counted once" in n for n in doc["notes"])


def test_whatif_warns_when_the_recording_is_far_outside_the_models_range(cli, tmp_path):
    trace = _gpu_trace(tmp_path / "rank0.json", 300.0)
    p = simulate("all_reduce", 1 << 20, "switch:n=2").time_us
    assert p < 300.0 / 5  # the recorded kernel is many times the model's time
    code, out, err = cli("plan", "--from-trace", trace, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    (warning,) = json.loads(out)["warnings"]
    assert "0.300 ms" in warning and "80% range" in warning and "waiting" in warning
    assert "rank(s) 0 of 2" in warning  # only rank 0 of the 2-rank job was traced
    code, out, _ = cli("plan", "--from-trace", trace, "--topology", "switch:n=2")
    assert len([l for l in out.splitlines() if l.startswith("warning:")]) == 1


def test_whatif_is_silent_when_the_recording_matches_the_model(cli, tmp_path):
    p = simulate("all_reduce", 1 << 20, "switch:n=2").time_us
    trace = _gpu_trace(tmp_path / "rank0.json", p)
    code, out, err = cli("plan", "--from-trace", trace, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == []


def test_whatif_names_another_gpu(cli, tmp_path):
    trace = _gpu_trace(tmp_path / "rank0.json", 3000.0, gpu="Tesla V100-SXM2-32GB")
    code, out, err = cli("plan", "--from-trace", trace, "--topology", "dgx-a100:gpus_per_node=2", "--format", "json")
    assert code == 0, err
    (warning,) = json.loads(out)["warnings"]
    assert "Tesla V100-SXM2-32GB" in warning and "hardware" in warning


# ---- related: what the report did not say ------------------------------------------------------------------
def test_symmetric_memory_kernels_are_named_as_not_nccl(cli, tmp_path):
    trace = _gpu_trace(tmp_path / "rank0.json", kernel="void (anonymous namespace)::multimem_all_reduce_kernel<float, 16>(float*)")
    code, out, err = cli("trace", trace, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    assert any("not NCCL" in n and "symmetric-memory" in n for n in json.loads(out)["notes"])


def test_mixed_nccl_versions_in_a_log_are_noted():
    text = ("h1:1:1 [0] NCCL INFO NCCL version 2.22.3+cuda12.2\n"
            "h1:2:2 [1] NCCL INFO NCCL version 2.18.1+cuda12.2\n"
            "h1:1:1 [0] NCCL INFO AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n")
    job = log_job(parse_log(text, "twover.log"))
    assert any(re.search(r"2\.22\.3.*2\.18\.1", n) for n in job.notes)


def test_a_log_without_per_call_lines_says_how_to_use_it(cli, tmp_path):
    log = tmp_path / "init.log"
    log.write_text("h1:1:1 [0] NCCL INFO NCCL version 2.22.3+cuda12.2\n"
                   "h1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n")
    line = _one_line_error(cli, "trace", log)
    assert "per-call" in line and "--topology-from-log" in line and "ProfilerActivity" not in line
