"""Calibration: recover known parameters, resist outliers, write a topology sim loads, cross-validate."""
import json

import pytest
import yaml
from compareutil import SIZES, bench_doc, gloo_time_us, write_doc

import sim
from real.compare.calibrate import calibrate
from real.compare.hostmodel import host_bytes
from real.compare.measured import read_measurement
from real.compare.predict import Predictor
from sim.errors import CollsimError
from sim.presets import load_topology

B, T0 = 2.5, 120.0   # GB/s, us


def _gloo(tmp_path, collective, latency_us=0.0, host=True, spoil=()):
    times = {s: gloo_time_us(collective, s, B, T0, latency_us, host) for s in SIZES}
    oop = {s: t * (3.0 if s in spoil else 1.0) for s, t in times.items()}   # another process stole the CPU
    doc = bench_doc(collective, oop, times)
    return read_measurement(write_doc(tmp_path, f"{collective}.json", doc))


def test_host_model_counts():
    # all_reduce: read two halves, write one; all_gather: fresh S, own shard copied in, S copied out
    assert host_bytes("torch-gloo", "all_reduce", 1 << 20, 2) == 3 * (1 << 19)
    assert host_bytes("torch-gloo", "all_reduce", 3 << 20, 3) == 3 * (2 << 20)
    assert host_bytes("torch-gloo", "all_gather", 1 << 20, 2) == 4 * (1 << 20)
    assert host_bytes("torch-gloo", "all_gather", 4 << 20, 4) == 3.5 * (4 << 20)
    assert host_bytes("torch-gloo", "broadcast", 1 << 20, 2) is None
    assert host_bytes("none", "all_reduce", 1 << 20, 2) == 0.0


def test_recovers_bandwidth_and_overhead_from_all_gather(tmp_path):
    cal = calibrate([_gloo(tmp_path, "all_gather")])
    assert cal.bandwidth_GBps == pytest.approx(B, rel=1e-6)
    assert cal.launch_us == pytest.approx(T0, rel=1e-6)
    assert cal.latency_us == 0.0 and cal.host_model == "torch-gloo" and cal.host_GBps == pytest.approx(4 * B)
    assert cal.algorithm == "ring" and cal.fit_median_abs_rel_error < 1e-6
    assert any("cannot be told apart" in n for n in cal.notes)
    # the calibrated predictor reproduces the hand-written closed form, e.g. 16 MiB: 120 + 1.5 S / 2.5e3 us
    p = Predictor(cal.topology)
    assert p.predict("all_gather", 16 << 20).time_us == pytest.approx(120 + 1.5 * (16 << 20) / 2.5e3)
    assert p.predict("all_reduce", 16 << 20).time_us == pytest.approx(120 + 1.375 * (16 << 20) / 2.5e3)


def test_holdout_all_reduce_from_all_gather(tmp_path):
    cal = calibrate([_gloo(tmp_path, "all_gather")], holdout=[_gloo(tmp_path, "all_reduce")])
    (held,) = cal.holdout
    assert held.measurement.collective == "all_reduce"
    assert held.summary["median_abs_rel_error"] < 1e-6
    assert [r.prediction.algorithm for r in held.rows] == ["ring"] * len(SIZES)
    assert [r.prediction.steps for r in held.rows] == [2] * len(SIZES)


def test_outliers_are_down_weighted(tmp_path):
    spoiled = _gloo(tmp_path, "all_gather", spoil=(SIZES[1], SIZES[4], SIZES[6]))
    cal = calibrate([spoiled])
    assert cal.bandwidth_GBps == pytest.approx(B, rel=0.02)
    assert cal.launch_us == pytest.approx(T0, rel=0.02)
    weights = {(r["nbytes"], round(r["measured_us"], 3)): r["weight"] for r in cal.residuals}
    spoiled_w = [w for (s, t), w in weights.items() if t > 2 * gloo_time_us("all_gather", s, B, T0)]
    assert len(spoiled_w) == 3 and max(spoiled_w) < 0.2


def test_latency_is_fitted_when_two_collectives_make_it_identifiable(tmp_path):
    ag = _gloo(tmp_path, "all_gather", latency_us=20.0, host=False)
    ar = _gloo(tmp_path, "all_reduce", latency_us=20.0, host=False)
    cal = calibrate([ag, ar], host_model="none")
    assert cal.latency_us == pytest.approx(20.0, rel=1e-5)
    assert cal.launch_us == pytest.approx(T0, rel=1e-5)
    assert cal.bandwidth_GBps == pytest.approx(B, rel=1e-6)
    assert cal.document["meta"]["calibration"]["latency_fitted"] is True


def test_fixed_latency(tmp_path):
    cal = calibrate([_gloo(tmp_path, "all_gather", latency_us=15.0)], latency_us=15.0)
    assert (cal.latency_us, cal.launch_us) == (15.0, pytest.approx(T0))


def test_written_topology_loads_in_sim(tmp_path, cli):
    ag = write_doc(tmp_path, "ag.json", bench_doc("all_gather", {s: gloo_time_us("all_gather", s, B, T0) for s in SIZES}))
    ar = write_doc(tmp_path, "ar.json", bench_doc("all_reduce", {s: gloo_time_us("all_reduce", s, B, T0) for s in SIZES}))
    out = tmp_path / "local.yaml"
    code, text, err = cli("calibrate", ag, "--out", out, "--holdout", ar)
    assert code == 0, err
    assert "link bandwidth" in text and "per-call overhead" in text
    doc = yaml.safe_load(out.read_text())
    cal = doc["meta"]["calibration"]
    assert cal["link_bandwidth_GBps"] == pytest.approx(B) and cal["launch_us"] == pytest.approx(T0)
    assert cal["sources"][0]["collective"] == "all_gather" and len(cal["residuals"]) == 2 * len(SIZES)
    assert cal["holdout"][0]["median_abs_rel_error"] < 1e-6
    topo = load_topology(str(out))
    assert topo.nranks == 2 and [l.bandwidth_GBps for l in topo.links] == [pytest.approx(B)] * 4
    r = sim.simulate("all_gather", 1 << 20, str(out), algorithm="ring", protocol="ideal")
    assert r.time_us == pytest.approx((1 << 19) / 2.5e3)      # the links alone: S/2 at 2.5 GB/s
    code, text, err = cli("compare", "--measured", ar, "--topology", out, "--format", "json")
    assert code == 0 and json.loads(text)["summary"]["median_abs_rel_error"] < 1e-6


def test_calibrate_json_output(tmp_path, cli):
    ag = write_doc(tmp_path, "ag.json", bench_doc("all_gather", {s: gloo_time_us("all_gather", s, B, T0) for s in SIZES}))
    code, text, _ = cli("calibrate", ag, "--out", tmp_path / "t.json", "--format", "json")
    assert code == 0 and json.loads(text)["bandwidth_GBps"] == pytest.approx(B)
    assert load_topology(str(tmp_path / "t.json")).nranks == 2


def test_bad_calibration_inputs(tmp_path, cli):
    flat = write_doc(tmp_path, "flat.json", bench_doc("all_gather", {s: 100.0 for s in SIZES}))
    code, _, err = cli("calibrate", flat, "--out", tmp_path / "x.yaml")
    assert code == 2 and "do not grow with size" in err
    tiny = write_doc(tmp_path, "tiny.json", {**bench_doc("all_gather", {4096: 100.0}), "results": [
        {"nbytes": 4096, "time_us": 100.0}]})
    code, _, err = cli("calibrate", tiny, "--out", tmp_path / "x.yaml")
    assert code == 2 and "at least 3" in err
    code, _, err = cli("calibrate", flat, "--out", tmp_path / "x.txt")
    assert code == 2 and ".yaml" in err
    with pytest.raises(CollsimError, match="not auto"):
        calibrate([read_measurement(flat)], algorithm="auto")
