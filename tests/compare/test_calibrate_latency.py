"""calibrate --measured-latency takes the per-step latency alpha from the message latency collsim bench measured
(env.p2p_latency_us): one collective then pins t0, alpha and B apart, and a 2-step collective is predicted from a
1-step one unbiased. Without the flag the measured value is only recorded."""
import pytest
import yaml
from compareutil import SIZES, bench_doc, gloo_time_us, write_doc

from real.compare.calibrate import calibrate, measured_latency_us
from real.compare.measured import read_measurement
from sim.errors import CollsimError

B, T0, ALPHA = 2.5, 120.0, 30.0   # GB/s, us, us


def _measured(tmp_path, collective, p2p=ALPHA, name=None):
    doc = bench_doc(collective, {s: gloo_time_us(collective, s, B, T0, ALPHA) for s in SIZES})
    if p2p is not None:
        doc["env"] = {"p2p_latency_us": p2p, "p2p_rounds": 30}
    return read_measurement(write_doc(tmp_path, name or f"{collective}.json", doc))


def test_measured_latency_separates_alpha_from_overhead(tmp_path):
    cal = calibrate([_measured(tmp_path, "all_gather")], measured_latency=True)
    assert cal.latency_us == ALPHA
    assert cal.launch_us == pytest.approx(T0, rel=1e-6) and cal.bandwidth_GBps == pytest.approx(B, rel=1e-6)
    meta = cal.document["meta"]["calibration"]
    assert meta["latency_source"] == "measured" and meta["p2p_latency_us"] == ALPHA
    assert meta["link_latency_us"] == ALPHA and meta["latency_fitted"] is False
    assert any("message latency collsim bench measured" in n for n in cal.notes)
    # the star's links carry alpha/2 each way: a rank-to-rank message costs alpha
    assert {link.latency_us for link in cal.topology.links} == {ALPHA / 2}


def test_two_step_collective_predicted_unbiased_from_one_step(tmp_path):
    ag, ar = _measured(tmp_path, "all_gather"), _measured(tmp_path, "all_reduce")
    (held,) = calibrate([ag], holdout=[ar], measured_latency=True).holdout
    assert [r.prediction.steps for r in held.rows] == [2] * len(SIZES)
    assert max(abs(r.rel_error) for r in held.rows) < 1e-6
    # without it the second step's alpha is missing: exactly -alpha/T at every size
    cal = calibrate([ag], holdout=[ar])
    assert cal.latency_us == 0.0 and cal.launch_us == pytest.approx(T0 + ALPHA, rel=1e-6)
    meta = cal.document["meta"]["calibration"]
    assert meta["latency_source"] == "none" and meta["p2p_latency_us"] == ALPHA   # recorded, not used
    assert any("--measured-latency uses the files' measured message latency, 30 us" in n for n in cal.notes)
    for r in cal.holdout[0].rows:
        assert r.rel_error == pytest.approx(-ALPHA / gloo_time_us("all_reduce", r.nbytes, B, T0, ALPHA), rel=1e-5)
    assert cal.holdout[0].rows[0].rel_error < -0.1          # 4 KiB: 30 us of ~161 us missing


def test_given_latency_overrides_the_measured_one(tmp_path):
    cal = calibrate([_measured(tmp_path, "all_gather", p2p=99.0)], latency_us=ALPHA, measured_latency=True)
    assert cal.latency_us == ALPHA and cal.launch_us == pytest.approx(T0, rel=1e-6)
    assert cal.document["meta"]["calibration"]["latency_source"] == "given"


def test_median_over_files_fitted_when_identifiable(tmp_path):
    files = [_measured(tmp_path, "all_gather", p2p=v, name=f"ag{i}.json") for i, v in enumerate((20.0, 30.0, 70.0))]
    assert measured_latency_us(files) == 30.0
    bad = [_measured(tmp_path, "all_gather", p2p=v, name=f"bad{i}.json") for i, v in enumerate((0.0, -5.0))]
    assert measured_latency_us(bad) is None and measured_latency_us(files[:1] + bad) == 20.0
    # two collectives pin alpha themselves (a wrong measured latency, 40 us, is not used unless asked for)
    pair = [_measured(tmp_path, "all_gather", p2p=40.0, name="d.json"),
            _measured(tmp_path, "all_reduce", p2p=40.0, name="e.json")]
    cal = calibrate(pair)
    assert cal.latency_us == pytest.approx(ALPHA, rel=1e-5) and cal.launch_us == pytest.approx(T0, rel=1e-5)
    assert cal.document["meta"]["calibration"]["latency_source"] == "fitted"
    assert calibrate(pair, measured_latency=True).latency_us == 40.0


def test_implausible_or_missing_measured_latency(tmp_path):
    # a latency larger than the smallest measured time cannot be a per-step cost of that call
    cal = calibrate([_measured(tmp_path, "all_gather", p2p=5000.0)], measured_latency=True)
    assert cal.latency_us == 0.0 and cal.document["meta"]["calibration"]["latency_source"] == "none"
    assert any("not used" in n for n in cal.notes)
    with pytest.raises(CollsimError, match="carry no measured message latency"):
        calibrate([_measured(tmp_path, "all_gather", p2p=None, name="none.json")], measured_latency=True)


def test_cli_says_where_alpha_comes_from(tmp_path, cli):
    ag = write_doc(tmp_path, "ag.json", {**bench_doc("all_gather", {s: gloo_time_us("all_gather", s, B, T0, ALPHA)
                                                                   for s in SIZES}), "env": {"p2p_latency_us": ALPHA}})
    out = tmp_path / "local.yaml"
    code, text, err = cli("calibrate", ag, "--out", out, "--measured-latency")
    assert code == 0, err
    assert "link latency           30.000 us per step" in text and "message latency collsim bench measured" in text
    cal = yaml.safe_load(out.read_text())["meta"]["calibration"]
    assert cal["latency_source"] == "measured" and cal["launch_us"] == pytest.approx(T0, rel=1e-6)
    code, text, err = cli("calibrate", ag, "--out", out)
    assert code == 0 and "link latency            0.000 us per step" in text and "--measured-latency" in text
