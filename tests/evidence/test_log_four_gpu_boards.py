"""A log of 4-GPU Hopper nodes builds the board it ran on (``sim.evidence.nccl_log.topology_spec``).

A GH200 log was mapped by its shape to ``hgx-a100-4`` (an Ampere board on PCIe), and an H100 log with 4 ranks
per node to ``dgx-h100`` whatever NCCL said of NVLS. NCCL prints "NVLS multicast support is not available" on
a node without NVSwitch: 4 H100 then sit on the HGX 4-GPU board's direct mesh (NREL Kestrel's nodes).
"""
from sim.evidence.nccl_log import NcclLog, topology_spec
from sim.presets import load_topology


def _spec(**kw) -> str:
    return topology_spec(NcclLog(source="t.log", nranks=8, nnodes=2, gpus_per_node=4, provider="cxi", **kw))[0]


def test_a_grace_hopper_log_is_the_gh200_board():
    spec = _spec(gpu="NVIDIA GH200 480GB", nvls=False)
    assert spec.startswith("gh200-4:nodes=2") and "gpus_per_node" not in spec
    assert load_topology(spec).hardware.cpu == "arm"


def test_four_h100_without_nvls_are_the_hgx_mesh_and_with_it_an_nvswitch_node():
    mesh = load_topology(_spec(gpu="NVIDIA H100 80GB HBM3", nvls=False)).hardware
    assert (mesh.nvswitch, mesh.gpus_per_node, mesh.cpu != "arm", mesh.fabric) == (False, 4, True, "slingshot")
    nvswitch = _spec(gpu="NVIDIA H100 80GB HBM3", nvls=True)   # 4 ranks per node of an NVSwitch server
    assert nvswitch.startswith("dgx-h100:") and "gpus_per_node=4" in nvswitch
    silent = _spec(gpu="NVIDIA H100 80GB HBM3")                 # the log says nothing of NVLS: as before
    assert silent.startswith("dgx-h100:")
