"""Profiler traces: a CPU trace recorded here (two gloo ranks, known calls) and the published GPU traces.

Expected values come from the recording script's own parameters and from ../shared/traces/SOURCES.md
(counts and element sizes its authors read from the files), never from this reader's output.
"""
import json
from collections import Counter

import pytest
from record_gloo_trace import CALLS
from tracedata import published

from sim.evidence.kineto import parse_kernel, read_trace
from sim.evidence.load import read_job


@pytest.mark.parametrize("name, want", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", ("all_reduce", "ring", "LL")),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ("all_reduce", "ring", "LL")),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ("all_gather", "ring", "LL")),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL128", ("reduce_scatter", "ring", "LL128")),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", ("broadcast", "ring", "LL")),
    ("ncclKernel_Reduce_TREE_SIMPLE_Sum_half", ("reduce", "tree", "Simple")),
    ("ncclDevKernel_AllReduce_Sum_f32_NVLS_TREE_SIMPLE", ("all_reduce", "nvls_tree", "Simple")),
    ("ncclDevKernel_AllReduce_Sum_f32_COLLNET_DIRECT_SIMPLE", ("all_reduce", "collnet_direct", "Simple")),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", ("sendrecv", "p2p", None)),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)", ("all_reduce", None, None)),
])
def test_kernel_names_old_and_new(name, want):
    assert parse_kernel(name) == want


def test_compute_kernels_are_not_communication():
    assert parse_kernel("ampere_sgemm_128x64_tn") is None
    assert parse_kernel("void at::native::vectorized_elementwise_kernel<4>") is None


def test_recorded_gloo_trace_has_the_calls_made(gloo_trace):
    job = read_job([str(gloo_trace)])
    assert job.ranks() == [0, 1]
    for rank in (0, 1):
        calls = [c for c in job.calls if c.rank == rank]
        assert Counter((c.op, c.nbytes) for c in calls) == Counter(CALLS)
        assert all(c.group_size == 2 and c.backend == "gloo" for c in calls)
        assert all(c.duration_us > 0 and c.launch_us <= c.start_us for c in calls)
        assert all(c.nccl_algorithm is None for c in calls)  # gloo: no NCCL choice to read


def test_cli_json_lists_the_recorded_collectives(gloo_trace, cli):
    code, out, err = cli("trace", gloo_trace, "--topology", "switch:n=2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    got = {(c["collective"], c["nbytes"]): c for c in doc["collectives"]}
    assert {k: c["calls"] for k, c in got.items()} == CALLS
    for c in doc["collectives"]:
        assert c["ranks"] == [0, 1] and c["measured_us"] > 0 and c["predicted_us"] > 0
        assert c["nccl_algorithm"] is None and c["nccl_protocol"] is None
        assert c["measured_min_us"] <= c["measured_us"] <= c["measured_max_us"]
    # all_gather: torch's 16 KiB per rank is nccl-tests' 32 KiB on two ranks
    assert got[("all_gather", 16384)]["nccl_tests_nbytes"] == 32768
    assert got[("all_reduce", 4096)]["nccl_tests_nbytes"] == 4096
    assert doc["step"]["span_us"] > 0 and 0 < doc["step"]["comm_share"] <= 1


def test_hta_resnet_trace():
    job = read_job([str(published("kineto", "hta_resnet_a100x2", "nccl_data.json.gz"))])
    ops = Counter(c.op for c in job.calls)
    assert ops == {"all_reduce": 15, "broadcast": 6}  # SOURCES.md: 15 AllReduce and 6 Broadcast kernels
    ar = {c.nbytes for c in job.calls if c.op == "all_reduce"}
    assert ar == {4 * n for n in (2_049_000, 2_431_040, 6_563_840, 6_637_568, 7_875_584)}
    assert {c.nbytes for c in job.calls if c.op == "broadcast"} == {53 * 8, 53_120 * 4}
    assert all((c.nccl_algorithm, c.nccl_protocol, c.choice_source) == ("ring", "LL", "kernel name") for c in job.calls)
    assert all(c.group_size == 2 and c.group_ranks == (0, 1) for c in job.calls)
    durations = sorted(c.duration_us for c in job.calls if c.op == "all_reduce")
    assert 1_600 < durations[0] and durations[-1] < 6_100  # SOURCES.md: 1.69-5.99 ms


def test_param_dlrm_pair_of_ranks():
    job = read_job([str(published("kineto", "param_dlrm_v100x8"))])
    assert job.ranks() == [0, 1] and job.world_size == 8
    for rank in (0, 1):
        calls = [c for c in job.calls if c.rank == rank]
        assert Counter(c.op for c in calls) == {"all_to_all": 5, "all_reduce": 3}
        assert {c.nbytes for c in calls if c.op == "all_reduce"} == {112 * 4, 226_960 * 4, 394_241 * 4}
        assert all((c.nccl_algorithm, c.nccl_protocol) == ("p2p", None) for c in calls if c.op == "all_to_all")  # SendRecv names no protocol
        assert all(c.group_size == 8 for c in calls)
    assert job.compute.get(0)  # GPU compute kernels recorded: exposed time can be computed


def test_hta_trace_diff_rank3():
    job = read_job([str(published("kineto", "hta_trace_diff_a100x8", "control.json.gz"))])
    assert job.ranks() == [3]
    assert Counter(c.op for c in job.calls) == {"all_to_all": 42, "all_reduce": 18}
    assert {c.nbytes for c in job.calls if c.op == "all_reduce"} == {4 * n for n in (267_040, 4_432_073, 45_310_188)}


def test_vllm_b200_symmetric_memory_is_not_nccl():
    job = read_trace(str(published("kineto", "tracelens_vllm_b200x8", "eager_trace.json.gz")))
    ag = [c for c in job.calls if c.op == "all_gather"]
    assert len(ag) == 1 and ag[0].nbytes == 25_136 * 2 and ag[0].group_size == 8
    assert (ag[0].nccl_algorithm, ag[0].nccl_protocol) == ("ring", "LL")
    ar = [c for c in job.calls if c.op == "all_reduce"]
    assert len(ar) == 73 and all(c.backend == "symm_mem" and c.nccl_algorithm is None for c in ar)


def test_every_published_trace_reports_nccl_choices(cli):
    folder = published("kineto")
    for path in sorted(p for d in folder.iterdir() if d.is_dir() for p in d.iterdir()):
        code, out, err = cli("trace", path, "--topology", "dgx-h100", "--format", "json")
        assert code == 0, (path, err)
        doc = json.loads(out)
        assert any(c["nccl_algorithm"] and c["nccl_protocol"] for c in doc["collectives"]), path
        assert doc["agreement"]["calls"] > 0 and doc["agreement"]["caveat"]  # kernel names are hints


def _write(tmp_path, events):
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": events}))
    return str(p)


def _launch(ts, name, ext, nelems):
    return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": ts, "dur": 20.0, "pid": 1, "tid": 1,
            "args": {"External id": ext, "Collective name": name, "In msg nelems": nelems, "dtype": "Float", "Group size": 2}}


def test_a_generic_kernel_takes_the_call_issued_before_it(tmp_path):
    events = [_launch(100.0, "allreduce", 1, 256),
              {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
               "ts": 130.0, "dur": 50.0, "pid": 0, "tid": 7, "args": {}}]
    (c,) = read_trace(_write(tmp_path, events)).calls
    assert (c.op, c.nbytes, c.duration_us, c.nccl_algorithm, c.launch_us) == ("all_reduce", 1024, 50.0, None, 100.0)


def test_external_id_of_another_kind_is_not_trusted(tmp_path):
    # old traces number kernels' External ids apart from the ops': id 1 here is an all_to_all's, by chance
    events = [_launch(100.0, "all_to_all", 1, 64), _launch(200.0, "allreduce", 2, 256),
              {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "ts": 230.0, "dur": 40.0,
               "pid": 0, "tid": 7, "args": {"External id": 1}}]
    calls = {c.op: c for c in read_trace(_write(tmp_path, events)).calls}
    assert (calls["all_reduce"].nbytes, calls["all_reduce"].duration_us, calls["all_reduce"].launch_us) == (1024, 40.0, 200.0)
    assert calls["all_to_all"].duration_us is None  # issued, its kernel not recorded
