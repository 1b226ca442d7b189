"""The NICs' line rate bounds busbw across nodes (a GPU's NVLinks inside one node), and the 80% ranges stop there
(a planner's trial, p29; a new user's, p35).

Expected values: the bytes a node must move over its NICs (closed forms in the test), the NICs' raw line rate
from the topology spec, and the published measurements of the public cases, none of which may beat the bound."""
from __future__ import annotations

import pytest

import sim
from sim.commands.validate import load_cases
from sim.prediction.intervals import Interval, clip_to_line_rate, line_rate_busbw
from sim.presets import load_topology

CASES = load_cases(None)


def _loosest(case: dict) -> float | None:
    """The bound for whatever NCCL ran: with SHARP in the fabric, the in-network reduction's (the looser)."""
    topo = load_topology(case["topology"])
    algorithm = case.get("algorithm") or ("collnet_direct" if topo.reducing_switches("sharp") else
                                          "nvls" if topo.reducing_switches("nvls") else "ring")
    return line_rate_busbw(topo, case["collective"], algorithm)


@pytest.mark.parametrize("case", [c for c in CASES if _loosest(c)], ids=lambda c: c["id"])
def test_no_published_run_beats_its_line_rate(case):
    # a measurement above the bound would mean the bound (or the case's hardware) is wrong
    bound = _loosest(case)
    fastest = max(r["busbw"] for r in case["rows"])
    assert fastest <= bound * 1.005, f"{case['id']}: measured {fastest} GB/s busbw over the NICs' {bound:.1f}"


def test_the_bound_by_hand():
    # 2 DGX H100 nodes, 8 x 400G NICs each (400 GB/s a node), 16 ranks: an all_reduce sends and receives
    # 2 x (2-1)/2 of the buffer per node, busbw = 2 (15/16) S / t <= 400 x 15/16 x 2 = 750
    assert line_rate_busbw("dgx-h100:nodes=2", "all_reduce", "ring") == pytest.approx(750.0)
    # all_gather at 4 nodes: a node receives 3/4 of the output, busbw = (31/32) S / t <= 400 x 31/32 x 4/3
    assert line_rate_busbw("dgx-h100:nodes=4", "all_gather", "ring") == pytest.approx(400 * 31 / 32 * 4 / 3)
    # SHARP: the node sends and receives the buffer once, busbw <= 2 x 400 x 127/128 at 16 nodes
    assert line_rate_busbw("dgx-h100:nodes=16,sharp=1", "all_reduce", "collnet_direct") == pytest.approx(800 * 127 / 128)
    # all_to_all: a GPU sends (n-g)/n of its buffer over its node's NICs, shared by g GPUs
    assert line_rate_busbw("dgx-h100:nodes=4", "all_to_all", "p2p") == pytest.approx(50 * 31 / 24)
    # one node: no NICs in the path; a GPU's NVLinks bound it (18 x 25 GB/s on H100), except NVLS (the switch reduces)
    assert line_rate_busbw("dgx-h100", "all_reduce", "ring") == pytest.approx(450.0)
    assert line_rate_busbw("dgx-h100", "all_reduce", "nvls") is None
    # a 4-V100 board: three pairs of 2 NVLink2 links (50 GB/s each way); 2 of its GPUs: one pair
    assert line_rate_busbw("hgx-v100-4", "broadcast", "ring") == pytest.approx(150.0)
    assert line_rate_busbw("hgx-v100-4:gpus_per_node=2", "all_gather", "ring") == pytest.approx(50.0)
    assert line_rate_busbw("pcie:gpus=4", "all_reduce", "ring") is None   # a PCIe box: not drawn


def test_a_range_stops_at_the_line_rate_and_keeps_the_prediction():
    iv = Interval((50.0, 200.0), (100.0, 943.0), True)
    clipped = clip_to_line_rate(iv, 376.0, 400.0)
    assert clipped.busbw_GBps_range == (100.0, 400.0)
    assert clipped.time_us_range == pytest.approx((50.0 * 943.0 / 400.0, 200.0))   # busbw x time is constant
    assert clip_to_line_rate(iv, 376.0, None) == iv
    over = clip_to_line_rate(iv, 500.0, 400.0)   # a prediction above the bound is the model's error: kept, shown
    assert over.busbw_GBps_range[1] == 500.0


@pytest.mark.parametrize("topo, coll", [("dgx-h100:nodes=2048,fabric=roce", "all_reduce"),
                                        ("dgx-b200:nodes=8", "all_to_all"), ("dgx-h100:nodes=32", "all_gather")])
def test_simulate_ranges_never_promise_more_than_the_nics(topo, coll, capsys):
    import json

    from sim.cli import main
    assert main(["simulate", "-t", topo, "-c", coll, "-b", "1G", "-e", "8G", "-f", "8", "--format", "json"]) == 0
    for row in json.loads(capsys.readouterr().out)["results"]:
        bound = line_rate_busbw(topo, coll, row["algorithm"])
        assert row["busbw_GBps_range"][1] <= max(bound, row["busbw_GBps"]) * (1 + 1e-9)
        assert row["time_us_range"][0] <= row["time_us"] <= row["time_us_range"][1]


def test_sim_api_unchanged():
    # the bound is a property of the range, not of the prediction
    r = sim.simulate("all_reduce", 1 << 30, "dgx-h100:nodes=2", algorithm="ring", protocol="Simple")
    assert r.busbw_GBps < line_rate_busbw("dgx-h100:nodes=2", "all_reduce", "ring")
