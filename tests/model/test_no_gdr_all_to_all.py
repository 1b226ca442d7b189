"""All_to_all from GPUs without GPUDirect RDMA (issue 23, seventeenth pass).

ALCF publishes Polaris's device affinity (``nvidia-smi topo -m``, docs.alcf.anl.gov, Polaris machine
overview): GPU1 and GPU3 reach a NIC at PHB, GPU0 and GPU2 reach both at SYS. NCCL gives a GPU GPUDirect
RDMA only up to NCCL_NET_GDR_LEVEL (PHB at ALCF) and relays through PXN only from a GPU at PXB or nearer
(``src/graph/paths.cc``), so GPU0 and GPU2 stage their network traffic through host memory, while rings and
trees enter the node at the GPUs nearest the NICs. Expected values: the published table (two far GPUs of
four; GPU0 is one of them), and the closed form of an all_to_all bound by its NICs (1/share as long).
"""
import json

import pytest

import sim
from sim.commands import crossval
from sim.commands.validate import PUBLIC_CASES
from sim.nccl import calibration
from sim.presets import load_topology

POLARIS = "hgx-a100-4:nodes=2,nics_per_node=2,nic_gbps=200"
LINE_RATE = {"efficiency.slingshot": 1.0, "p2p_share.slingshot": 1.0, "gdr_host_bridge_efficiency": 1.0}


@pytest.mark.parametrize("spec, far", [(POLARIS, 2), ("hgx-a100-4:nodes=2,gpus_per_node=2", 1),
                                       ("hgx-a100-4:nodes=2,gpus_per_node=1", 1), ("hgx-a100-4", None),
                                       ("gh200-4:nodes=2", None), ("dgx-h100:nodes=2", None),
                                       # another machine than Polaris: a NIC per GPU, or NICs behind the GPUs' switches
                                       ("hgx-a100-4:nodes=2,nics_per_node=4,fabric=ib", None),
                                       ("hgx-a100-4:nodes=2,nic_path=PIX", None),
                                       ("hgx-a100-4:nodes=2,gpus_per_node=2,nics_per_node=2", None)])
def test_the_polaris_preset_draws_alcfs_affinity_table(spec, far):
    assert load_topology(spec).hardware.gpus_without_gdr == far


def _time(coll, share, spec=POLARIS):
    with calibration.override({**LINE_RATE, "no_gdr_p2p_share": share}):
        return sim.simulate(coll, 1 << 30, spec).time_us


def test_only_point_to_point_sends_pay_the_staging():
    # 1 GiB on two Polaris nodes is bound by the NICs: half the share, twice the time
    assert _time("all_to_all", 0.5) == pytest.approx(2 * _time("all_to_all", 1.0), rel=0.05)
    assert _time("all_reduce", 0.5) == _time("all_reduce", 1.0)          # rings and trees: the near GPUs
    assert _time("all_to_all", 0.5, "gh200-4:nodes=2") == _time("all_to_all", 1.0, "gh200-4:nodes=2")


def test_the_fit_keeps_each_cause_to_its_own_runs():
    with open(PUBLIC_CASES) as f:
        data = json.load(f)
    cases = {c["id"]: crossval.Case(c) for c in (data["cases"] if isinstance(data, dict) else data)}
    polaris, alps = cases["C6-2-A2A"], cases["ALPS-14-A2A-226"]
    assert polaris.no_gdr and polaris.bw_keys() == ["no_gdr_p2p_share"]
    assert not alps.no_gdr and alps.bw_keys() == ["p2p_share.slingshot"]
    assert crossval._relevant(polaris, "no_gdr_p2p_share") and not crossval._relevant(alps, "no_gdr_p2p_share")
    # a training set whose only Slingshot all_to_alls are Polaris's keeps the fabric's share at its prior
    assert crossval.fit_bandwidth([polaris], "p2p_share.slingshot") == crossval.PRIORS["p2p_share.slingshot"]
    # and its per-peer cost: Polaris matched tags in software (the copy's runs), so none of them fits it
    assert polaris.software_matching and not alps.software_matching
    assert crossval._uncopied([polaris]) == [] and crossval._uncopied([polaris, alps]) == [alps]
