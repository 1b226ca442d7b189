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
    gpu_cols = {j for j, c in enumerate(cols) if c.strip().startswith("GPU")}
    out = []
    for ln in lines:   # both ways: the GPU rows' NIC cells and the NIC rows' GPU cells (nvidia-smi prints one path per pair)
        cells = ln.split("\t")
        if cells and cells[0].strip().startswith(("GPU", "NIC")) and ln is not lines[head]:
            other = nic_cols if cells[0].strip().startswith("GPU") else gpu_cols
            cells = [cells[0]] + ["PHB" if j in other else c for j, c in enumerate(cells[1:])]
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


POLARIS = os.path.join(os.path.dirname(__file__), "..", "data", "nccl_topo", "polaris-nvidia-smi-topo.txt")


def test_a_four_gpu_nvlink_mesh_reads_as_the_board_it_is():
    """ALCF's published Polaris matrix (4 A100 at NV4 to each other, no NVSwitch: 4 x 3 = 12 links, all an
    A100 has; GPU1 and GPU3 PHB to one NIC each, GPU0 and GPU2 SYS to both; a header re-typed with single
    spaces after mlx5_1) is the hgx-a100-4 board with both NICs, rings entering at PHB and two GPUs without
    GPUDirect, which is what ALCF's table says and what the preset draws from it."""
    node, name = parse_nvidia_smi_topo(open(POLARIS).read())
    assert [g["mesh"] for g in node.gpus] == [True] * 4 and not any(g["nvswitch"] for g in node.gpus)
    assert [n["name"] for n in node.nics] == ["mlx5_0", "mlx5_1"] and name is None
    assert node.gpu_nic_paths == ["SYS", "PHB", "SYS", "PHB"]
    topo = load_topology_nvsmi(POLARIS + ":gpu=a100,nodes=2")
    hw = topo.hardware
    assert (hw.nvswitch, hw.gpus_per_node, hw.nics_per_node, hw.nic_path, hw.gpus_without_gdr) == (False, 4, 2, "PHB", 2)
    twin = load_topology("hgx-a100-4:nodes=2")
    for coll in ("all_reduce", "all_to_all"):
        assert sim.simulate(coll, 1 << 26, topo).time_us == pytest.approx(sim.simulate(coll, 1 << 26, twin).time_us)


def test_an_nvswitch_is_told_from_a_mesh_by_the_links_a_gpu_has(tmp_path):
    # the same four GPUs at NV18 to each other: 54 links, more than any GPU has, so they go to a switch
    text = open(POLARIS).read().replace("NV4", "NV18")
    node, _ = parse_nvidia_smi_topo(text)
    assert all(g["nvswitch"] and not g["mesh"] for g in node.gpus)
    # a mesh of a GPU generation without a mesh board, or of more GPUs than a board has, is refused plainly
    f = tmp_path / "b200.txt"
    f.write_text(open(POLARIS).read())
    with pytest.raises(CollsimError, match="no preset: the mesh presets are hgx-v100-4 .volta., hgx-a100-4"):
        load_topology_nvsmi(str(f) + ":gpu=b200,nodes=2")


# A matrix synthesized (not captured) from ABCI's Compute Node (V) as its block diagram draws it (aistabci/abci-docs img/compute-node-v-diagram.png): four
# V100 SXM2 with two NVLinks between every pair, two GPUs behind a PCIe switch on each socket, and each socket's
# EDR HCA on its own root port (PHB to that socket's GPUs, SYS to the other's)
ABCI_V = """\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV2\tNV2\tNV2\tPHB\tSYS\t0-19\t0
GPU1\tNV2\t X \tNV2\tNV2\tPHB\tSYS\t0-19\t0
GPU2\tNV2\tNV2\t X \tNV2\tSYS\tPHB\t20-39\t1
GPU3\tNV2\tNV2\tNV2\t X \tSYS\tPHB\t20-39\t1
mlx5_0\tPHB\tPHB\tSYS\tSYS\t X \tSYS
mlx5_1\tSYS\tSYS\tPHB\tPHB\tSYS\t X
"""


def test_a_v100_mesh_reads_as_the_abci_v_node(tmp_path):
    f = tmp_path / "abci-v.txt"
    f.write_text("GPU 0: Tesla V100-SXM2-16GB (UUID: x)\n" + ABCI_V)
    topo = load_topology_nvsmi(str(f) + ":nodes=2")
    twin = load_topology("hgx-v100-4:nodes=2")
    assert topo.meta["gpu_arch"] == "volta" and topo.hardware.nvlink_pair_GBps == 50.0   # NV2 x 25 GB/s
    assert topo.hardware.nic_path == "PHB" and not topo.hardware.gpus_without_gdr       # each GPU has its socket's HCA
    for size in (1 << 12, 1 << 26):
        assert sim.simulate("all_reduce", size, topo).time_us == pytest.approx(sim.simulate("all_reduce", size, twin).time_us)
    # gpu= over the text's own name builds what was asked, and the read lines say the two differ
    other = load_topology_nvsmi(str(f) + ":nodes=2,gpu=a100")
    assert other.meta["gpu_arch"] == "ampere"
    assert any("V100" in line and "gpu=a100 given" in line for line in other.hardware.xml_read)


@pytest.mark.parametrize("spec, far", [("hgx-a100-4:nodes=2,gpus_without_gdr=0", None),
                                       ("hgx-a100-4:nodes=2,nics_per_node=4,gpus_without_gdr=1", 1),
                                       ("gh200-4:nodes=2,gpus_without_gdr=4", 4), ("hgx-a100-4:gpus_without_gdr=2", None)])
def test_gpus_without_gdr_is_a_preset_parameter(spec, far):
    # what nvidia-smi says overrides the platform's table; on one node no GPU sends through a NIC
    assert load_topology(spec).hardware.gpus_without_gdr == far


def test_gpus_without_gdr_beyond_the_node_is_refused():
    p = subprocess.run([sys.executable, "-m", "sim", "simulate", "-t", "hgx-a100-4:nodes=2,gpus_without_gdr=5", "-b", "1M",
                        "-e", "1M"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "gpus_without_gdr=5 must be a whole number from 0 to 4" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_grace_hopper_mesh_keeps_the_presets_nic_path(tmp_path):
    # four Hopper GPUs at NV6 to each other (6 x 3 = 18 links, all an H100 has): the gh200-4 board. Its GPUs
    # reach their NICs through the Grace CPU over NVLink-C2C, so the PCIe paths of the matrix (here Polaris's
    # SYS and PHB) say nothing about GPUDirect: the preset's PHB holds and no GPU is taken to be without it
    f = tmp_path / "gh200.txt"
    f.write_text(open(POLARIS).read().replace("NV4", "NV6"))
    topo = load_topology_nvsmi(str(f) + ":gpu=gh200,nodes=2")
    assert topo.name.endswith("(gh200-4:nodes=2,nics_per_node=2,nic_gbps=200)")
    assert (topo.hardware.nic_path, topo.hardware.gpus_without_gdr) == ("PHB", None)


def test_an_h100_mesh_on_an_x86_host_reads_its_nic_paths(tmp_path):
    # the same matrix named H100: an HGX H100 4-GPU board on PCIe (NREL Kestrel's nodes), whose GPUs reach their
    # NICs over PCIe, so the matrix's paths are GPUDirect's: GPU1 and GPU3 at PHB, GPU0 and GPU2 at SYS to both
    f = tmp_path / "h100.txt"
    f.write_text(open(POLARIS).read().replace("NV4", "NV6"))
    topo = load_topology_nvsmi(str(f) + ":gpu=h100,nodes=2")
    assert "(hgx-h100-4:nodes=2,nics_per_node=2," in topo.name   # the NICs' speed is the preset's: the matrix has none
    hw = topo.hardware
    assert (hw.nic_path, hw.gpus_without_gdr, hw.cpu != "arm", hw.nvlink_pair_GBps) == ("PHB", 2, True, 150.0)


def test_an_nccl_xml_hopper_mesh_is_read_by_its_cpu_and_keeps_its_nic_placement():
    # synthetic dumps (tests/data/nccl_topo/README.md): an x86 host is the HGX H100 board, an Arm host Grace Hopper;
    # where the NICs attach in the PCIe tree (beside the GPUs, or under the CPU) is the board's, not the preset's
    base = "tests/data/nccl_topo/hopper-mesh-{}.xml:nodes=2"
    pxb, phb, arm = (load_topology(base.format(k)) for k in ("x86-pxb", "x86-phb", "arm"))
    assert "(hgx-h100-4:" in pxb.name and "(hgx-h100-4:" in phb.name and "(gh200-4:" in arm.name
    assert (pxb.hardware.nic_path, phb.hardware.nic_path) == ("PXB", "PHB")
