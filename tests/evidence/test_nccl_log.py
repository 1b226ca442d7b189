"""NCCL debug logs: the published logs of four systems (facts from ../shared/traces/SOURCES.md), lines as
machines print them (MPI prefixes, rows cut by other lines), and the topology a log describes."""
import json

import pytest
from tracedata import published

from sim.errors import CollsimError
from sim.evidence.nccl_log import log_job, parse_log, read_log, topology_spec
from sim.presets import load_topology

A100 = ("nccl_logs", "a100pcie_nvlink_x2_single_node")


def test_a100_pcie_log_per_call_choice_and_table():
    log = read_log(str(published(*A100, "nccl.log")))
    assert (log.version, log.nranks, log.nnodes, log.gpus_per_node) == ("2.27.7", 2, 1, 2)
    assert (log.rings, log.coll_channels, log.nvls_channels) == (24, 24, 0)
    assert len(log.calls) == 495  # SOURCES.md: 495 "Bytes -> Algo RING proto SIMPLE" lines
    assert {(c.op, c.nccl_algorithm, c.nccl_protocol) for c in log.calls} == {("all_reduce", "ring", "Simple")}
    assert log.gpu == "NVIDIA A100 80GB PCIe" and log.nvlink_GBps == 240.0
    # nccl-tests 8 MiB .. 8 GiB, rows cut by INFO lines of the same call, re-joined
    assert [r["nbytes"] for r in log.nccl_tests] == [8 << 20 << i for i in range(11)]
    assert log.nccl_tests[0]["busbw_GBps"] == pytest.approx(100.66)
    assert log.nccl_tests[-1]["busbw_GBps"] == pytest.approx(216.6, abs=0.2)


def test_a100_fault_log_sees_two_channels_and_a_slow_link():
    log = read_log(str(published(*A100, "nccl-fault.log")))
    assert (log.rings, log.coll_channels) == (2, 2) and log.nvlink_GBps == 20.0
    assert {(c.nccl_algorithm, c.nccl_protocol) for c in log.calls} == {("ring", "Simple")}
    avg = sum(r["busbw_GBps"] for r in log.nccl_tests) / len(log.nccl_tests)
    assert 25 < avg < 32  # SOURCES.md: busbw about 28.6 GB/s


def test_aws_p5_h100_log_with_mpi_prefixes():
    log = read_log(str(published("nccl_logs", "aws_p5_h100x16_efa", "nccl-test-output-v2.22.3-1.log")))
    assert (log.version, log.nranks, log.nnodes, log.gpus_per_node) == ("2.22.3", 16, 2, 8)
    assert (log.rings, log.nvls, log.nvls_heads, log.nics, log.provider) == (16, True, 8, 32, "efa")
    assert len(log.nccl_tests) == 32  # 8 B .. 16 GiB, factor 2, rows split into [1,0]<stdout>: fragments
    assert log.nccl_tests[-1]["nbytes"] == 16 << 30
    assert max(r["busbw_GBps"] for r in log.nccl_tests) == pytest.approx(488, abs=1)
    spec, _why = topology_spec(log)
    assert "nvls=1" in spec and "fabric=efa" in spec and load_topology(spec).nranks == 16
    # the log's "NET/OFI NIC group G device #k" lines: 32 interfaces in 8 groups of 4, and its channels run
    # "via NET/AWS Libfabric/0" .. "/7": NCCL sees 8 devices of 4 x 100 Gb/s
    assert {g: len(d) for g, d in log.nic_groups.items()} == {g: 4 for g in range(8)}
    assert "nics_per_node=8" in spec and "nic_gbps=400" in spec


def test_the_p5_nccl_tests_rows_are_not_its_nccl_info_lines():
    # NCCL_DEBUG=INFO lines interleave the table: "NCCL INFO Channel 00/16 :    0   7   6 ..." must not be
    # read as a row (it parsed as a size of 5 with 12 wrong results); the file names no *_perf binary, so
    # validate reads the collective from its columns, and scores with the NCCL release the log printed (2.22.3)
    from sim.io.nccl_tests_format import parse_nccl_tests
    path = str(published("nccl_logs", "aws_p5_h100x16_efa", "nccl-test-output-v2.22.3-1.log"))
    text = open(path).read()
    sizes = [r["nbytes"] for r in parse_nccl_tests(text)]
    assert sizes == [8 << i for i in range(32)]
    import subprocess
    import sys
    spec = "dgx-h100:nodes=2,nics_per_node=8,nic_gbps=400,fabric=efa2"
    # busbw/algbw is 1.875 = 2(16-1)/16 on every row of 1 GB/s and more: only all_reduce's, and it says so
    p = subprocess.run([sys.executable, "-m", "sim", "validate", path, "-t", spec, "--format", "json"],
                       capture_output=True, text=True, timeout=300)
    import json
    assert p.returncode == 0 and "says all_reduce" in p.stderr, p.stderr
    case = json.loads(p.stdout)["cases"][0]
    assert case["nccl_version"] == "2.22" and case["collective"] == "all_reduce"


def test_aws_p4d_log_older_nccl():
    log = read_log(str(published("nccl_logs", "aws_p4d_a100x16_efa", "README_launcher_log_lines124-719.txt")))
    assert (log.nranks, log.rings, log.coll_channels, log.provider) == (16, 8, 8, "efa")
    assert len(log.nccl_tests) == 30 and log.nccl_tests[-1]["busbw_GBps"] == pytest.approx(43.81)
    assert load_topology(topology_spec(log)[0]).nranks == 16


def test_polaris_log_training_job():
    log = read_log(str(published("nccl_logs", "alcf_polaris_a100x8_slingshot", "with_aws.log")))
    assert (log.nranks, log.nnodes, log.gpus_per_node, log.rings, log.nvls) == (8, 2, 4, 4, False)
    assert log.provider == "cxi" and log.nccl_tests == []
    spec, _ = topology_spec(log)
    assert spec.startswith("hgx-a100-4:") and "fabric=slingshot" in spec and load_topology(spec).nranks == 8


def test_cli_runs_on_a_log_without_topology(cli, tmp_path):
    out = tmp_path / "spec.txt"
    code, text, err = cli("trace", published(*A100, "nccl.log"), "--format", "json", "--topology-out", out)
    assert code == 0, err
    doc = json.loads(text)
    assert doc["topology_spec"] == out.read_text().strip() and doc["topology_spec"].startswith("fully-connected:n=2")
    assert doc["agreement"]["calls"] == 495 and doc["agreement"]["sources"] == {"NCCL log": 495}
    row = next(c for c in doc["collectives"] if c["nbytes"] == 8 << 20)
    assert row["measured_us"] == pytest.approx(83.33)  # the log's nccl-tests row, out of place
    assert (row["nccl_algorithm"], row["nccl_protocol"], row["nccl_choice_source"]) == ("ring", "Simple", "NCCL log")


def test_interleaved_and_prefixed_lines():
    lines = [
        "[1,0]<stdout>:h1:5:5 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "[1,0]<stdout>:h1:5:9 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "[1,1]<stdout>:h1:6:9 [1] NCCL INFO comm 0xb rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0",
        "[1,0]<stdout>:# Collective test starting: all_gather_perf",
        "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "[1,0]<stdout>:     1048576        131072     float    none      -1h1:5:5 [0] NCCL INFO AllGather: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}",
        "[1,0]<stdout>:    20.00   52.43   26.21      0h1:6:6 [1] NCCL INFO AllGather: opCount 1 sendbuff 0x1 recvbuff 0x2 count 131",  # cut
        "[1,0]<stdout>:    19.00   55.19   27.59      0",
        "h1:5:5 [0] NCCL INFO AllGather: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}",
    ]
    log = parse_log("\n".join(lines), "x.log")
    assert (log.version, log.nranks, log.nccl_tests_collective) == ("2.21.5", 2, "all_gather")
    assert [(r["nbytes"], r["time_us"], r["inplace_time_us"]) for r in log.nccl_tests] == [(1048576, 20.0, 19.0)]
    job = log_job(log)
    # NCCL's 1 MiB is the gathered output: torch's input per rank is half of it; the table's time goes with it
    assert [(c.op, c.nbytes, c.nccl_tests_nbytes, c.nccl_protocol, c.duration_us) for c in job.calls] == \
        [("all_gather", 524288, 1048576, "LL128", 20.0)] * 2


def test_not_a_log(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("hello\nworld\n")
    with pytest.raises(CollsimError, match="not an NCCL debug log"):
        read_log(str(p))
    with pytest.raises(CollsimError, match="no rank count"):
        topology_spec(parse_log("h:1:1 [0] NCCL INFO NCCL version 2.20.5", "y.log"))


def test_numeric_tuning_lines_of_older_nccl():
    # NCCL_ALGO_TREE=0, RING=1; NCCL_PROTO_LL=0, LL128=1, SIMPLE=2 (src/include/devcomm.h)
    lines = [
        "n1:7:7 [0] NCCL INFO comm 0xa rank 0 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE",
        "n1:7:7 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 comm 0xa [nranks=8] stream 0x3",
        "n1:7:7 [0] NCCL INFO 4096 Bytes -> Algo 0 proto 0 time 12.5",
        "n1:7:7 [0] NCCL INFO Broadcast: opCount 4 sendbuff 0x1 recvbuff 0x2 count 1048576 datatype 0 op 0 root 0 comm 0xa [nranks=8] stream 0x3",
        "n1:7:7 [0] NCCL INFO 1048576 Bytes -> Algo 1 proto 2 time 40.1",
    ]
    log = parse_log("\n".join(lines), "old.log")
    assert log.nranks == 8
    assert [(c.op, c.nbytes, c.nccl_algorithm, c.nccl_protocol) for c in log.calls] == \
        [("all_reduce", 4096, "tree", "LL"), ("broadcast", 1048576, "ring", "Simple")]


def _run_log(version: str, rings: int, time_us: float) -> str:
    return "\n".join([
        f"h1:5:5 [0] NCCL INFO NCCL version {version}+cuda12.4",
        "h1:5:9 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        f"h1:5:9 [0] NCCL INFO {rings} coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer",
        "# Collective test starting: all_reduce_perf",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        f"     1048576        262144     float     sum      -1   {time_us:.2f}   1.00   1.00      0   {time_us:.2f}   1.00   1.00      0",
        "h1:5:5 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..1}",
    ]) + "\n"


def test_two_runs_logs_are_refused_not_averaged(tmp_path, cli):
    # two nccl-tests runs each print a table: pooled, 1 MiB would be measured at the mean of 40 and 300 us,
    # which neither run took (a tester's trial: 170,262 us where the runs took 39,658 and 300,866)
    a, b, c = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    a.write_text(_run_log("2.21.5", 24, 40.0))
    b.write_text(_run_log("2.21.5", 2, 300.0))
    c.write_text(_run_log("2.21.5", 24, 40.0))
    code, out, err = cli("trace", a, b, "-t", "dgx-a100:gpus_per_node=2")
    assert code == 2 and "two runs" in err and "coll channels 24 vs 2" in err and err.count("\n") == 1
    code, out, err = cli("trace", a, c, "-t", "dgx-a100:gpus_per_node=2")
    assert code == 2 and "the same log twice" in err
    code, out, err = cli("trace", a, "-t", "dgx-a100:gpus_per_node=2", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["collectives"][0]["measured_us"] == 40.0
