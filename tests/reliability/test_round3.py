"""Hostile input, round 3: numbers through the validation layer from every entry, bounded work, right answers
or clear refusals, output places. Each CLI probe: exit 2 with one line naming the problem, or the answer."""
import json
import math

import pytest
from conftest import ROOT, refused

from sim.errors import CollsimError

WORKLOAD = f"{ROOT}/examples/workloads/ddp-1b.yaml"

HEAD = ("# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)\n#\n"
        + "".join(f"#  Rank {i:2d} Group  0 Pid {100 + i} on node0 device {i:2d} [0x07] NVIDIA A100-SXM4-80GB\n" for i in range(8))
        + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n")
ROW = "    33554432      8388608     float     sum      -1   400.00   83.89  125.83      {w}   400.00   83.89  125.83      0\n"


@pytest.mark.parametrize("args,words", [
    (["simulate", "-t", "ring:n=4", "-b", "1K", "-e", "1K", "--nchannels", "10000000000"], ["nchannels", "at most 256"]),
    (["simulate", "-t", "switch:n=4,bandwidth_GBps=5e12", "-b", "1K", "-e", "1K"], ["bandwidth_GBps", "at most"]),
    (["simulate", "-t", "dgx-a100:nodes=2,nic_gbps=1e300", "-b", "1K", "-e", "1K"], ["nic_gbps", "at most"]),
])
def test_flags_and_preset_numbers(user, args, words):
    refused(user(*args), *words)


@pytest.mark.parametrize("workload,words", [
    ("{builtin: ddp_step, world_size: 3000000, buckets: 2, steps: 1}", ["world_size 3000000", "at most 65536"]),
    ("{builtin: ddp_step, world_size: 6.5, buckets: 2, steps: 1}", ["world_size 6.5", "whole number"]),
    ("{world_size: 4, steps: 1.7, program: [wait]}", ["steps 1.7", "whole number"]),
    ("{world_size: 60000, steps: 10000, program: [wait]}", ["program items", "limit"]),
])
def test_flight_scenario_numbers(user, tmp_path, workload, words):
    (tmp_path / "s.yaml").write_text(f"workload: {workload}\nfaults: []\n")
    refused(user("flight", "simulate", "s.yaml", timeout=60), *words)


def test_flight_fault_rank_must_be_whole(user, tmp_path):
    (tmp_path / "s.yaml").write_text("workload: {builtin: ddp_step, world_size: 4, steps: 1}\n"
                                     "faults: [{kind: crash, rank: 1.7, at_us: 5}]\n")
    refused(user("flight", "simulate", "s.yaml"), "rank 1.7", "whole number")


def test_huge_integers_in_yaml_and_json(user, tmp_path):
    big = "9" * 6000
    (tmp_path / "t.yaml").write_text("nodes:\n  - {name: g0, kind: gpu}\n  - {name: g1, kind: gpu}\n"
                                     f"links:\n  - {{src: g0, dst: g1, bandwidth_GBps: {big}, latency_us: 1}}\n")
    refused(user("topo", "t.yaml"), "4300 digits")
    (tmp_path / "t.json").write_text('{"nodes": [], "links": [], "x": ' + big + "}")
    refused(user("topo", "t.json"), "4300 digits")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 10 ** 400, 1.5, True, -8])
def test_api_nbytes(value):
    import sim
    with pytest.raises(CollsimError, match="nbytes") as e:
        sim.simulate("all_reduce", value, "ring:n=4")
    assert isinstance(e.value, ValueError) and ("at most" in str(e.value) or "at least" in str(e.value))


def test_api_nbytes_whole_float_still_accepted():
    import numpy as np

    import sim
    assert sim.simulate("all_reduce", 1024.0, "ring:n=4").nbytes == 1024
    assert sim.simulate("all_reduce", np.int64(1024), "ring:n=4").nbytes == 1024   # a numpy sweep's sizes


def test_nccl_tests_rows_are_checked(user, tmp_path):
    (tmp_path / "huge.txt").write_text(HEAD + "  1" + "0" * 32 + "  25" + "0" * 30 + " float sum -1 900.0 74.57 130.49 0 900.0 74.57 130.49 0\n")
    refused(user("compare", "-m", "huge.txt", "-t", "dgx-a100"), "out of range", "1 PiB")
    (tmp_path / "wrong.txt").write_text(HEAD + ROW.format(w=3))
    refused(user("compare", "-m", "wrong.txt", "-t", "dgx-a100"), "#wrong is 3")
    two = HEAD.replace("".join(f"#  Rank {i:2d} Group  0 Pid {100 + i} on node0 device {i:2d} [0x07] NVIDIA A100-SXM4-80GB\n"
                               for i in range(4, 8)), "") + ROW.format(w=0) + HEAD + ROW.format(w=0)
    (tmp_path / "two.txt").write_text(two)
    refused(user("compare", "-m", "two.txt", "-t", "dgx-a100"), "4 and 8 ranks")


def test_many_rows_refused_while_reading(user, tmp_path):
    with open(tmp_path / "rows.txt", "w") as f:
        f.write(HEAD)
        f.writelines(f"{8 * i} {2 * i} float sum -1 10.0 1.0 1.0 0 10.0 1.0 1.0 0\n" for i in range(1, 70_001))
    refused(user("compare", "-m", "rows.txt", "-t", "dgx-a100", timeout=60), "65,536")


def test_deep_xml_refused_without_recursion(user, tmp_path):
    deep = ('<system version="1"><cpu numaid="0">' + '<pci busid="0000:01:00.0" class="0x060400">' * 3000
            + "</pci>" * 3000 + "</cpu></system>")
    (tmp_path / "deep.xml").write_text(deep)
    refused(user("topo", "deep.xml"), "nested deeper than 64")


def test_outputs_into_proc_or_under_a_file(user, tmp_path):
    refused(user("simulate", "-t", "ring:n=4", "-b", "1K", "-e", "1K", "--trace", "/proc/collsim_trace.json"), "/proc")
    (tmp_path / "afile").write_text("x")
    refused(user("simulate", "-t", "ring:n=4", "-b", "1K", "-e", "1K", "--trace", "afile/t.json"), "afile")


def test_flat_switch_routes_are_two_hops_and_fast():
    """On a switch every GPU route is g_i -> switch -> g_j (closed form); 3,000 GPUs route in well under a
    second per thousand routes (the full search took O(n log n) each)."""
    import time

    from sim.topology.files import topology_from_dict
    n = 3000
    topo = topology_from_dict({"nodes": [{"name": "sw", "kind": "switch"}] + [{"name": f"g{i}", "kind": "gpu"} for i in range(n)],
                               "links": [l for i in range(n) for l in ({"src": f"g{i}", "dst": "sw", "bandwidth_GBps": 50, "latency_us": 1},
                                                                       {"src": "sw", "dst": f"g{i}", "bandwidth_GBps": 50, "latency_us": 1})]})
    t = time.perf_counter()
    for i in range(n):
        j = (i + 1) % n
        route = topo.route(i, j)
        assert [topo.link_label(x) for x in route] == [f"{topo.nodes[topo.gpus[i]].name}->sw", f"sw->{topo.nodes[topo.gpus[j]].name}"]
    assert time.perf_counter() - t < 10


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=4", "gb200-nvl72", "hgx-a100-4:nodes=2", "dgx-a100:nodes=2"])
def test_fast_routes_equal_the_full_search(spec):
    """The forwarding-first search returns exactly the full search's route (a second implementation)."""
    import random

    from sim.presets import load_topology
    topo = load_topology(spec)
    rnd = random.Random(7)
    for _ in range(200):
        a, b = rnd.randrange(topo.nranks), rnd.randrange(topo.nranks)
        if a != b:
            s, d = topo.gpus[a], topo.gpus[b]
            assert topo._dijkstra(s, d) == topo._dijkstra_full(s, d)


def test_pcie_only_nvidia_smi_matrix(user, tmp_path):
    (tmp_path / "smi.txt").write_text("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n" + "".join(
        f"GPU{i}\t" + "\t".join(" X " if i == j else ("NODE" if (i < 2) == (j < 2) else "SYS") for j in range(4)) + "\t0-63\t0\n"
        for i in range(4)))
    rc, out, err = user("topo", "--from-nvidia-smi", "smi.txt:gpu=h100", "--format", "json")
    assert rc == 0, err
    meta = json.loads(out)["meta"]
    assert meta["nvlink_GBps"] == 0 and meta["intra"] == "pcie" and not meta["nvswitch"]


def test_repeated_sweep_key_and_too_many_combinations(user):
    refused(user("plan", WORKLOAD, "--topology", "dgx-h100:nodes=2", "--sweep", "nics_per_node=4,8",
                 "--sweep", "nics_per_node=2"), "given twice")
    many = ",".join(str(i) for i in range(1, 41))
    refused(user("plan", WORKLOAD, "--topology", "dgx-h100:nodes=2", "--sweep", f"nics_per_node={many}",
                 "--sweep", f"nodes={many}"), "1,600 configurations")


def test_stale_dumps_of_another_job_are_named_and_left_out(user, tmp_path):
    (tmp_path / "w8.yaml").write_text("workload: {builtin: ddp_step, world_size: 8, buckets: 2, steps: 1}\nfaults: []\n")
    (tmp_path / "w4.yaml").write_text("workload: {builtin: ddp_step, world_size: 4, buckets: 2, steps: 1}\n"
                                      "faults: [{kind: skip, rank: 2, call: 1}]\n")
    assert user("flight", "simulate", "w8.yaml", "--dump", "d")[0] == 0
    assert user("flight", "simulate", "w4.yaml", "--dump", "d")[0] == 0   # overwrites rank_0..3 only
    rc, out, _ = user("flight", "analyze", "d", "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["ranks"] == [0, 1, 2, 3] and d["culprits"] == [2]
    assert sorted(k.rsplit("/", 1)[-1] for k in d["other_job"]) == [f"rank_{r}.json" for r in range(4, 8)]


def test_tune_measured_host_count():
    from sim.commands.tune import _hosts
    assert _hosts("cluster:nccl:16:hosts=2", 16) == 2
    for bad in ("cluster:nccl:16:hosts=99", "c:hosts=0", "c:hosts=1.5", "c:hosts=" + "9" * 5000):
        with pytest.raises(CollsimError):
            _hosts(bad, 16)


def test_validation_layer_names_value_limit_and_fix():
    from sim.io.validation import number, whole
    with pytest.raises(CollsimError, match=r"x inf is not a finite number.*such as"):
        number(math.inf, "x", high=1)
    with pytest.raises(CollsimError, match=r"n 2000000 is out of range: it must be at least 1 and at most 1000"):
        whole(2_000_000, "n", low=1, high=1000)


@pytest.mark.parametrize("recovery,words", [
    ("{ranks: [10000000]}", ["recovery ranks 10000000", "at most 16384"]),
    ("{ranks: [64], failed: 1.5}", ["failed 1.5", "whole number"]),
    ("{ranks: [64], params: {detect_s: abc}}", ["detect_s", "must be a number"]),
])
def test_flight_recovery_numbers(user, tmp_path, recovery, words):
    (tmp_path / "r.yaml").write_text(f"recovery: {recovery}\n")
    refused(user("flight", "simulate", "r.yaml", timeout=60), *words)
