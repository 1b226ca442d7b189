"""GB200 NVL72 one rack and two racks against CoreWeave's published nccl-tests output.

Expected values are the published measurements (github.com/coreweave/nccl-tests README, "Expected
Performance > GB200", NCCL 2.26.2, ``all_reduce_perf -g 1``, out-of-place busbw), never the model's own
constants. The model is known to miss both (docs/nccl-model.md, "Known gaps"): the passing tests bound
the miss so it cannot grow unnoticed; the strict xfails are the targets and start failing (XPASS) when
the model reaches them.
"""
import pytest

import sim

ONE_RACK_8G_BUSBW = 834.57     # 72 GPUs, 8 GiB
TWO_RACKS_16G_BUSBW = 810.41   # 144 GPUs, 16 GiB
TWO_RACKS_512M_BUSBW = 493.94  # 144 GPUs, 512 MiB


def busbw(topology: str, size: int) -> float:
    return sim.simulate("all_reduce", size, topology).busbw_GBps


def test_one_rack_nvls_bounded_by_published():
    # The engine credits NVLS with (n+1)/n S per GPU at NCCL's 0.74 NVLink efficiency: ~1035 GB/s,
    # 24% above the published 835. Bound: 30% (the gap as documented, plus run-to-run noise).
    got = busbw("gb200-nvl72", 8 << 30)
    assert got == pytest.approx(ONE_RACK_8G_BUSBW, rel=0.30)
    assert got > ONE_RACK_8G_BUSBW   # the documented direction of the miss: above the measurement


def test_two_racks_bounded_by_published_and_below_one_rack():
    # Published: two racks (NVLSTree over one 400G NIC per GPU) reach 810 GB/s at 16 GiB, below one rack's
    # 835-847 at 8 GiB. The engine gives ~530 (35% low); bound 40%. That 530 comes from extrapolating 2 of the
    # pipeline pieces (docs/nccl-model.md): fully simulated it would be ~950, so this bound also catches that change.
    two = busbw("gb200-nvl72:nodes=2", 16 << 30)
    assert two == pytest.approx(TWO_RACKS_16G_BUSBW, rel=0.40)
    assert two < busbw("gb200-nvl72", 8 << 30)


@pytest.mark.xfail(strict=True, reason="known gap: single-rack NVLS predicted ~24% above CoreWeave's 835 GB/s")
def test_one_rack_nvls_within_15_percent():
    assert busbw("gb200-nvl72", 8 << 30) == pytest.approx(ONE_RACK_8G_BUSBW, rel=0.15)


@pytest.mark.xfail(strict=True, reason="known gap: two-rack NVLSTree busbw barely grows with size in the engine "
                                       "(515 -> 530 GB/s) where the published run grows 494 -> 810 from 512 MiB to 16 GiB")
def test_two_racks_busbw_grows_with_size_as_published():
    small, large = busbw("gb200-nvl72:nodes=2", 512 << 20), busbw("gb200-nvl72:nodes=2", 16 << 30)
    assert large / small == pytest.approx(TWO_RACKS_16G_BUSBW / TWO_RACKS_512M_BUSBW, rel=0.15)
