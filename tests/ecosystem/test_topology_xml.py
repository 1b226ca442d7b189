"""NCCL topology XML files (public ones, tests/data/nccl_topo/README.md) read as topologies."""
import json
import os
import subprocess
import sys

import pytest

import sim
from sim.errors import CollsimError
from sim.presets import load_topology

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "nccl_topo")


def path(name):
    return os.path.join(DATA, name)


# (spec, facts from the file and its platform's datasheet, the preset for the same hardware)
CASES = [
    # ND A100 v4: 8x A100 on NVSwitch, 8x 200 Gb/s HDR InfiniBand (Azure's ND A100 v4 documentation)
    ("azure-ndv4-topo.xml:gpu=a100", {"gpu_arch": "ampere", "nvswitch": True, "nvlink_links": 12,
                                      "nics_per_node": 8, "nic_gbps": 200.0}, "dgx-a100"),
    # ND H100 v5: 8x H100 on NVSwitch, 8x 400 Gb/s NDR InfiniBand
    ("azure-ndv5-topo.xml:gpu=h100", {"gpu_arch": "hopper", "nvswitch": True, "nvlink_links": 18,
                                      "nics_per_node": 8, "nic_gbps": 400.0}, "dgx-h100"),
    # the dump itself: sm="90"; nvlink counts 5+5+4+4 = 18 to tclass 0x068000; net speed="400000" Mb/s
    ("h200-baremetal-dump-excerpt.xml", {"gpu_arch": "hopper", "nvswitch": True, "nvlink_links": 18,
                                         "nics_per_node": 3, "nic_gbps": 400.0}, "dgx-h100:gpus_per_node=3,nics_per_node=3"),
    # VM dump: one collapsed target fffffff:ff:ff.0 with count="18"; two such nodes
    ("h200-vm-dump-excerpt.xml:nodes=2", {"gpu_arch": "hopper", "nvswitch": True, "nvlink_links": 18,
                                          "nics_per_node": 1, "nic_gbps": 400.0},
     "dgx-h100:nodes=2,gpus_per_node=1,nics_per_node=1,nic_gbps=400"),
]


@pytest.mark.parametrize("spec,facts,preset", CASES)
def test_file_facts_and_same_simulation_as_the_preset(spec, facts, preset):
    topo = load_topology(path(spec))
    assert {k: topo.meta[k] for k in facts} == facts
    twin = load_topology(preset)
    assert topo.nranks == twin.nranks and topo.nhosts == twin.nhosts
    for coll, size in (("all_reduce", 1 << 10), ("all_reduce", 256 << 20), ("all_gather", 64 << 20)):
        a, b = sim.simulate(coll, size, topo), sim.simulate(coll, size, twin)
        assert (a.algorithm, a.protocol) == (b.algorithm, b.protocol)
        assert a.time_us == pytest.approx(b.time_us, rel=1e-9)


def test_pcie_placement_is_read_from_the_switch_tree():
    read = load_topology(path("azure-ndv5-topo.xml:gpu=h100")).meta["xml_read"]
    # ndv5: each of the 8 PCIe switches (class 0x060400) holds one GPU and one NIC
    assert "PCIe: 8 of 8 GPUs share a PCIe switch with a NIC (GPUDirect RDMA without the CPU)" in read
    vm = load_topology(path("h200-vm-dump-excerpt.xml:nodes=2")).meta["xml_read"]
    assert not any(line.startswith("PCIe:") for line in vm)            # the VM shows no PCIe switch
    assert any("collapsed" in line for line in vm)


def test_a_file_without_an_architecture_asks_for_one():
    with pytest.raises(CollsimError, match=r"names no GPU architecture.*gpu=a100"):
        load_topology(path("azure-ndv4-topo.xml"))
    with pytest.raises(CollsimError, match="contradicts the file's sm=90"):
        load_topology(path("h200-baremetal-dump-excerpt.xml:gpu=a100"))


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<system><cpu><pci class="0x030200" busid="&lol3;"/></cpu></system>"""
EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE system [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<system><cpu><pci class="0x030200" busid="&secret;"/></cpu></system>"""


@pytest.mark.parametrize("text,what", [(BOMB, "DTD"), (EXTERNAL, "DTD"), ("<system><cpu>", "not well-formed"),
                                       ("<topology/>", "not <system>"), ("<system><cpu/></system>", "lists no GPU")])
def test_hostile_or_broken_files_are_refused_clearly(tmp_path, text, what):
    f = tmp_path / "bad.xml"
    f.write_text(text)
    p = subprocess.run([sys.executable, "-m", "sim", "topo", str(f)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and what in p.stderr and "Traceback" not in p.stderr
    assert p.stderr.startswith("collsim: error:") and len(p.stderr.strip().splitlines()) == 1


def test_topo_prints_what_it_read_and_json_meta():
    spec = path("h200-baremetal-dump-excerpt.xml")
    p = subprocess.run([sys.executable, "-m", "sim", "topo", spec], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "# read: GPU architecture: sm=90 -> hopper" in p.stdout
    assert "# read: NICs: 3 x 400 Gb/s (net speed 400000 Mb/s)" in p.stdout
    j = subprocess.run([sys.executable, "-m", "sim", "topo", spec + ":nodes=2", "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    meta = json.loads(j.stdout)["meta"]
    assert (meta["gpu_arch"], meta["nvswitch"], meta["nics_per_node"], meta["nodes"]) == ("hopper", True, 3, 2)
