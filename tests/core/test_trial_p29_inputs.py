"""Inputs a hostile tester's trial (twenty-ninth pass) got through: each now refused in one line, or handled
as nccl-tests handles it. Expected values come from the inputs and nccl-tests' own rule (count = size /
element size), not from the code's output."""
from __future__ import annotations

import json

import pytest

from sim.commands.common import json_text
from sim.errors import CollsimError


@pytest.mark.parametrize("spec", ["ring:n=8,bandwidth_GBps=5e-324", "ring:n=8,bandwidth_GBps=1e-300",
                                  "dgx-h100:nodes=2,nic_gbps=1e-9"])
def test_a_bandwidth_no_link_has_is_refused(cli, spec):
    code, out, err = cli("simulate", "-t", spec, "-b", "1G", "-e", "1G", "--format", "json")
    assert code == 2 and "is below" in err and len(err.strip().splitlines()) == 1 and not out


def test_a_topology_file_link_below_a_kilobyte_per_second_is_refused(cli, tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("name: tiny\nnodes: [{name: g0, kind: gpu, host: 0}, {name: g1, kind: gpu, host: 0}]\n"
                 "links: [{src: g0, dst: g1, bandwidth_GBps: 5.0e-324, latency_us: 1, duplex: true}]\n")
    code, _, err = cli("simulate", "-t", str(f), "-b", "1M", "-e", "1M")
    assert code == 2 and "bandwidth_GBps" in err and "below" in err


def test_json_never_carries_infinity():
    assert json.loads(json_text({"t": 1.5})) == {"t": 1.5}
    with pytest.raises(CollsimError, match="infinite or undefined"):
        json_text({"time_us": float("inf")})
    with pytest.raises(CollsimError):
        json_text([float("nan")])


def test_a_workload_mfu_no_gpu_has_is_refused(cli, tmp_path):
    src = open("examples/workloads/ddp-1b.yaml").read()
    assert "mfu:" in src
    f = tmp_path / "w.yaml"
    f.write_text("\n".join(line.split("mfu:")[0] + "mfu: 5e-324" if "mfu:" in line else line for line in src.splitlines()))
    code, out, err = cli("plan", str(f), "--format", "json")
    assert code == 2 and "compute.mfu" in err and not out


def test_an_empty_trace_name_is_refused(cli):
    code, _, err = cli("simulate", "-t", "ring:n=4", "--trace", "", "-b", "1M", "-e", "1M")
    assert code == 2 and "--trace is empty" in err


def test_a_fractional_factor_rounds_sizes_down_to_whole_elements_like_nccl_tests(cli):
    # nccl-tests: size *= 1.5 in integers (8, 12, 18, 27, 40, 60, 90, ...), count = size / 4 for float
    code, out, _ = cli("simulate", "-t", "ring:n=4", "--model", "tuner", "-b", "8", "-e", "100", "-f", "1.5",
                       "--format", "json")
    assert code == 0
    sizes = [r["nbytes"] for r in json.loads(out)["results"]]
    assert sizes == [8, 12, 16, 24, 40, 60, 88]
    code, _, err = cli("simulate", "-t", "ring:n=4", "-b", "6", "-e", "6")   # a size the user typed: refused
    assert code == 2 and "-b 6 B is not a multiple" in err


def test_auto_refuses_minutes_of_engine_where_the_flow_model_cannot_run(tmp_path):
    # a flat topology file of 131,072 GPUs around one switch: the engine took 225 s under --model auto
    import sim
    from sim.topology import Link, Node, Topology
    n = 1 << 17
    nodes = [Node(f"g{i}", "gpu", host=i) for i in range(n)] + [Node("sw", "switch")]
    links = [x for i in range(n) for x in (Link(f"g{i}", "sw", 10.0, 1.0), Link("sw", f"g{i}", 10.0, 1.0))]
    topo = Topology.build("flat", nodes, links)
    with pytest.raises(CollsimError, match="--model engine to wait for it"):
        sim.simulate("all_reduce", 1 << 20, topo)


def test_a_topology_file_host_index_is_never_negative(cli, tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("name: neg\nnodes: [{name: g0, kind: gpu, host: -5}, {name: g1, kind: gpu, host: -7}]\n"
                 "links: [{src: g0, dst: g1, bandwidth_GBps: 10, latency_us: 1, duplex: true}]\n")
    code, _, err = cli("topo", str(f))
    assert code == 2 and "host must be a whole number from 0" in err and "-5" in err


def test_a_topology_file_holds_no_more_gpus_than_collsim_builds(cli, tmp_path, monkeypatch):
    # the presets' limit (131,072) held for presets only: a file of 200,000 GPUs was built in 6.7 s and 335 MB.
    # The limit is lowered here so the file stays small; the rule is the same comparison
    import sim.topology.files as files
    monkeypatch.setattr(files, "MAX_GPUS", 4)
    gpus = ", ".join(f"{{name: g{i}, kind: gpu, host: {i}}}" for i in range(5))
    links = ", ".join(f"{{src: g{i}, dst: sw, bandwidth_GBps: 10, latency_us: 1, duplex: true}}" for i in range(5))
    f = tmp_path / "t.yaml"
    f.write_text(f"name: five\nnodes: [{gpus}, {{name: sw, kind: switch}}]\nlinks: [{links}]\n")
    code, _, err = cli("topo", str(f))
    assert code == 2 and "has 5 GPUs" in err
