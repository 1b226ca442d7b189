"""One prediction pipeline: every engine run made once per input, Results that derive their bandwidths
and are never changed after the fact, caches keyed by the settings in force, and the cost in the JSON."""
import json
import subprocess
import sys

import pytest

import sim
from sim.engine.result import Result
from sim.engine.runs import LEDGER
from sim.nccl import calibration

TOPO = "dgx-h100:nodes=2"


def test_result_derives_algbw_and_busbw_from_the_time():
    # nccl-tests: algbw = S / t; all_reduce busbw = algbw x 2(n-1)/n; all_gather x (n-1)/n
    r = Result.of("all_reduce", 8_000_000, 8, "ring", "Simple", 100.0, 14)
    assert r.algbw_GBps == pytest.approx(80.0)
    assert r.busbw_GBps == pytest.approx(80.0 * 2 * 7 / 8)
    g = Result.of(sim.get_collective("all_gather"), 4_000_000, 4, "ring", "LL", 50.0, 3, model="flow")
    assert (g.collective, g.busbw_GBps, g.model) == ("all_gather", pytest.approx(80.0 * 3 / 4), "flow")


def test_with_explain_leaves_the_original_alone():
    r = Result.of("all_reduce", 1, 2, "ring", "LL", 1.0, 2, explain={"latency_us": 1.0})
    s = r.with_explain(selected_by="x", latency_us=2.0)
    assert r.explain == {"latency_us": 1.0}
    assert s.explain == {"latency_us": 2.0, "selected_by": "x"} and list(s.explain) == ["latency_us", "selected_by"]


def test_the_same_prediction_twice_runs_the_engine_once():
    before = LEDGER.snapshot()
    a = sim.simulate("all_reduce", 3 << 20, TOPO, "ring", "LL128", model="engine")
    b = sim.simulate("all_reduce", 3 << 20, TOPO, "ring", "LL128", model="engine")
    assert a.time_us == b.time_us
    got = LEDGER.since(before)
    assert got["engine_runs"] == got["distinct_engine_runs"] == 1


def test_sizes_past_the_steady_state_share_their_engine_runs():
    # beyond OPS_BUDGET the engine times a fixed number of NCCL-sized pieces and extrapolates: 2, 4 and
    # 8 GiB of NVLSTree time the same two programs on the same bytes, so two runs serve all three sizes
    before = LEDGER.snapshot()
    times = [sim.simulate("all_reduce", s << 30, TOPO, "nvls_tree", "Simple", model="engine").time_us for s in (2, 4, 8)]
    assert LEDGER.since(before)["engine_runs"] == 2
    assert times[0] < times[1] < times[2]


def test_selection_does_not_change_a_result_it_reuses():
    pinned = sim.simulate("all_reduce", 1 << 10, "dgx-h100", "ring", "LL", model="engine")
    chosen = sim.simulate("all_reduce", 1 << 10, "dgx-h100", model="engine")   # NCCL's pick here: ring/LL
    assert (chosen.algorithm, chosen.protocol) == ("ring", "LL")
    assert "selected_by" in chosen.explain and "selected_by" not in pinned.explain
    assert chosen.time_us == pinned.time_us


def test_caches_follow_the_calibration_in_force():
    args = ("all_reduce", 256 << 20, TOPO, "ring", "Simple")
    base = sim.simulate(*args, model="engine").time_us
    with calibration.override({"efficiency.ib": 0.5 * calibration.value("efficiency.ib")}):
        slow = sim.simulate(*args, model="engine").time_us
    assert slow > 1.3 * base                      # half the NIC rate: a network-bound ring slows down
    assert sim.simulate(*args, model="engine").time_us == base   # and nothing leaked out of the block


def test_faster_choice_reuses_the_runs_selection_made():
    chosen = sim.simulate("all_reduce", 32 << 20, TOPO)
    sim.api.faster_choice(chosen, TOPO)
    before = LEDGER.snapshot()
    sim.api.faster_choice(chosen, TOPO)
    assert LEDGER.since(before)["engine_runs"] == 0


def test_simulate_json_reports_what_it_cost():
    out = subprocess.run([sys.executable, "-m", "sim", "simulate", "--topology", TOPO, "-b", "8", "-e", "8G", "-f", "2",
                          "--format", "json"], capture_output=True, text=True, check=True).stdout
    stats = json.loads(out)["stats"]
    assert set(stats) == {"engine_runs", "distinct_engine_runs", "seconds"}
    assert 1 <= stats["engine_runs"] == stats["distinct_engine_runs"]
    assert stats["seconds"] > 0
