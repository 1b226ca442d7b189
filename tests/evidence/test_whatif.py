"""``collsim plan --from-trace``: a hand-made GPU trace whose what-if is known by arithmetic."""
import json

import pytest

from sim import simulate


def _trace(path):
    """Rank 0, world 2: step 0..1000 us; an NCCL all_reduce kernel 100..400 (1 MiB of float over 2 ranks);
    a compute kernel 0..200 covers its first 100 us, so 200 us of it are exposed."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0, "dur": 1000.0, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "ts": 0.0, "dur": 200.0, "pid": 0, "tid": 7},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
         "ts": 100.0, "dur": 300.0, "pid": 0, "tid": 9,
         "args": {"Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144, "Group size": 2,
                  "dtype": "Float", "Process Group Ranks": "[0, 1]"}},
    ]
    path.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": events}))
    return path


def test_step_on_another_topology(cli, tmp_path):
    trace = _trace(tmp_path / "rank0.json")
    code, out, err = cli("plan", "--from-trace", trace, "--topology", "switch:n=2", "--vs", "switch:n=2,bandwidth_GBps=1",
                         "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rec, a, b = doc["configurations"]
    assert (rec["step_us"], rec["comm_us"], rec["exposed_comm_us"]) == (1000.0, 300.0, 200.0)
    for cfg, spec in ((a, "switch:n=2"), (b, "switch:n=2,bandwidth_GBps=1")):
        p = simulate("all_reduce", 1 << 20, spec).time_us
        assert cfg["comm_us"] == pytest.approx(p)
        assert cfg["step_us"] == pytest.approx(1000.0 - 200.0 + max(0.0, p - 100.0))
    assert doc["collectives"][0]["overlapped_us"] == 100.0


def test_from_trace_refuses_what_it_cannot_do(cli, tmp_path):
    trace = _trace(tmp_path / "rank0.json")
    for extra in (["--sweep", "nodes=1,2"], ["--steps", "10"], []):
        args = ["plan", "--from-trace", trace, *(["--topology", "switch:n=2"] if extra else []), *extra]
        code, _, err = cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1
