"""GB200 NVL72 one rack and two racks against CoreWeave's published nccl-tests output, out of sample.

Expected values are the published measurements (github.com/coreweave/nccl-tests README, "Expected
Performance > GB200", NCCL 2.26.2, ``all_reduce_perf -g 1``, out-of-place busbw), never the model's own
constants. The one constant these cases inform, ``nvls_loss_per_doubling`` (what NVLS loses of NCCL's
``nvlsEfficiency`` per doubling of the NVLink domain beyond 8 GPUs), is fitted here on the *other* rack
case only, exactly as ``collsim validate --cross-validate`` does (``sim.commands.crossval.fit_bandwidth``),
so each prediction is out of sample. The NCCL facts the model takes (32 NVLS heads, NCCL's NVLS loop of
channels x heads x chunk) are checked by closed forms without any fitted constant.
"""
import json

import pytest

import sim
from sim.commands import crossval
from sim.commands.validate import PUBLIC_CASES
from sim.nccl import calibration
from sim.nccl.execution import nvls_loop
from sim.nccl.machine import machine
from sim.presets import load_topology

ONE_RACK_8G_BUSBW = 834.57     # 72 GPUs, 8 GiB
TWO_RACKS_16G_BUSBW = 810.41   # 144 GPUs, 16 GiB
TWO_RACKS_512M_BUSBW = 493.94  # 144 GPUs, 512 MiB
ONE_RACK_512M_BUSBW = 586.06


def case(case_id: str) -> crossval.Case:
    with open(PUBLIC_CASES) as f:
        cases = json.load(f)["cases"]
    return crossval.Case(next(c for c in cases if c["id"] == case_id))


def busbw(topology: str, size: int, loss: float) -> float:
    with calibration.override({"nvls_loss_per_doubling": loss}):
        return sim.simulate("all_reduce", size, topology).busbw_GBps


def test_nvls_heads_and_loop_follow_nccl():
    # NCCL_MAX_NVLS_ARITY = 32 heads on a 72-GPU domain; 24 NVLS channels on one Blackwell NVLink domain,
    # 32 across domains (transport/nvls.cc 2.27); chunk 128 KiB, 64 KiB below 64 x channels x heads x 128 KiB.
    one, two = machine(load_topology("gb200-nvl72")), machine(load_topology("gb200-nvl72:nodes=2"))
    assert nvls_loop("nvls", 8 << 30, one) == (128 << 10, 24 * 32 * (128 << 10))
    assert nvls_loop("nvls", (64 * 24 * 32 * (128 << 10)) - 1, one)[0] == 64 << 10
    assert nvls_loop("nvls_tree", 16 << 30, two) == (128 << 10, 32 * 32 * (128 << 10))
    r = sim.simulate("all_reduce", 8 << 30, "gb200-nvl72", algorithm="nvls", protocol="Simple")
    assert r.explain["pieces_per_channel"] == 8 * 1024 // 96 + 1     # 8 GiB in 96 MiB loops


def test_rack_scale_loss_is_prior_free_at_eight_gpus():
    # The fitted loss applies beyond 8 GPUs only: 8 GPUs of a rack (case B1, 847 GB/s at 32 GiB, OCI
    # nccl-tests README) are predicted the same whatever its value, within 5% of the measurement.
    a, b = busbw("gb200-nvl72:gpus_per_node=8", 16 << 30, 0.0), busbw("gb200-nvl72:gpus_per_node=8", 16 << 30, 0.15)
    assert a == b == pytest.approx(845.72, rel=0.05)


@pytest.mark.slow
def test_one_rack_out_of_sample_from_two_racks():
    loss = crossval.fit_bandwidth([case("B3")], "nvls_loss_per_doubling")   # B2 left out
    assert busbw("gb200-nvl72", 8 << 30, loss) == pytest.approx(ONE_RACK_8G_BUSBW, rel=0.15)
    assert busbw("gb200-nvl72", 512 << 20, loss) == pytest.approx(ONE_RACK_512M_BUSBW, rel=0.15)


@pytest.mark.slow
def test_two_racks_out_of_sample_from_one_rack():
    loss = crossval.fit_bandwidth([case("B2")], "nvls_loss_per_doubling")   # B3 left out
    assert busbw("gb200-nvl72:nodes=2", 16 << 30, loss) == pytest.approx(TWO_RACKS_16G_BUSBW, rel=0.15)


@pytest.mark.xfail(strict=True, reason="known gap: the engine's NVLSTree fills ~3.7 NCCL loops before its steady "
                                       "state where the published two-rack ramp implies ~2.7, so busbw grows 1.9x "
                                       "from 512 MiB to 16 GiB instead of 1.64x (docs/nccl-model.md, GB200 NVL72)")
def test_two_racks_busbw_grows_with_size_as_published():
    loss = calibration.value("nvls_loss_per_doubling")
    small, large = busbw("gb200-nvl72:nodes=2", 512 << 20, loss), busbw("gb200-nvl72:nodes=2", 16 << 30, loss)
    assert large / small == pytest.approx(TWO_RACKS_16G_BUSBW / TWO_RACKS_512M_BUSBW, rel=0.15)
