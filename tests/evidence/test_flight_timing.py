"""Flight-recorder dumps as calls: the published 16-rank Megatron dumps (no timings) and a dump with
TORCH_NCCL_ENABLE_TIMING durations written here."""
import json
import pickle
from collections import Counter

from tracedata import published

from sim.evidence.flight_timing import read_flight_dir


def test_published_megatron_dumps():
    job = read_flight_dir(str(published("flight_recorder", "nvrx_megatron_moe_16rank_gpu_error_1st")))
    # SOURCES.md: 289 entries: _all_gather_base 89, all_to_all 44, _reduce_scatter_base 44, all_reduce 32,
    # send/recv 31/31, broadcast 18
    assert Counter(c.op for c in job.calls) == {"all_gather": 89, "all_to_all": 44, "reduce_scatter": 44,
                                                "all_reduce": 32, "send": 31, "recv": 31, "broadcast": 18}
    assert job.ranks() == list(range(16)) and job.world_size == 16
    assert all(c.duration_us is None for c in job.calls) and any("TORCH_NCCL_ENABLE_TIMING" in n for n in job.notes)
    a2a = [c for c in job.calls if c.op == "all_to_all"]
    assert any(c.nbytes == 4027 * 5120 * 2 for c in a2a)  # the reference's stuck all_to_all: 4027x5120 bf16


def test_lock_gil_dumps_ranks_without_entries():
    job = read_flight_dir(str(published("flight_recorder", "nvrx_megatron_moe_16rank_lock_gil_1st")))
    assert len(job.calls) == 142 and 9 not in job.ranks() and 14 not in job.ranks()


def _entry(seq, dur_ms, created_ns):
    return {"record_id": seq, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce", "time_created_ns": created_ns,
            "input_sizes": [[1024, 256]], "input_dtypes": ["Float"], "output_sizes": [[1024, 256]],
            "output_dtypes": ["Float"], "state": "completed", "time_discovered_started_ns": created_ns + 1000,
            "time_discovered_completed_ns": created_ns + 9_000_000, "retired": True, "timeout_ms": 600000,
            "is_p2p": False, "duration_ms": dur_ms}


def test_timed_dump_gives_durations_and_stragglers(tmp_path, cli):
    for rank in (0, 1):
        # rank 1 issues every call 30 ms late: past the 10 ms that flight-recorder clocks of two hosts may differ by
        late = 30_000_000 if rank == 1 else 0
        dump = {"version": "2.9", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3, "last_completed_collective": 3}},
                "entries": [_entry(s, 0.5 * s, 10**12 + s * 10**7 + late) for s in (1, 2, 3)]}
        (tmp_path / f"rank_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    code, out, err = cli("trace", tmp_path, "--topology", "dgx-h100", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    (row,) = doc["collectives"]
    assert (row["collective"], row["nbytes"], row["calls"], row["ranks"]) == ("all_reduce", 1024 * 256 * 4, 3, [0, 1])
    assert row["measured_us"] == 1000.0 and row["measured_min_us"] == 500.0  # duration_ms 0.5, 1.0, 1.5
    assert doc["stragglers"]["named"] == [1]
    late = {t["rank"]: t["late_us_median"] for t in doc["stragglers"]["ranks"]}
    assert late == {0: 0.0, 1: 30000.0}


def test_calls_are_matched_by_sequence_number_not_buffer_position(tmp_path, cli):
    # PyTorch's ring buffer drops a rank's oldest entries: rank 1 kept calls 2-4, rank 0 calls 1-4, both
    # issuing each call at the same instant. Paired by position, rank 1's k-th entry (call k+1, issued 10 ms
    # later) made it a straggler; paired by collective_seq_id, nobody is late
    for rank, seqs in ((0, (1, 2, 3, 4)), (1, (2, 3, 4))):
        dump = {"version": "2.9", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_enqueued_collective": 4, "last_started_collective": 4,
                                    "last_completed_collective": 4}},
                "entries": [_entry(s, 0.5, 10**12 + s * 10**7) for s in seqs]}
        (tmp_path / f"rank_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    code, out, err = cli("trace", tmp_path, "--topology", "dgx-h100", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    late = {t["rank"]: (t["matched_calls"], t["late_us_median"]) for t in doc["stragglers"]["ranks"]}
    assert doc["stragglers"]["named"] == [] and late == {0: (3, 0.0), 1: (3, 0.0)}


def test_the_dumps_nccl_release_is_the_one_predicted_and_gzipped_dumps_are_read(tmp_path, cli):
    # PyTorch records NCCL's release beside the dump's version ('nccl_version': '2.21.5'): modelled with
    # 2.21's rules; the same dumps gzipped (_dump_N.gz) are the same job
    import gzip
    for rank in (0, 1):
        dump = {"version": "2.9", "nccl_version": "2.21.5",
                "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                "pg_status": {"0": {"last_enqueued_collective": 1, "last_started_collective": 1,
                                    "last_completed_collective": 1}},
                "entries": [_entry(1, 0.5, 10**12)]}
        (tmp_path / f"_dump_{rank}.gz").write_bytes(gzip.compress(pickle.dumps(dump, protocol=2)))
    code, out, err = cli("trace", tmp_path, "--topology", "dgx-h100", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["nccl_version"] == "2.21" and any("records NCCL 2.21.5" in n for n in doc["notes"])
    assert doc["collectives"][0]["ranks"] == [0, 1]
