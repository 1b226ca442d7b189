"""The thirty-seventh pass's fixes, pinned (docs/accuracy-at-scale.md).

Expected values come from a second route to the same answer: the preset a topology file was written from.
"""
import json


def test_a_pcie_server_file_says_why_p2p_reads_false_whatever_its_name(cli, tmp_path):
    # the reason comes from the hardware (the P2P level the pairs were drawn under), not from parsing the spec in
    # the name: a file written by `topo --format json` and renamed by hand still says it, and says the level
    spec = "pcie:gpus=8,sockets=2,gpus_per_switch=2,p2p=1"
    code, out, err = cli("topo", spec, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["meta"]["p2p_level"] == "PXB" and data["meta"]["p2p"] is False
    data["name"] = "my-box"
    path = tmp_path / "box.json"
    path.write_text(json.dumps(data))
    _, from_file, _ = cli("topo", str(path))
    _, from_spec, _ = cli("topo", spec)
    why = [line for line in from_spec.splitlines() if line.strip().startswith("p2p:")]
    assert why and "P2P level PXB" in why[0]
    assert why == [line for line in from_file.splitlines() if line.strip().startswith("p2p:")]
    # without peer-to-peer asked for, no level is recorded and nothing is explained
    code, out, _ = cli("topo", "pcie:gpus=8,sockets=2,gpus_per_switch=2,p2p=0", "--format", "json")
    assert code == 0 and "p2p_level" not in json.loads(out)["meta"]
