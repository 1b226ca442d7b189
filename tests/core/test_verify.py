"""The verifier proves correct programs and names the rank and chunk of a wrong one."""
import numpy as np
import pytest

from sim.algorithms import build_program
from sim.collectives import COLLECTIVES
from sim.verify import VerificationError, format_ranks, verify


@pytest.mark.parametrize("collective", list(COLLECTIVES))
def test_every_ring_collective_verifies_for_2_to_16_ranks(collective):
    for n in range(2, 17):
        assert verify(build_program("ring", collective, n, root=n // 2)).ok


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_channels_and_pipelining_keep_programs_correct(collective):
    assert verify(build_program("ring", collective, 6, nchannels=3, pipeline=4)).ok


def test_dropping_one_op_is_caught_and_named():
    prog = build_program("ring", "all_reduce", 4)
    last = int(np.flatnonzero(prog.step == prog.step.max())[0])
    keep = np.ones(prog.nops, bool)
    keep[last] = False
    dst, chunk = int(prog.dst[last]), int(prog.chunk[last])
    with pytest.raises(VerificationError) as e:
        verify(prog.with_ops(keep))
    assert f"rank {dst} ends with chunk {chunk}" in str(e.value)
    assert "should hold the sum of all 4 ranks" in str(e.value)


def test_dropping_an_early_op_is_caught_where_its_data_is_missing():
    prog = build_program("ring", "all_gather", 5)
    keep = np.ones(prog.nops, bool)
    keep[0] = False  # rank 0 never forwards its shard at step 0
    with pytest.raises(VerificationError, match=r"rank 1 sends chunk 0 to rank 2 but holds nothing"):
        verify(prog.with_ops(keep))


def test_swapping_a_destination_is_caught():
    prog = build_program("ring", "all_reduce", 4)
    dst = prog.dst.copy()
    i = int(np.flatnonzero(prog.step == prog.step.max())[0])  # a copy in the all-gather phase
    lost_rank, chunk = int(dst[i]), int(prog.chunk[i])
    dst[i] = (dst[i] + 1) % 4  # deliver it to the wrong neighbour
    with pytest.raises(VerificationError) as e:
        verify(prog.with_ops(dst=dst))
    assert f"rank {lost_rank} ends with chunk {chunk}" in str(e.value)


def test_swapping_a_destination_early_can_still_be_correct():
    # Redirecting the very first reduce of a ring to the next-but-one rank still sums everything
    # (the partial sum just takes another path): the verifier checks meaning, not shape.
    prog = build_program("ring", "all_reduce", 4)
    dst = prog.dst.copy()
    dst[0] = (dst[0] + 1) % 4
    assert verify(prog.with_ops(dst=dst)).ok


def test_double_counting_a_contribution_is_caught():
    prog = build_program("ring", "all_reduce", 3)
    # replay the first reduce-scatter step once more: rank 1 would add rank 0's input twice
    first = np.flatnonzero(prog.step == 0)
    cols = {k: np.concatenate([getattr(prog, k), getattr(prog, k)[first]]) for k in ("src", "dst", "chunk", "channel", "reduce")}
    cols["step"] = np.concatenate([prog.step, np.full(len(first), 1)])
    with pytest.raises(VerificationError, match="counted twice"):
        verify(prog.with_ops(**cols))


def test_format_ranks():
    assert format_ranks(0, 4) == "nothing"
    assert format_ranks(0b1111, 4) == "the sum of all 4 ranks"
    assert format_ranks(0b100, 4) == "rank 2's input"
    assert format_ranks(0b1011, 8) == "{0,1,3}"
    assert format_ranks(0b11111, 8) == "{0-4}"
