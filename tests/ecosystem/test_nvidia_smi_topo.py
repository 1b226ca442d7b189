"""`nvidia-smi topo -m` as a topology (collsim topo --from-nvidia-smi, collsim env --topology-out)."""
import os
import subprocess
import sys

import pytest
import yaml

import sim
from sim.errors import CollsimError
from sim.presets import load_topology
from sim.topology.nvidia_smi import load_topology_nvsmi, parse_nvidia_smi_topo

H20 = os.path.join(os.path.dirname(__file__), "..", "data", "nccl_topo", "h20-nvidia-smi-topo.txt")


def test_h20_matrix_reads_as_an_nvswitch_node_like_the_preset():
    node, name = parse_nvidia_smi_topo(open(H20).read())
    # the matrix: NV18 between all 28 pairs, NIC i PIX to GPU i, NUMA affinity 0 or 1
    assert [g["links"] for g in node.gpus] == [18] * 8 and all(g["nvswitch"] for g in node.gpus)
    assert len(node.nics) == 8 and node.cpus == 2 and name is None
    topo = load_topology_nvsmi(H20 + ":gpu=h20")
    twin = load_topology("dgx-h100")   # H20: Hopper, NVLink 900 GB/s bidirectional (18 links), 8 NICs
    assert topo.meta["gpu_arch"] == "hopper" and topo.meta["nvlink_links"] == 18
    for size in (1 << 12, 1 << 28):
        assert sim.simulate("all_reduce", size, topo).time_us == pytest.approx(sim.simulate("all_reduce", size, twin).time_us)


def test_gpu_name_from_the_text_and_errors(tmp_path):
    f = tmp_path / "topo.txt"
    f.write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: x)\n" + open(H20).read())
    assert load_topology_nvsmi(str(f)).meta["gpu_arch"] == "hopper"
    with pytest.raises(CollsimError, match="does not name the GPU model"):
        load_topology_nvsmi(H20)
    (tmp_path / "empty.txt").write_text("no matrix here\n")
    p = subprocess.run([sys.executable, "-m", "sim", "topo", "--from-nvidia-smi", str(tmp_path / "empty.txt")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "holds no `nvidia-smi topo -m` matrix" in p.stderr


def test_env_topology_out_writes_a_loadable_file(tmp_path):
    from real.measure_cli import topology_out
    out = tmp_path / "me.yaml"
    said = topology_out(str(out), {"nvidia_smi_topo": open(H20).read(), "gpus": ["NVIDIA H20"]})
    assert "wrote" in said and "GPU name in the text: NVIDIA H20" in said
    doc = yaml.safe_load(out.read_text())
    assert doc["meta"]["gpu_arch"] == "hopper" and load_topology(str(out)).nranks == 8
    with pytest.raises(CollsimError, match="needs a GPU machine"):
        topology_out(str(tmp_path / "x.yaml"), {"nvidia_smi_topo": None, "gpus": []})


def test_nics_behind_the_cpu_turn_ll128_off_across_nodes(tmp_path):
    """The same H20 matrix with every GPU-NIC cell rewritten to PHB (NICs on the CPU's root complex, as on
    ALCF Polaris): NCCL's tuning.cc keeps LL128 off across nodes beyond PXB, so the reader must carry the
    path and the tuner must refuse LL128 there, and allow it on the original PIX matrix."""
    from sim.nccl.machine import machine
    from sim.nccl.tuner import tuner_terms
    text = open(H20).read()
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if "GPU0" in ln and "GPU1" in ln)
    cols = [c for c in lines[head].split("\t") if c.strip()]
    nic_cols = {j for j, c in enumerate(cols) if c.strip().startswith("NIC")}
    out = []
    for ln in lines:
        cells = ln.split("\t")
        if cells and cells[0].strip().startswith("GPU") and ln is not lines[head]:
            cells = [cells[0]] + ["PHB" if j in nic_cols else c for j, c in enumerate(cells[1:])]
        out.append("\t".join(cells))
    f = tmp_path / "phb.txt"
    f.write_text("\n".join(out) + "\n")
    node, _ = parse_nvidia_smi_topo(f.read_text())
    assert node.nic_path == "PHB"
    far = load_topology_nvsmi(str(f) + ":gpu=h20,nodes=2")
    near = load_topology_nvsmi(H20 + ":gpu=h20,nodes=2")
    assert far.hardware.nic_path == "PHB" and near.hardware.nic_path in ("PIX", "PXB")
    for topo, off in ((far, True), (near, False)):
        t = tuner_terms("all_reduce", 1 << 20, topo, "ring", "LL128", machine(topo))
        assert (t.alg_GBps == 0) == off, t.detail
    assert "PXB" in tuner_terms("all_reduce", 1 << 20, far, "ring", "LL128").detail["disabled"]
