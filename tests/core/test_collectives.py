"""nccl-tests' bus factors and byte conventions."""
import pytest

from sim.algorithms.analytic import algbw_GBps, busbw_GBps
from sim.collectives import COLLECTIVES, get_collective
from sim.errors import CollsimError


@pytest.mark.parametrize("name,n,factor", [
    ("all_reduce", 8, 2 * 7 / 8), ("all_reduce", 2, 1.0), ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 3 / 4),
    ("all_to_all", 16, 15 / 16), ("broadcast", 8, 1.0), ("reduce", 8, 1.0)])
def test_bus_factors_are_nccl_tests(name, n, factor):
    assert get_collective(name).bus_factor(n) == pytest.approx(factor)


def test_busbw_is_algbw_times_factor():
    # PERFORMANCE.md: B = S/t * 2(n-1)/n
    assert algbw_GBps(1e9, 1e4) == pytest.approx(100.0)
    assert busbw_GBps("all_reduce", 8, 1e9, 1e4) == pytest.approx(175.0)


def test_aliases_and_unknown_names():
    assert get_collective("AllReduce").name == "all_reduce"
    assert get_collective("all-gather").name == "all_gather"
    with pytest.raises(CollsimError, match="unknown collective 'allsum'"):
        get_collective("allsum")


def test_all_to_all_chunks_cover_the_block_matrix():
    a2a = COLLECTIVES["all_to_all"]
    assert a2a.chunk_nbytes(1 << 20, 4, 16) == (1 << 20) / 4   # one block = S/n
    assert COLLECTIVES["all_gather"].chunk_nbytes(1 << 20, 4, 8) == (1 << 20) / 8


def test_sharded_collectives_need_whole_shards():
    with pytest.raises(CollsimError, match="equal shards"):
        COLLECTIVES["all_gather"].precondition(4, 6)
