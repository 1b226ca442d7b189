"""`collsim env --topology-out`: nvidia-smi's matrix joined with NCCL's own topology dump
(NCCL_TOPO_DUMP_FILE), on public files (tests/data/nccl_topo/README.md says where each comes from).

The public matrix (8x H20) and dumps (8x H200, bare metal and VM) are of different Hopper NVSwitch
servers: they stand in for the two views of one machine; what is checked is which fact comes from which
view. The real dump on a GPU is tested where one is present.
"""
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from real.measure.topo_dump import merge_nodes, nccl_topology_dump, nic_legend
from real.measure_cli import topology_out
from sim.presets import load_topology
from sim.topology.nccl_xml import parse_topology_xml
from sim.topology.nvidia_smi import parse_nvidia_smi_topo

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "nccl_topo")
H20 = open(os.path.join(DATA, "h20-nvidia-smi-topo.txt")).read()
BARE = open(os.path.join(DATA, "h200-baremetal-dump-excerpt.xml")).read()
VM = open(os.path.join(DATA, "h200-vm-dump-excerpt.xml")).read()


def test_a_partial_dump_gives_architecture_nvlink_and_nic_speed_to_all_gpus(tmp_path):
    out = tmp_path / "me.yaml"
    said = topology_out(str(out), {"nvidia_smi_topo": H20, "gpus": ["NVIDIA H20"] * 8, "hostname": "h"},
                        dump=(BARE, "NCCL 2.x (posted dump)"))
    text = out.read_text()
    doc = yaml.safe_load(text)
    assert doc["meta"]["sources"] == ["nvidia-smi topo -m", "NCCL_TOPO_DUMP_FILE (NCCL 2.x (posted dump))"]
    assert text.startswith("# collsim env --topology-out on h") and "# sources: nvidia-smi topo -m; NCCL_TOPO_DUMP_FILE" in text
    # the dump (3 GPUs, sm=90, 5+5+4+4 NVLinks to NVSwitches, mlx5_0..2 at 400000 Mb/s) + the matrix (8 GPUs, 8 NICs)
    assert "GPU architecture: sm=90 -> hopper" in said and "NVLink: 18 links per GPU to NVSwitch" in said
    assert "8 GPUs and their PCIe placement from nvidia-smi" in said and "from NCCL's dump of 3 of them" in said
    topo = load_topology(str(out))
    assert topo.nranks == 8 and topo.meta["nic_gbps"] == 400.0 and topo.meta["nics_per_node"] == 8
    assert "NCCL topology dump" not in said.split("wrote")[0].split("builds as")[1]    # used, not skipped


def test_merge_rules_full_dump_vm_dump_and_names():
    smi, _ = parse_nvidia_smi_topo(H20)
    bare = parse_topology_xml(BARE)
    assert nic_legend(H20)["NIC0"] == "mlx5_1"
    # a dump covering every GPU wins wholesale (its PCIe switches and NICs belong together)
    node, said = merge_nodes(XmlSlice(smi, 3), bare)
    assert node.gpus == bare.gpus and node.nics == bare.nics and "covers all 3 GPUs" in said[0]
    # the VM's collapsed NVSwitch target: 18 links to NVSwitch for every GPU of the matrix
    vm_node, said = merge_nodes(smi, parse_topology_xml(VM), nic_legend(H20))
    assert all(g["links"] == 18 and g["nvswitch"] and g["collapsed"] and g["sm"] == 90 for g in vm_node.gpus)
    assert all(n["mbps"] == 400000.0 for n in vm_node.nics) and len(vm_node.nics) == 8
    # names that match: mlx5_1..3 of the legend appear in a dump renamed to them -> matched by name
    renamed = parse_topology_xml(BARE.replace('"mlx5_2"', '"mlx5_3"').replace('"mlx5_1"', '"mlx5_2"')
                                 .replace('"mlx5_0"', '"mlx5_1"'))
    _, said = merge_nodes(smi, renamed, nic_legend(H20))
    assert any("3 matched by name" in s for s in said)
    # one view only
    assert merge_nodes(smi, None)[0] is smi and merge_nodes(None, bare)[0] is bare


def XmlSlice(node, n):
    from sim.topology.nccl_xml import XmlNode
    return XmlNode(gpus=node.gpus[:n], nics=node.nics[:n], cpus=node.cpus)


def test_dump_alone_builds_the_node(tmp_path):
    out = tmp_path / "me.yaml"
    said = topology_out(str(out), {"nvidia_smi_topo": None, "gpus": [], "hostname": "h"}, dump=(BARE, "posted"))
    assert "everything from NCCL's topology dump" in said
    assert "builds as: dgx-h100:gpus_per_node=3,nics_per_node=3,nic_gbps=400" in said
    assert load_topology(str(out)).nranks == 3


def test_one_gpu_says_what_nccl_saw_and_writes_nothing(tmp_path):
    from sim.errors import CollsimError
    with pytest.raises(CollsimError, match=r"1 GPU, so writing a topology was skipped.*sm=90 -> hopper.*collapsed"):
        topology_out(str(tmp_path / "me.yaml"), {"nvidia_smi_topo": None, "gpus": [], "hostname": "h"}, dump=(VM, "posted"))
    assert not (tmp_path / "me.yaml").exists()


def test_cpu_machine_says_the_nccl_part_was_skipped(tmp_path):
    torch = pytest.importorskip("torch", reason="collsim env needs torch")
    if torch.cuda.is_available() or shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: the CPU message does not apply (the GPU test covers it)")
    assert nccl_topology_dump(0)[0] is None
    text, why = nccl_topology_dump(1)      # asked for a GPU that is not there: NCCL's own error, one line
    assert text is None and why.startswith("failed:") and "Traceback" not in why
    p = subprocess.run([sys.executable, "-m", "sim", "env", "--topology-out", str(tmp_path / "me.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "the NCCL topology dump part was skipped: no GPU" in p.stderr
    assert not (tmp_path / "me.yaml").exists()


@pytest.mark.gpu
def test_nccl_dump_on_this_gpu(tmp_path):
    torch = pytest.importorskip("torch", reason="the NCCL dump needs torch to count the GPUs")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch: NCCL writes its topology dump only when it initialises on a GPU")
    n = torch.cuda.device_count()
    text, how = nccl_topology_dump(n)
    assert text is not None, how
    node = parse_topology_xml(text, "NCCL_TOPO_DUMP_FILE")
    major, minor = torch.cuda.get_device_capability(0)
    assert node.gpus and node.gpus[0]["sm"] == major * 10 + minor
    p = subprocess.run([sys.executable, "-m", "sim", "env", "--topology-out", str(tmp_path / "me.yaml")],
                       capture_output=True, text=True, timeout=300)
    if n == 1:   # one GPU: no topology to write, but the message says what NCCL's dump showed
        assert p.returncode == 2 and "writing a topology was skipped" in p.stderr
        assert f"sm={major * 10 + minor}" in p.stderr
        return
    if p.returncode == 2 and "have no preset" in p.stderr + p.stdout:
        pytest.skip(f"this GPU's node has no preset to build from: {p.stderr.strip()[-200:]}")
    assert p.returncode == 0, p.stderr
    meta = yaml.safe_load((tmp_path / "me.yaml").read_text())["meta"]
    assert any(s.startswith("NCCL_TOPO_DUMP_FILE") for s in meta["sources"])


def test_a_mesh_is_written_at_its_own_nvlinks_per_pair(tmp_path):
    # four H100s joined by NV4 between every pair (no NVSwitch): 4 links x 25 GB/s a pair, not the gh200-4
    # preset's 6; the same as `collsim topo --from-nvidia-smi` builds from the same matrix
    mesh = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n"
            + "".join(f"GPU{i}\t" + "\t".join(" X " if j == i else "NV4" for j in range(4)) + "\t0-31\n" for i in range(4)))
    out = tmp_path / "mesh.yaml"
    topology_out(str(out), {"nvidia_smi_topo": mesh, "gpus": ["NVIDIA H100 NVL"] * 4, "hostname": "h"},
                 dump=(None, "not run (test)"))
    topo = load_topology(str(out))
    pair = {lk.bandwidth_GBps for lk in topo.links if lk.kind == "nvlink"}
    assert pair == {4 * 25.0}
