"""A Blackwell GPU's NVLink hop is slower than NCCL's per-hop table says (issue 23, eighteenth pass).

NCCL's ``hwLat`` for NVLink was measured on earlier GPUs and is the same for every generation. NVIDIA/nccl
#1940 measures one NVLink hop (an 8-byte all_reduce, the same tuning) at 3.0 us on 8 B200 and 2.3 us on 8
H200: 0.7 us more per hop. The constant is that published figure, not a fit, so the public GB200 runs are
out-of-sample evidence for it. Expected values: those runs' published small-size times (OCI, 8 GPUs on two
trays and 128 GPUs on two racks, whose intra-rack tree chain has 63 hops each way), and NCCL's own choice,
which cannot move with a cost NCCL does not know of.
"""
import json
import statistics

import pytest

import sim
from sim.commands import crossval
from sim.commands.validate import PUBLIC_CASES
from sim.nccl import calibration

HOP = "blackwell_nvlink_hop_us"


def _public(case_id: str) -> dict:
    with open(PUBLIC_CASES) as f:
        return next(c for c in json.load(f)["cases"] if c["id"] == case_id)


@pytest.mark.parametrize("case_id", ["B1", "GB200V3-128-AR"])
def test_gb200_small_sizes_follow_the_published_runs(case_id):
    # without the hop: B1 32%, GB200V3-128-AR 49% too fast (NCCL's table alone); with it, near the runs
    case = crossval.Case(_public(case_id))
    rows = case.lat_rows
    assert len(rows) >= 10
    got = case.runs([r["size"] for r in rows], dict(calibration.DEFAULTS))
    errors = [t / r["time_us"] - 1.0 for (t, _), r in zip(got, rows)]
    assert abs(statistics.median(errors)) <= 0.12, errors
    no_hop = case.runs([r["size"] for r in rows], {**calibration.DEFAULTS, HOP: 0.0})
    assert statistics.median(t / r["time_us"] - 1.0 for (t, _), r in zip(no_hop, rows)) < -0.25


def test_nccl_chooses_without_it():
    # NCCL's tuner does not know the hop, so neither does the choice: only the time moves
    spec = "gb200-nvl72:gpus_per_node=8"
    for size in (8, 1 << 12, 1 << 16, 1 << 20, 1 << 24):
        with calibration.override({HOP: 0.0}):
            before = sim.simulate("all_reduce", size, spec)
        with calibration.override({HOP: 5.0}):
            after = sim.simulate("all_reduce", size, spec)
        assert (after.algorithm, after.protocol) == (before.algorithm, before.protocol)
        assert after.time_us > before.time_us


@pytest.mark.parametrize("spec", ["dgx-h100", "dgx-a100:nodes=2"])
def test_other_generations_keep_nccls_table(spec):
    with calibration.override({HOP: 5.0}):
        moved = sim.simulate("all_reduce", 8, spec).time_us
    assert moved == sim.simulate("all_reduce", 8, spec).time_us
