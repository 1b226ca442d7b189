"""An NCCL topology XML whose numbers are there but are no finite number (inf, nan, text, a zero speed) is
refused in one line, not read as "absent" (a hostile tester's trial, twenty-ninth pass: count="inf" made
every NVLink vanish and speed="nan" gave the NICs the platform's speed, in silence).

Expected: the refusal, and the unedited dump still read; inputs are edits of a shipped NCCL dump."""
from __future__ import annotations

import re

import pytest

DUMP = "tests/data/nccl_topo/h200-baremetal-dump-excerpt.xml"


@pytest.mark.parametrize("pattern, value, names", [
    (r'count="\d+"', 'count="inf"', "count='inf'"),
    (r'count="\d+"', 'count="NaN"', "count='NaN'"),
    (r'sm="\d+"', 'sm="nan"', "sm='nan'"),
    (r'sm="\d+"', 'sm="hopper"', "sm='hopper'"),
    (r'speed="\d+"', 'speed="nan"', "speed='nan'"),
    (r'speed="\d+"', 'speed="0"', "speed='0'"),
    (r'link_speed="[^"]*"', 'link_speed="nan GT/s PCIe"', "link_speed='nan'"),
])
def test_a_number_that_is_no_number_is_refused(cli, tmp_path, pattern, value, names):
    text = open(DUMP).read()
    assert re.search(pattern, text), f"the dump has no {pattern}"
    bad = tmp_path / "topo.xml"
    bad.write_text(re.sub(pattern, value, text))   # every one: the reader reads some of them only
    code, out, err = cli("topo", str(bad))
    assert code == 2 and names in err and len(err.strip().splitlines()) == 1 and not out


def test_the_dump_as_nccl_wrote_it_is_read(cli):
    code, out, _ = cli("topo", DUMP)
    assert code == 0 and "NVLink" in out
