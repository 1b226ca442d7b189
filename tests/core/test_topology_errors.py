"""Bad topologies get one clear line, from Python and from the CLI (exit 2, no traceback)."""
import json
import subprocess
import sys

import pytest

from sim.errors import CollsimError
from sim.presets import load_topology
from sim.topology import Link, Node, Topology

BAD_SPECS = {
    "ring:n=0": "n=0 GPUs is too few",
    "ring:n=1": "too few",
    "no-such-preset": "unknown topology preset 'no-such-preset'",
    "ring:n=8,bandwidth_GBps=-5": "bandwidth_GBps=-5.0 must be positive",
    "ring:n=8,latency_us=-1": "latency_us=-1.0 must be zero or more",
    "ring:n=8,colour=red": "has no parameter 'colour'",
    "ring:n=eight": "is not a valid int",
    "ring:n=8,n=4": "sets 'n' twice",
    "ring:n": "write key=value pairs",
    "switch:n=4,bandwidth_GBps=0": "must be positive",
}


@pytest.mark.parametrize("spec,message", BAD_SPECS.items())
def test_bad_specs_raise_clear_errors(spec, message):
    with pytest.raises(CollsimError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_topology(spec)


@pytest.mark.parametrize("spec", list(BAD_SPECS))
def test_bad_specs_exit_2_with_one_line(cli, spec):
    code, out, err = cli("simulate", "--topology", spec, "-b", "1M", "-e", "1M")
    assert code == 2
    assert err.startswith("collsim: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_disconnected_gpu_is_named():
    nodes = [Node("a", "gpu"), Node("b", "gpu"), Node("c", "gpu")]
    links = [Link("a", "b", 10, 1), Link("b", "a", 10, 1)]
    with pytest.raises(CollsimError, match="GPU 'c' has no route"):
        Topology.build("island", nodes, links)


def test_one_way_link_is_not_enough():
    with pytest.raises(CollsimError, match="no route"):
        Topology.build("oneway", [Node("a"), Node("b")], [Link("a", "b", 10, 1)])


FILES = {
    "bad.yaml": ("nodes: [ {name: a, kind: gpu}\n", "is not valid YAML"),
    "list.yaml": ("- 1\n- 2\n", "must hold a mapping"),
    "hostile.yaml": ("!!python/object/apply:os.system ['echo pwned > /tmp/collsim_pwned']\n", "is not valid YAML"),
    "nolinks.yaml": ("gpus: 2\nlinks: []\n", "'links' must be a non-empty list"),
    "unknown.yaml": ("gpus: 2\nlinks: [{src: gpu0, dst: gpu9, bandwidth_GBps: 1, duplex: true}]\n", "unknown node 'gpu9'"),
    "zero.yaml": ("gpus: 2\nlinks: [{src: gpu0, dst: gpu1, bandwidth_GBps: 0, duplex: true}]\n", "bandwidth must be a positive"),
    "neglat.yaml": ("gpus: 2\nlinks: [{src: gpu0, dst: gpu1, bandwidth_GBps: 5, latency_us: -2, duplex: true}]\n", "latency must be zero or more"),
    "typo.yaml": ("gpus: 2\nlinks: [{src: gpu0, dst: gpu1, bandwith_GBps: 5, duplex: true}]\n", "unknown key"),
    "strbw.yaml": ("gpus: 2\nlinks: [{src: gpu0, dst: gpu1, bandwidth_GBps: fast, duplex: true}]\n", "must be a number"),
    "bad.json": ('{"gpus": 2, "links": [', "is not valid JSON"),
}


@pytest.mark.parametrize("name", list(FILES))
def test_bad_files_exit_2_with_one_line(tmp_path, cli, name):
    text, message = FILES[name]
    path = tmp_path / name
    path.write_text(text)
    code, out, err = cli("topo", str(path))
    assert code == 2, out
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_hostile_yaml_executes_nothing(tmp_path):
    import os
    marker = "/tmp/collsim_pwned"
    if os.path.exists(marker):
        os.remove(marker)
    path = tmp_path / "h.yaml"
    path.write_text(FILES["hostile.yaml"][0])
    with pytest.raises(CollsimError):
        load_topology(str(path))
    assert not os.path.exists(marker)


def test_missing_file_is_named(cli):
    code, _, err = cli("topo", "/nonexistent/topo.yaml")
    assert code == 2 and "does not exist" in err


def test_good_yaml_round_trips(tmp_path):
    topo = load_topology("switch:n=4,sharp=1")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(topo.to_dict()))
    again = load_topology(str(path))
    assert again.nranks == 4 and again.reducing_switches("sharp") and len(again.links) == len(topo.links)


def test_cli_entry_point_exits_2_without_traceback():
    p = subprocess.run([sys.executable, "-m", "sim", "simulate", "--topology", "ring:n=0"], capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "too few" in p.stderr


@pytest.mark.parametrize("spec", ["pcie:gpus=4", "pcie:gpus=8,sockets=2,gpus_per_switch=1,p2p=0"])
def test_a_pcie_topology_written_by_topo_loads_back_and_predicts_as_its_preset(cli, tmp_path, spec):
    # `collsim topo SPEC --format json` is "the file format (loadable)": a PCIe machine writes
    # nvlink_GBps 0 with nvlink_links 0 (no NVLink), which the file check once refused as a bad bandwidth
    code, out, err = cli("topo", spec, "--format", "json")
    assert code == 0, err
    path = tmp_path / "t.json"
    path.write_text(out)
    rows = {}
    for source in (spec, str(path)):
        code, out, err = cli("simulate", "-t", source, "-c", "all_reduce", "-b", "1M", "-e", "64M", "-f", "64", "--format", "json")
        assert code == 0, err
        rows[source] = [(r["algorithm"], r["protocol"], r["time_us"]) for r in json.loads(out)["results"]]
    assert rows[str(path)] == rows[spec] and len(rows[spec]) == 2
