"""A log of 4-GPU Hopper nodes (``sim.evidence.nccl_log.topology_spec``).

A GH200 log was mapped by its shape to ``hgx-a100-4`` (an Ampere board on PCIe). An H100 log of 4 ranks per node
cannot say which board it ran on; the spec keeps the NVSwitch node and the reasons name the other boards.
"""
from sim.evidence.nccl_log import NcclLog, topology_spec
from sim.presets import load_topology


def _spec(**kw) -> str:
    return topology_spec(NcclLog(source="t.log", nranks=8, nnodes=2, gpus_per_node=4, provider="cxi", **kw))[0]


def test_a_grace_hopper_log_is_the_gh200_board():
    spec = _spec(gpu="NVIDIA GH200 480GB", nvls=False)
    assert spec.startswith("gh200-4:nodes=2") and "gpus_per_node" not in spec
    assert load_topology(spec).hardware.cpu == "arm"


def test_four_h100_per_node_stay_an_nvswitch_nodes_gpus_and_the_reasons_say_the_guess():
    # a log does not tell the 4-GPU HGX board (hgx-h100-4) from 4 ranks of an 8-GPU NVSwitch node or PCIe cards (a
    # trial read an "H100 PCIe" log as the NVLink mesh): the preset is kept, and the reasons name the alternatives
    for nvls in (None, False, True):
        spec, why = topology_spec(NcclLog(source="t.log", nranks=8, nnodes=2, gpus_per_node=4, provider="cxi",
                                          gpu="NVIDIA H100 80GB HBM3", nvls=nvls))
        assert spec.startswith("dgx-h100:") and "gpus_per_node=4" in spec
        assert any("hgx-h100-4" in line and "--topology" in line for line in why)
