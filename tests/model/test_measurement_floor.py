"""scripts/measurement_floor.py: pairs of cases on one machine, and how far apart their measurements are.

The expected figures are hand arithmetic on made-up rows, not the script's output."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
measurement_floor = pytest.importorskip("measurement_floor")


def case(cid, system, topology, rows, collective="all_reduce"):
    return {"id": cid, "system": system, "topology": topology, "collective": collective,
            "rows": [{"size": s, "time_us": t, "busbw": b} for s, t, b in rows]}


A = case("A", "site-a", "dgx-h100:nodes=2", [(8, 20.0, 0.0), (1 << 20, 100.0, 1.0), (1 << 30, 9000.0, 200.0)])
B = case("B", "site-b", "dgx-h100:nodes=2", [(8, 30.0, 0.0), (1 << 20, 100.0, 1.0), (1 << 30, 9000.0, 100.0)])
C = case("C", "site-c", "dgx-h100:nodes=4", [(8, 10.0, 0.0)])                            # another machine
D = case("D", "site-d", "dgx-h100:nodes=2", [(8, 10.0, 0.0)], collective="all_gather")   # another call
E = {**case("E", "site-e", "dgx-h100:nodes=2", [(8, 10.0, 0.0)]), "algorithm": "tree"}   # a forced algorithm


def test_only_cases_of_one_machine_collective_and_algorithm_pair_up():
    got = [(a["id"], b["id"], same) for a, b, same, _ in measurement_floor.pairs([A, B, C, D, E])]
    assert got == [("A", "B", False)]


def test_discrepancy_is_both_ways_per_band():
    d = measurement_floor.discrepancy(A, B)
    assert d["small"] == pytest.approx([0.5, 1 / 3])    # 30/20 - 1 and 20/30 - 1
    assert d["mid"] == pytest.approx([0.0, 0.0])
    assert d["large"] == pytest.approx([0.5, 1.0])      # busbw there: 100/200 and 200/100


def test_the_script_prints_the_pooled_medians(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": [A, B, C, D]}))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "measurement_floor.py"), str(path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    pooled = [ln for ln in p.stdout.splitlines() if ln.startswith("| different systems")]
    # small: median of 50% and 33.3% = 41.7%; mid: 0; busbw: median of 50% and 100% = 75%
    assert pooled == ["| different systems, same machine | 41.7% (1) | 0.0% (1) | 75.0% (1) |"]


def test_a_missing_file_is_a_usage_line_not_a_traceback(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "measurement_floor.py"), str(tmp_path / "no.json")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("usage:") and "Traceback" not in p.stderr
