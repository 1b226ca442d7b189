"""Scoring predictions: exact closed forms, summary metrics, the reading, and the CLI contract."""
import json
import math

import pytest
from compareutil import bench_doc, fixture, write_doc

from real.compare.measured import MeasuredRow, Measurement, read_measurement
from real.compare.predict import Predictor
from real.compare.score import compare, summarize

RING4 = "ring:n=4,bandwidth_GBps=100,latency_us=1"


def _m(collective, nranks, times: dict) -> Measurement:
    return Measurement("synthetic", "collsim-json", collective, nranks,
                       tuple(MeasuredRow(s, t) for s, t in times.items()))


def test_prediction_terms_are_the_ring_closed_form():
    # ring all_reduce on 4 ranks: 6 steps x (1 us + S/4 / 100 GB/s)
    p = Predictor(RING4, algorithm="ring", protocol="ideal")
    for s in (4000, 4_000_000, 400_000_000):
        r = p.predict("all_reduce", s, 4)
        assert r.time_us == pytest.approx(6 * (1 + s / 4 / 1e5))
        assert r.latency_us == pytest.approx(6.0)
        assert r.bandwidth_us == pytest.approx(6 * s / 4 / 1e5)
        assert r.host_us == 0.0 and r.steps == 6 and r.algorithm == "ring" and r.protocol == "ideal"
    assert p.predict("all_reduce", 4000).regime == "latency-bound"          # 6 us latency vs 0.06 us bytes
    assert p.predict("all_reduce", 4_000_000).regime == "bandwidth-bound"   # 6 us vs 60 us


def test_relative_errors_and_summary_are_exact():
    # measured = predicted x (1.1, 0.8, 1.25): errors -1/11, +1/4, -1/5
    exact = {s: 6 * (1 + s / 4 / 1e5) for s in (4000, 400_000, 40_000_000)}
    factors = dict(zip(exact, (1.1, 0.8, 1.25)))
    c = compare(_m("all_reduce", 4, {s: t * factors[s] for s, t in exact.items()}), RING4,
                algorithm="ring", protocol="ideal")
    errs = [r.rel_error for r in c.rows]
    assert errs == pytest.approx([1 / 1.1 - 1, 1 / 0.8 - 1, 1 / 1.25 - 1])
    s = c.summary
    assert s["sizes"] == 3
    assert s["median_abs_rel_error"] == pytest.approx(0.2)  # of 0.0909, 0.25, 0.2
    assert s["mean_abs_rel_error"] == pytest.approx((0.1 / 1.1 + 0.25 + 0.2) / 3)
    logs = [math.log(1 / f) for f in (1.1, 0.8, 1.25)]
    assert s["geomean_error"] == pytest.approx(math.exp(sum(map(abs, logs)) / 3) - 1)
    assert s["geomean_bias"] == pytest.approx(math.exp(sum(logs) / 3) - 1)
    assert s["worst"] == {"nbytes": 400_000, "rel_error": pytest.approx(0.25)}


def test_reading_blames_the_term_that_is_off():
    p = Predictor(RING4, algorithm="ring", protocol="ideal")
    sizes = [4000 * 10 ** k for k in range(6)]
    # the real machine has 3x the latency and the model's bandwidth: the miss is the latency term
    slow_lat = {s: 3 * p.predict("all_reduce", s).latency_us + p.predict("all_reduce", s).bandwidth_us for s in sizes}
    c = compare(_m("all_reduce", 4, slow_lat), RING4, predictor=p)
    text = " ".join(c.reading)
    assert "mostly from the latency term" in text and "latency term x3.00" in text and "bandwidth term x1.00" in text
    # half the bandwidth: the miss is the bandwidth term
    slow_bw = {s: p.predict("all_reduce", s).latency_us + 2 * p.predict("all_reduce", s).bandwidth_us for s in sizes}
    text = " ".join(compare(_m("all_reduce", 4, slow_bw), RING4, predictor=p).reading)
    assert "mostly from the bandwidth term" in text and "bandwidth term x2.00" in text
    assert "Latency-bound below 400000 B (2 sizes), bandwidth-bound from there (4 sizes)." in text


def test_published_nccl_tests_output_is_scored_row_by_row():
    m = read_measurement(fixture("a1_dgx_a100_all_reduce.txt"))
    c = compare(m, "dgx-a100")
    assert len(c.rows) == 20
    rows = c.to_dict()["rows"]
    published_busbw = [1.31, 2.45, 4.43, 7.47, 11.41, 18.0, 36.18, 72.33, 109.93, 106.16, 138.49, 171.54, 176.92,
                       194.07, 222.72, 229.04, 231.41, 233.88, 234.61, 234.89]
    for row, bus in zip(rows, published_busbw):   # decimal GB/s and the 2(n-1)/n factor with n = 8
        assert row["measured_busbw_GBps"] == pytest.approx(bus, rel=0.01, abs=0.01)
        assert row["predicted_time_us"] > 0 and math.isfinite(row["rel_error"])
        assert row["algorithm"] and row["protocol"]
    assert c.summary["sizes"] == 20 and 0 < c.summary["median_abs_rel_error"] < 1


def test_old_layout_scores_the_same_as_the_current_one():
    new = compare(read_measurement(fixture("a1_dgx_a100_all_reduce.txt")), "dgx-a100")
    old = compare(read_measurement(fixture("a1_dgx_a100_all_reduce_old.txt"), collective="all_reduce"), "dgx-a100")
    assert [r.rel_error for r in old.rows] == [r.rel_error for r in new.rows]


def test_min_size_and_time_choice(tmp_path):
    m = Measurement("x", "collsim-json", "all_gather", 2,
                    (MeasuredRow(1024, 100.0, 90.0), MeasuredRow(1 << 20, 700.0, 800.0)))
    c = compare(m, "switch:n=2", time="out-of-place", min_bytes=64 << 10)
    assert [r.nbytes for r in c.rows] == [1 << 20] and c.rows[0].measured_time_us == 700.0
    assert any("left out" in n for n in c.notes)
    assert [r.measured_time_us for r in compare(m, "switch:n=2").rows] == [90.0, 700.0]


def test_cli_json_contract(cli, tmp_path):
    path = write_doc(tmp_path, "ag.json", bench_doc("all_gather", {4096: 150.0, 1 << 20: 900.0}))
    code, out, err = cli("compare", "--measured", path, "--topology", "switch:n=2,bandwidth_GBps=2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["collective"] == "all_gather" and doc["nranks"] == 2
    assert [r["nbytes"] for r in doc["rows"]] == [4096, 1 << 20]
    for r in doc["rows"]:
        assert {"nbytes", "measured_time_us", "predicted_time_us", "rel_error", "algorithm", "protocol",
                "measured_busbw_GBps", "predicted_busbw_GBps", "regime"} <= set(r)
        assert r["rel_error"] == pytest.approx((r["predicted_time_us"] - r["measured_time_us"]) / r["measured_time_us"])
    assert {"median_abs_rel_error", "mean_abs_rel_error", "geomean_error", "worst"} <= set(doc["summary"])


def test_cli_table_and_errors(cli, tmp_path):
    code, out, _ = cli("compare", "--measured", fixture("a1_dgx_a100_all_reduce_old.txt"), "--collective", "all_reduce",
                       "--topology", "dgx-a100")
    assert code == 0
    lines = out.splitlines()
    assert sum(1 for l in lines if l.strip() and not l.startswith("#")) == 20
    assert any("median |error|" in l and "geometric-mean error" in l for l in lines)
    code, _, err = cli("compare", "--measured", fixture("a1_dgx_a100_all_reduce.txt"), "--topology", "switch:n=4")
    assert code == 2 and "8 ranks but topology switch:n=4 has 4 GPUs" in err
    code, _, err = cli("compare", "--measured", str(tmp_path / "none.json"), "--topology", "switch:n=2")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1


def test_summarize_splits_by_regime():
    p = Predictor(RING4, algorithm="ring", protocol="ideal")
    c = compare(_m("all_reduce", 4, {4000: 10.0, 40_000_000: 700.0}), RING4, predictor=p)
    s = summarize(c.rows)["by_regime"]
    assert s["latency-bound"]["sizes"] == 1 and s["bandwidth-bound"]["sizes"] == 1


def test_reading_never_offers_a_correction_that_does_worse():
    # the engine's terms need not add up to its time (pipelining overlaps them): here each size's terms sum
    # to twice the measured time while the predictions miss by +-10%, so the least-squares factors (~0.5)
    # would put every size ~50% off. The reading must not present that as a correction; a factor of 1
    # leaves the prediction exactly as it is
    from real.compare.predict import Prediction
    from real.compare.score import ComparedRow, corrected_time_us, reading, term_factors

    def row(nbytes, measured, miss):
        p = Prediction("all_reduce", nbytes, 8, measured * (1 + miss), "ring", "Simple", 14, 20.0, 2 * measured - 20.0)
        return ComparedRow(nbytes, measured, p)
    rows = [row(1 << 20, 100.0, 0.1), row(1 << 22, 300.0, -0.1), row(1 << 24, 1000.0, 0.1), row(1 << 26, 4000.0, -0.1)]
    assert corrected_time_us(rows[1], None, None) == rows[1].prediction.time_us == corrected_time_us(rows[1], 1.0, 1.0)
    k_lat, k_bw = term_factors(rows)
    assert k_bw is not None and k_bw < 0.7
    text = " ".join(reading(rows, "all_reduce", 8))
    assert "would not lower the median error (10.0%" in text and "only takes" not in text and "best matched" not in text
