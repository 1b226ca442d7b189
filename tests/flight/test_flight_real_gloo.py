"""Dumps written by PyTorch's own flight recorder from real 3-rank gloo jobs (torch, CPU only)."""
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from sim.flight.analyze import analyze  # noqa: E402
from sim.flight.loader import load_dir  # noqa: E402

GENERATOR = "/work/shared/checks/lib/fr_skip.py"


def test_demo_skip_pickles_name_rank_2(tmp_path):
    from real.measure.flight_demo import run_demo
    info = run_demo(str(tmp_path), nprocs=3, fault="skip", timeout_s=3)
    assert sorted(info["files"]) == ["rank_0", "rank_1", "rank_2"]
    d = analyze(load_dir(str(tmp_path)))
    # rank 2's 2nd all_reduce took seq 2 with the others' 2nd; the others then wait at seq 3 alone
    assert (d["error_type"], d["culprits"], d["collective_seq_id"]) == ("missing_rank", [2], 3)


def test_demo_dtype_json_names_rank_2(tmp_path):
    from real.measure.flight_demo import run_demo
    run_demo(str(tmp_path), nprocs=3, fault="dtype", timeout_s=3, form="json")
    d = analyze(load_dir(str(tmp_path)))
    # gloo may abort a rank that receives the wrong byte count (it then leaves no dump); rank 2's own
    # record still says float64 where the others say float32
    assert d["culprits"] == [2] and d["collective_seq_id"] == 2
    assert d["error_type"] in ("dtype_mismatch", "missing_rank")


@pytest.mark.skipif(not os.path.exists(GENERATOR), reason="the acceptance generator is not on this machine")
def test_acceptance_generator_dumps_name_rank_2_fast(tmp_path):
    subprocess.run([sys.executable, GENERATOR, str(tmp_path)], capture_output=True, timeout=90)
    assert len(list(tmp_path.glob("rank_*"))) == 3
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sim", "flight", "analyze", str(tmp_path), "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    import json
    d = json.loads(r.stdout)
    assert d["culprits"] == [2] and d["collective_seq_id"] == 3 and elapsed < 30
