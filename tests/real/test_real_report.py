"""The output formats: nccl-tests' table, the JSON contract, CSV."""
import csv
import io
import json

from real.measure import bench_report as report

ROW = {"nbytes": 1048576, "count": 262144, "dtype": "float", "redop": "sum", "root": -1,
       "time_us": 1234.5, "algbw_GBps": 0.8494, "busbw_GBps": 0.8494, "wrong": 0,
       "inplace_time_us": 45.678, "inplace_algbw_GBps": 22.95, "inplace_busbw_GBps": 22.95, "inplace_wrong": None,
       "algorithm": "measured:gloo", "protocol": None, "steps": None}


def test_table_has_nccl_tests_columns_and_footer():
    head = report.table_header("t", "s", ["Rank 0"], ["a note"]).splitlines()
    cols = head[-2].lstrip("#").split()
    assert cols == ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                    "time", "algbw", "busbw", "#wrong", "spread"]
    assert "# note: a note" in head and "out-of-place" in head[-3] and "in-place" in head[-3]
    fields = report.table_row(ROW).split()
    # nccl-tests' precision: 1234.5 us -> one decimal, 45.678 -> two; -c 0 prints N/A
    assert fields == ["1048576", "262144", "float", "sum", "-1", "1234.5", "0.85", "0.85", "0",
                      "45.68", "22.95", "22.95", "N/A", "N/A"]  # no iterations recorded: no spread
    foot = report.table_footer([ROW, dict(ROW, wrong=3)]).splitlines()
    assert foot[0] == "# Out of bounds values : 3 FAILED"
    assert foot[1] == f"# Avg bus bandwidth    : {(0.8494 * 2 + 22.95 * 2) / 4:.4f}"


def test_json_document_contract():
    doc = report.document("local:gloo:2", "all_reduce", 2, "gloo", "torch", "host", {}, {"torch": "x"}, ["n"], [ROW])
    back = json.loads(report.to_json(doc))
    assert {"topology", "collective", "nranks", "backend", "env", "notes", "results"} <= set(back)
    assert list(back["results"][0]) == list(report.RESULT_KEYS + report.SAMPLE_KEYS)
    assert back["results"][0]["algorithm"] == "measured:gloo" and back["results"][0]["protocol"] is None


def test_csv_one_line_per_size():
    doc = report.document("local:gloo:2", "all_reduce", 2, "gloo", "torch", "host", {}, {}, [], [ROW, ROW])
    rows = list(csv.DictReader(io.StringIO(report.to_csv(doc))))
    assert len(rows) == 2 and rows[0]["topology"] == "local:gloo:2" and float(rows[0]["busbw_GBps"]) == 0.8494
    assert rows[0]["inplace_wrong"] == ""


def test_spread_column_and_noise_warning_from_the_iterations():
    steady = dict(ROW, time_samples_us=[100.0, 101.0, 99.0, 100.0, 100.0], median_time_us=100.0,
                  inplace_time_samples_us=[50.0, 50.0, 50.0, 50.0, 50.0], inplace_median_time_us=50.0,
                  time_us=100.0, inplace_time_us=50.0)
    # quartiles of 99,100,100,100,101 are 100 and 100: no spread; the in-place iterations are all equal
    assert report.table_row(steady).split()[-1] == "0.0"
    assert report.noise_warning([steady]) is None
    # two iterations of ten stalled by a 4 ms scheduler tick: the median stays, the mean doubles
    stalled = dict(steady, time_samples_us=[300.0] * 8 + [4000.0, 4000.0], time_us=(8 * 300 + 8000) / 10,
                   median_time_us=300.0)
    text = report.noise_warning([steady, stalled])
    assert text.startswith("noisy timings at 1 of 2 sizes") and "3.5x the median" in text
    assert "--repeat" in text and "-n 50" in text
    assert report.table_footer([steady, stalled]).splitlines()[0].startswith("# warning: noisy")
    # the quartiles (positions 2.25 and 6.75 of 0..9) both fall among the 300s: the interquartile range
    # ignores two stalls in ten, so it is the mean/median test above that flags this size
    assert report.row_spread(stalled) == 0.0
    half = dict(stalled, time_samples_us=[300.0] * 5 + [4000.0] * 5)   # quartiles at 300 and 4000
    assert report.row_spread(half) == (4000 - 300) / ((300 + 4000) / 2)
