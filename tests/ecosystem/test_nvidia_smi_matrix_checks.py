"""What a `nvidia-smi topo -m` matrix may say, and what is built from it: only a full NVLink mesh is a mesh
(at its own NV# per pair), a malformed matrix is refused with the row and column, and the messages name
what was read (p27 trial, sections 2 and 10). Expected values come from the matrices written here."""
import json

import pytest

from sim.errors import CollsimError
from sim.topology.nccl_xml import node_preset_from_xml, parse_topology_xml, preset_for
from sim.topology.nvidia_smi import load_topology_nvsmi, parse_nvidia_smi_topo

NVLINK4_LINK_GBPS = 25.0   # NVLink3 and NVLink4: 25 GB/s per link per direction (the A100/H100 datasheets)


def matrix(gpu_cells: list[list[str]], nic_cells: list[list[str]] | None = None, affinity: str = "0-31\t0") -> str:
    """`nvidia-smi topo -m` text: GPU rows (``gpu_cells[i]``: GPU i's GPU columns, then its NIC columns) and
    the NIC rows that mirror them (``nic_cells[k]``: NIC k's GPU columns, then its NIC columns)."""
    ngpu, nnic = len(gpu_cells), len(nic_cells or [])
    head = "\t" + "\t".join([f"GPU{i}" for i in range(ngpu)] + [f"NIC{k}" for k in range(nnic)]) + "\tCPU Affinity\tNUMA Affinity\n"
    rows = "".join(f"GPU{i}\t" + "\t".join(row) + f"\t{affinity}\n" for i, row in enumerate(gpu_cells))
    rows += "".join(f"NIC{k}\t" + "\t".join(row) + "\n" for k, row in enumerate(nic_cells or []))
    return head + rows


def uniform(n: int, cell: str) -> list[list[str]]:
    return [[" X " if i == j else cell for j in range(n)] for i in range(n)]


def write(tmp_path, text: str, name: str = "smi.txt") -> str:
    f = tmp_path / name
    f.write_text(text)
    return str(f)


# 4x H100 NVL with NVLink bridges on two pairs (GPU0-1, GPU2-3 at NV12), the other pairs NODE; NIC0 PXB to GPU0/1
NVL_PAIRS = matrix([[" X ", "NV12", "NODE", "NODE", "PXB"], ["NV12", " X ", "NODE", "NODE", "PXB"],
                    ["NODE", "NODE", " X ", "NV12", "NODE"], ["NODE", "NODE", "NV12", " X ", "NODE"]],
                   [["PXB", "PXB", "NODE", "NODE", " X "]])


def test_nvlink_between_some_pairs_only_is_refused_not_built_as_a_mesh(tmp_path, cli):
    node, _ = parse_nvidia_smi_topo(NVL_PAIRS)
    assert [g["nv_peers"] for g in node.gpus] == [["GPU1"], ["GPU0"], ["GPU3"], ["GPU2"]]
    assert not any(g["nvswitch"] for g in node.gpus)
    with pytest.raises(CollsimError, match=r"NVLink joins some GPU pairs only \(GPU0-GPU1, GPU2-GPU3: 2 of 6 pairs\)") as e:
        load_topology_nvsmi(write(tmp_path, NVL_PAIRS) + ":gpu=h100")
    # the fix it names builds: the pcie preset for 4 Hopper GPUs (PCIe Gen5) on their own root ports (NODE between them)
    spec = next(w for w in str(e.value).split() if w.startswith("pcie:"))
    assert spec == "pcie:gpus=4,gen=5,arch=hopper,sockets=1,gpus_per_switch=1"
    code, out, err = cli("simulate", "-t", spec, "-b", "1M", "-e", "1M")
    assert code == 0, err
    code, out, err = cli("topo", "--from-nvidia-smi", str(tmp_path / "smi.txt") + ":gpu=h100")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_one_nvlink_pair_among_pcie_gpus_is_refused_too(tmp_path):
    # 8 GPUs, only GPU0-GPU1 on NVLink: most GPUs have no link, which must not make it a plain PCIe box silently
    cells = uniform(8, "SYS")
    cells[0][1] = cells[1][0] = "NV4"
    with pytest.raises(CollsimError, match=r"GPU0-GPU1: 1 of 28 pairs"):
        load_topology_nvsmi(write(tmp_path, matrix(cells)) + ":gpu=a100")


def nccl_xml(peers: dict[int, list[int]], count: int, sm: int = 90) -> str:
    gpus = "".join(f'<pci busid="0000:0{i}:00.0" class="0x030200" link_speed="32.0 GT/s PCIe"><gpu dev="{i}" sm="{sm}">'
                   + "".join(f'<nvlink target="0000:0{p}:00.0" count="{count}" tclass="0x030200"/>' for p in ps)
                   + "</gpu></pci>" for i, ps in peers.items())
    return f'<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel">{gpus}</cpu></system>'


def test_an_nccl_xml_with_nvlink_pairs_only_is_refused_and_a_full_mesh_is_not(tmp_path):
    pairs = write(tmp_path, nccl_xml({0: [1], 1: [0], 2: [3], 3: [2]}, 12), "pairs.xml")
    with pytest.raises(CollsimError, match="NVLink joins some GPU pairs only"):
        node_preset_from_xml(pairs, {})
    # four A100 with 4 links to each of their 3 peers: the hgx-a100-4 board, at its own 4 links per pair
    mesh = write(tmp_path, nccl_xml({i: [p for p in range(4) if p != i] for i in range(4)}, 4, sm=80), "mesh.xml")
    spec, read = node_preset_from_xml(mesh, {})
    assert spec.startswith("hgx-a100-4:") and not any("per GPU pair" in line for line in read)


@pytest.mark.parametrize("gpu, nv, pair_GBps", [("h100", 4, 4 * NVLINK4_LINK_GBPS),    # gh200-4 has 6: scaled to 4
                                                ("h100", 6, 6 * NVLINK4_LINK_GBPS),    # the board itself
                                                ("a100", 4, 4 * NVLINK4_LINK_GBPS),    # hgx-a100-4 itself
                                                ("a100", 2, 2 * NVLINK4_LINK_GBPS)])
def test_a_mesh_has_the_nvlinks_per_pair_its_matrix_says(tmp_path, gpu, nv, pair_GBps):
    for spec in (f":gpu={gpu}", f":gpu={gpu},nodes=2"):
        topo = load_topology_nvsmi(write(tmp_path, matrix(uniform(4, f"NV{nv}"))) + spec)
        nvlinks = [link for link in topo.links if link.kind == "nvlink"]
        assert len(nvlinks) == 12 * topo.nhosts and {link.bandwidth_GBps for link in nvlinks} == {pair_GBps}
        hw = topo.hardware
        assert (hw.nvlink_pair_GBps, hw.nvlink_links, hw.nvlink_GBps) == (pair_GBps, 3 * nv, 3 * pair_GBps)
    scaled = [line for line in hw.xml_read if "links per GPU pair" in line]
    assert bool(scaled) == (nv != {"h100": 6, "a100": 4}[gpu])


def test_a_reader_that_keeps_the_presets_nvlinks_says_so():
    node, _ = parse_nvidia_smi_topo(matrix(uniform(4, "NV4")))
    _, read = preset_for(node, {"gpu": "gh200"}, "smi.txt")
    assert any("4 NVLinks per GPU pair, the gh200-4 preset models 6" in line for line in read)
    _, read = preset_for(node, {"gpu": "h100"}, "smi.txt")
    assert any("4 NVLinks per GPU pair, the hgx-h100-4 preset models 6" in line for line in read)


@pytest.mark.parametrize("cells, words", [
    # GPU0 -> GPU1 NV4 one way, PIX the other (the tester's asym.txt)
    ([[" X ", "NV4", "SYS"], ["PIX", " X ", "NV4"], ["SYS", "NV4", " X "]],
     "row GPU0, column GPU1 reads NV4 but row GPU1, column GPU0 reads PIX"),
    ([[" X ", "FOO"], ["NV4", " X "]], "row GPU0, column GPU1 reads 'FOO', which `nvidia-smi topo -m` never prints"),
    ([[" X ", "NV0"], ["NV0", " X "]], "row GPU0, column GPU1 reads 'NV0'"),
    ([["NV4", "NV4"], ["NV4", " X "]], "row GPU0, column GPU0 reads 'NV4': X marks a device's own cell"),
    ([[" X ", " X "], [" X ", " X "]], "row GPU0, column GPU1 reads 'X'"),
    # a cell left out: the CPU affinity slides into the GPU1 column
    ([[" X ", "NV4"], ["NV4"]], "row GPU1, column GPU1 reads '0-31'"),
])
def test_malformed_matrices_are_refused_with_the_row_and_column(tmp_path, cli, cells, words):
    with pytest.raises(CollsimError, match="pass the matrix|save `nvidia-smi topo -m` again|whole") as e:
        parse_nvidia_smi_topo(matrix(cells), "smi.txt")
    assert words in str(e.value)
    code, _, err = cli("topo", "--from-nvidia-smi", write(tmp_path, matrix(cells)) + ":gpu=h100")
    assert code == 2 and words in err and "Traceback" not in err


def test_nvlink_to_a_nic_short_rows_and_mixed_mesh_counts_are_refused():
    with pytest.raises(CollsimError, match="row GPU1 has 1 cells for the 2 device columns"):
        parse_nvidia_smi_topo("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\n")
    with pytest.raises(CollsimError, match="row GPU0, column NIC0 reads 'NV4': NVLink joins GPUs only"):
        parse_nvidia_smi_topo(matrix([[" X ", "NV4", "NV4"], ["NV4", " X ", "PIX"]], [["NV4", "PIX", " X "]]))
    cells = uniform(4, "NV4")
    cells[0][1] = cells[1][0] = "NV2"
    with pytest.raises(CollsimError, match=r"different NVLink counts \(NV2 x 1, NV4 x 5 pairs\)"):
        parse_nvidia_smi_topo(matrix(cells))


def test_every_word_nvidia_smi_prints_is_read():
    # SOC: SYS as older drivers printed it (two sockets); NV1..NV18 between GPUs; NODE, PHB, PXB, PIX
    node, _ = parse_nvidia_smi_topo(matrix([[" X ", "PIX", "SOC", "SOC", "PHB"], ["PIX", " X ", "SOC", "SOC", "PXB"],
                                            ["SOC", "SOC", " X ", "NODE", "SYS"], ["SOC", "SOC", "NODE", " X ", "SYS"]],
                                           [["PHB", "PXB", "SYS", "SYS", " X "]]))
    assert node.sockets == 2 and node.gpu_nic_paths == ["PHB", "PXB", "SYS", "SYS"]
    for nv in (1, 18):
        node, _ = parse_nvidia_smi_topo(matrix(uniform(2, f"NV{nv}")))
        assert [g["links"] for g in node.gpus] == [nv, nv]


def test_a_grace_hopper_line_only_for_hopper_with_nics(tmp_path):
    a100 = load_topology_nvsmi(write(tmp_path, matrix(uniform(4, "NV4"))) + ":gpu=a100")
    assert not any("Grace Hopper" in line for line in a100.hardware.xml_read)
    nic = [[" X " if i == j else "NV6" for j in range(4)] + ["PHB"] for i in range(4)]
    gh200 = load_topology_nvsmi(write(tmp_path, matrix(nic, [["PHB"] * 4 + [" X "]])) + ":gpu=gh200")
    assert any("Grace Hopper GPUs reach their NICs over NVLink-C2C" in line for line in gh200.hardware.xml_read)
    h100 = load_topology_nvsmi(write(tmp_path, matrix(nic, [["PHB"] * 4 + [" X "]])) + ":gpu=h100")   # an x86 host
    assert not any("Grace Hopper" in line for line in h100.hardware.xml_read)


# the tester's dgx.txt: 8 GPUs at NV18; GPU0/1 PXB to NIC0 and GPU4/5 PXB to NIC1, the rest SYS to both NICs
def dgx_two_nics() -> str:
    near = {0: 0, 1: 0, 4: 1, 5: 1}
    gpu_rows = [[" X " if i == j else "NV18" for j in range(8)] + ["PXB" if near.get(i) == k else "SYS" for k in range(2)]
                for i in range(8)]
    nic_rows = [["PXB" if near.get(i) == k else "SYS" for i in range(8)] + [" X " if k == m else "SYS" for m in range(2)]
                for k in range(2)]
    return matrix(gpu_rows, nic_rows)


def test_every_gpu_that_shares_a_pcie_switch_with_a_nic_is_counted(tmp_path):
    topo = load_topology_nvsmi(write(tmp_path, dgx_two_nics()) + ":gpu=h100")
    read = topo.hardware.xml_read
    assert "PCIe: 4 of 8 GPUs share a PCIe switch with a NIC (GPUDirect RDMA without the CPU)" in read
    # what is built: the NVSwitch board with the matrix's 2 NICs, GPU2's nearest NIC at SYS deciding the path
    assert "builds as: dgx-h100:gpus_per_node=8,nics_per_node=2,nic_path=SYS" in read
    assert any("nvidia-smi gives no NIC speed" in line for line in read)


def test_a_one_gpu_matrix_says_so(tmp_path):
    with pytest.raises(CollsimError, match=r"the matrix shows one GPU \(GPU0\): a collective runs across 2 or more") as e:
        load_topology_nvsmi(write(tmp_path, matrix([[" X "]])) + ":gpu=h100")
    assert "pcie" not in str(e.value)
    one = write(tmp_path, nccl_xml({0: []}, 0), "one.xml")
    with pytest.raises(CollsimError, match="lists one GPU"):
        node_preset_from_xml(one, {})
    assert len(parse_topology_xml(open(one).read()).gpus) == 1
    with pytest.raises(CollsimError, match="models one server"):   # the pcie preset takes no nodes=
        node_preset_from_xml(one, {"nodes": "2"})


def test_simulate_names_nvidia_smi_text_and_file_parameters(tmp_path, monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, dgx_two_nics(), "dgx.txt")
    for spec in ("dgx.txt", str(tmp_path / "dgx.txt")):   # in this folder, or by path
        code, _, err = cli("simulate", "-t", spec, "-b", "1M", "-e", "1M")
        assert code == 2 and "holds `nvidia-smi topo -m` output" in err and "--from-nvidia-smi" in err
        assert "YAML" not in err
    code, out, err = cli("topo", "--from-nvidia-smi", "dgx.txt:gpu=h100", "--format", "json")
    assert code == 0, err
    (tmp_path / "t.json").write_text(out)
    for spec in ("t.json:nodes=2", "./t.json:nodes=2"):
        code, _, err = cli("simulate", "-t", spec, "-b", "1M", "-e", "1M")
        assert code == 2 and "takes no parameters (':nodes=2')" in err and "does not exist" not in err
    code, _, err = cli("simulate", "-t", "dgx.txt:gpu=h100", "-b", "1M", "-e", "1M")
    assert code == 2 and "--from-nvidia-smi dgx.txt:gpu=h100" in err and "does not exist" not in err
    code, _, err = cli("simulate", "-t", "./missing.json:nodes=2", "-b", "1M", "-e", "1M")
    assert code == 2 and "does not exist" in err
    assert json.loads(out)["meta"]["nvswitch"] is True


def test_a_cube_mesh_whose_rings_stay_on_nvlink_is_refused_without_the_pcie_floor_as_its_answer(tmp_path):
    # a new user's trial: DGX-1's hybrid cube-mesh (NVLink on 16 of 28 pairs) was sent to a PCIe spec, 15x slower
    # than the 129 GB/s such a node measures, as if its rings crossed PCIe; NCCL's rings stay on NVLink there.
    # The NV1/NV2 pattern of the DGX-1 with V100 whitepaper (each GPU: 6 links, quads 0-3 and 4-7, GPU i to i+4)
    links = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2, (2, 6): 1,
             (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}
    cells = [["X" if i == j else f"NV{links.get((min(i, j), max(i, j)))}" if (min(i, j), max(i, j)) in links else "SYS"
              for j in range(8)] for i in range(8)]
    assert all(sum(links.get((min(i, j), max(i, j)), 0) for j in range(8)) == 6 for i in range(8))
    with pytest.raises(CollsimError, match="yet a ring can stay on NVLink") as e:
        load_topology_nvsmi(write(tmp_path, matrix(cells)) + ":gpu=v100")
    ring = [int(g) for g in str(e.value).split("stay on NVLink (")[1].split(")")[0].split("-")]
    assert sorted(ring) == list(range(8)) and all((min(a, b), max(a, b)) in links for a, b in zip(ring, ring[1:] + ring[:1]))
    assert "only a floor" in str(e.value)
