"""NVLSTree's share of NVLS's NVLink rate (``nvls_tree_share``, :func:`sim.nccl.execution.nvls_tree_share`).

A 2-node NVLSTree all_reduce on 8-GPU H100 nodes is bound by NVLink, not by its NICs, and the published
runs reach about 0.92 of the busbw NVLS's rate gives. Expected values are published measurements: the
constant is fitted, as ``collsim validate --cross-validate`` does (``crossval.fit_bandwidth``), on two AWS
p5 systems (EFA), and scored on a Dell XE9680 on InfiniBand (nccl-tests #309, NCCL 2.26.2: 449-469 GB/s
at 1-16 GiB), another vendor, fabric and centre: out of sample.
"""
from __future__ import annotations

import numpy as np
import pytest

from sim.commands import crossval
from sim.commands.validate import load_cases
from sim.nccl import calibration
from sim.nccl.execution import link_efficiency, nvls_tree_share
from sim.presets import load_topology

CASES = {c["id"]: c for c in load_cases(None)}


def test_only_nvls_tree_pays_the_share():
    # a closed form of the definition: the NVLink rate of NVLS, times the share for NVLSTree only
    topo = load_topology("dgx-h100:nodes=2")
    nvlink = next(l for l in topo.links if l.kind == "nvlink")
    net = next(l for l in topo.links if l.kind == "net")
    with calibration.override({"nvls_tree_share": 0.8}):
        assert nvls_tree_share("nvls_tree") == 0.8 and nvls_tree_share("nvls") == 1.0
        nvls = link_efficiency(topo, nvlink, "nvls")
        assert link_efficiency(topo, nvlink, "nvls_tree") == pytest.approx(0.8 * nvls)
        assert link_efficiency(topo, net, "nvls_tree") == link_efficiency(topo, net, "nvls") == link_efficiency(topo, net)
        assert link_efficiency(topo, nvlink, "") == link_efficiency(topo, nvlink) > nvls


def test_which_cases_fit_it():
    # multi-node all_reduce on NVLS nodes of at most 8 GPUs; a rack-scale domain fits its NVLS loss
    # instead (and reads the share); an all_gather or one node never runs NVLSTree
    assert crossval.Case(CASES["P5-2-AR"]).bw_keys() == ["efficiency.efa2", "nvls_tree_share"]
    b3 = crossval.Case(CASES["B3"])
    assert b3.bw_keys() == ["nvls_loss_per_doubling"] and "nvls_tree_share" in b3.rate_keys()
    assert "nvls_tree_share" not in crossval.Case(CASES["B2"]).rate_keys()          # one rack: NVLS alone
    assert not crossval.Case(CASES["TG-US-16-AG-RING"]).nvls_tree                  # all_gather


@pytest.mark.slow
def test_fitted_on_aws_p5_it_predicts_a_dell_xe9680_on_infiniband():
    train = [crossval.Case(CASES[k]) for k in ("P5-2-AR", "HP-P5-2-AR")]
    eff = crossval.fit_bandwidth(train, "efficiency.efa2")
    share = crossval.fit_bandwidth(train, "nvls_tree_share", {**crossval.PRIORS, "efficiency.efa2": eff})
    assert 0.85 <= share <= 0.97        # published 2-node p5 runs: 0.90-0.94 of NVLS's rate
    xe = crossval.Case(CASES["IB-XE9680-2-AR"])

    def error(value):
        return float(np.median([abs(xe.run(r["size"], {**crossval.PRIORS, "nvls_tree_share": value})[1] - r["busbw"])
                                / r["busbw"] for r in xe.bw_rows]))
    assert error(share) < 0.05 < 0.08 < error(1.0)


@pytest.mark.slow
def test_a_nic_bound_run_does_not_fit_it():
    # 8 p5 nodes: NVLSTree's NICs carry the data (274-355 GB/s published), so its busbw hardly moves with
    # NVLink's rate and the case says nothing about the share: fitted on it alone the share keeps its prior
    hp8 = crossval.Case(CASES["HP-P5-8-AR"])
    assert crossval.fit_bandwidth([hp8], "nvls_tree_share") == crossval.PRIORS["nvls_tree_share"]
