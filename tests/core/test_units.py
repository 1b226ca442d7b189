import pytest

from sim.errors import CollsimError
from sim.units import format_size, parse_size, size_sweep


@pytest.mark.parametrize("text,value", [("8", 8), ("1K", 1024), ("64K", 65536), ("1M", 1 << 20), ("8G", 8 << 30),
                                        ("1KB", 1024), ("2MiB", 2 << 20), ("0.5K", 512)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.3", "-4", "1Q"])
def test_parse_size_rejects(text):
    with pytest.raises(CollsimError):
        parse_size(text)


def test_sweeps_like_nccl_tests():
    assert size_sweep(8, 64, factor=2) == [8, 16, 32, 64]
    assert size_sweep(1 << 20, 3 << 20, step=1 << 20) == [1 << 20, 2 << 20, 3 << 20]
    assert size_sweep(32, 32) == [32]
    with pytest.raises(CollsimError, match="swap -b and -e"):
        size_sweep(64, 8, factor=2)
    assert format_size(3 << 20) == "3M" and format_size(1000) == "1000"
