"""The shape of ``sim/data/public_cases.json``: an independent check of every transcription.

nccl-tests prints ``algbw = size / time`` and ``busbw = algbw x factor(n)`` with two decimals, where the
factor is its documented bus factor (nccl-tests doc/PERFORMANCE.md): 2(n-1)/n for all_reduce, (n-1)/n for
all_gather, reduce_scatter and alltoall, 1 for broadcast and reduce. A row whose three printed numbers do
not agree within that rounding was mistyped. The closed forms below are written out here, not taken from
the simulator, so a wrong factor in the code cannot hide a wrong row (or the other way round).
"""
import json
import re

import pytest

from sim.commands.validate import PUBLIC_CASES
from sim.nccl import config as nccl_config
from sim.nccl.machine import with_gpus_per_process
from sim.presets import load_topology

BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}

with open(PUBLIC_CASES) as f:
    CASES = json.load(f)["cases"]


def _ids():
    return [c["id"] for c in CASES]


def test_ids_unique_and_every_case_names_its_system():
    assert len(set(_ids())) == len(CASES)
    for c in CASES:
        assert isinstance(c.get("system"), str) and re.fullmatch(r"[a-z0-9][a-z0-9.-]*", c["system"]), c["id"]
        assert c.get("source") and c.get("conditions") and c.get("topology"), c["id"]
        if "nccl_version" in c:
            assert re.fullmatch(r"2\.\d+(\.\d+)?", c["nccl_version"]), c["id"]
        if "nccl_env" in c:
            env = c["nccl_env"]
            # NCCL's variables, and of libfabric's only those the model reads (the rest stay in "conditions")
            assert env and all((k.startswith("NCCL_") or k in nccl_config.NET_VARIABLES) and isinstance(v, str)
                               for k, v in env.items()), c["id"]


def test_the_set_at_scale_spans_systems_fabrics_and_collectives():
    """The issue's floor: >= 12 cases at >= 128 GPUs from >= 3 systems and 2 fabrics, two collectives
    besides all_reduce at that scale, and one system measured from 2 nodes up."""
    scale = [c for c in CASES if c["nranks"] >= 128]
    assert len(scale) >= 12
    assert len({c["system"] for c in scale}) >= 3
    assert len({c["fabric"] for c in scale}) >= 2
    assert len({c["collective"] for c in scale} - {"all_reduce"}) >= 2
    sweeps = {}
    for c in CASES:
        sweeps.setdefault(c["system"], set()).add(c["nranks"])
    assert any(min(n) <= 16 and max(n) >= 128 and len(n) >= 4 for n in sweeps.values())


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_nranks_match_the_topology(case):
    topo = with_gpus_per_process(load_topology(case["topology"]), case.get("gpus_per_process"))
    assert topo.nranks == case["nranks"]


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_rows_are_sorted_and_self_consistent(case):
    n = case["nranks"]
    factor = BUS_FACTOR[case["collective"]](n)
    sizes = [r["size"] for r in case["rows"]]
    assert sizes == sorted(set(sizes)) and sizes[0] > 0, "sizes strictly increasing, no 0-byte rows"
    for r in case["rows"]:
        assert r["time_us"] > 0 and r["busbw"] >= 0
        if "algbw" not in r:
            continue
        # algbw (GB/s) = size / time: the time is printed with 4-5 significant digits, algbw with 2 decimals.
        algbw = r["size"] / (r["time_us"] * 1e3)
        assert abs(r["algbw"] - algbw) <= 0.006 + 2e-3 * algbw, (case["id"], r)
        # busbw = algbw x factor, both rounded to 2 decimals.
        assert abs(r["busbw"] - r["algbw"] * factor) <= 0.006 + 0.005 * factor + 1e-3 * r["busbw"], (case["id"], r)
