"""The large-scale model's replica is the machine given, or none (``sim.prediction.replica.preset_of``).

The replica is rebuilt from a preset spec. A topology file keeps its preset's name after its links are edited,
and an NCCL topology XML's or ``nvidia-smi topo -m``'s machine is named ``FILE(preset:...)``: the first was
timed as the unedited preset (200G NICs written over a DGX H100's 400G ones, 128 nodes: 346.5 GB/s busbw, past
the file's own NICs), the second refused as an unknown preset from 4 nodes on. Expected values come from
outside the flow model: the engine on the same file, the NICs' line rate, and the preset the reader derived.
"""
import json

import pytest

import sim
from sim.prediction.replica import preset_of
from sim.presets import load_topology

XML = "tests/data/nccl_topo/azure-ndv5-topo.xml:gpu=h100,nodes={}"


def _edited(tmp_path, spec: str, nic_GBps: float) -> str:
    d = load_topology(spec).to_dict()
    for link in d["links"]:
        if link.get("kind") == "net" and link["bandwidth_GBps"] == 50.0:
            link["bandwidth_GBps"] = nic_GBps
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(d))
    return str(path)


def test_an_edited_file_is_timed_as_written_not_as_its_preset(tmp_path):
    spec = "dgx-h100:nodes=8"
    path = _edited(tmp_path, spec, 25.0)   # 8 x 200G NICs per node, the file says
    assert preset_of(load_topology(path)) is None
    auto = sim.simulate("all_reduce", 1 << 30, path, "nvls_tree", "Simple")
    engine = sim.simulate("all_reduce", 1 << 30, path, "nvls_tree", "Simple", model="engine")
    assert auto.time_us == pytest.approx(engine.time_us, rel=1e-9)
    # an NVLSTree all_reduce moves 2 (n-1)/n of the data through each node's 8 NICs at most: busbw <= 8 x 25 GB/s x 2
    assert auto.busbw_GBps <= 8 * 25.0 * 2
    unedited = str(tmp_path / "same.json")
    open(unedited, "w").write(json.dumps(load_topology(spec).to_dict()))
    assert preset_of(load_topology(unedited)) == load_topology(unedited).name   # no edit: its preset, replica and all


@pytest.mark.parametrize("nodes", [4, 32])
def test_an_nccl_xml_machine_is_predicted_as_the_preset_it_reads_as(nodes):
    topo = load_topology(XML.format(nodes))
    derived = topo.hardware.xml_preset
    got = sim.simulate("all_reduce", 1 << 30, topo)
    want = sim.simulate("all_reduce", 1 << 30, derived)
    assert (got.algorithm, got.model) == (want.algorithm, want.model)
    assert got.time_us == pytest.approx(want.time_us, rel=1e-9)


def _rewired(tmp_path, spec: str, how: str) -> str:
    d = load_topology(spec).to_dict()
    if how == "rewire":   # host 0's GPU 1 moved onto GPU 0's PCIe switch: the same bandwidths, another wiring
        for link in d["links"]:
            if {link["src"], link["dst"]} == {"h0.gpu1", "h0.pcie1"}:
                link["src" if link["src"] == "h0.pcie1" else "dst"] = "h0.pcie0"
    elif how == "unplug":   # host 0's NIC 7 unplugged from its leaf
        d["links"] = [lk for lk in d["links"] if {lk["src"], lk["dst"]} != {"h0.nic7", "leaf7"}]
    elif how == "reorder":   # the same machine, its links listed backwards: still the preset
        d["links"] = d["links"][::-1]
    path = tmp_path / f"{how}.json"
    path.write_text(json.dumps(d))
    return str(path)


@pytest.mark.parametrize("how, same", [("rewire", False), ("unplug", False), ("reorder", True)])
def test_a_file_is_its_preset_only_if_it_is_that_machine(tmp_path, how, same):
    # the same link bandwidths wired otherwise passed a check of the distinct (kind, bandwidth, latency) values
    topo = load_topology(_rewired(tmp_path, "dgx-h100:nodes=8", how))
    assert (preset_of(topo) is not None) == same
