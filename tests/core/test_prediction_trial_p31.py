"""A new user's findings on the prediction numbers (thirty-first pass), each pinned. Expected values come
from definitions (nccl-tests' columns, the protocols' wire formats: LL carries 8 data bytes per 16, LL128
120 per 128), from NCCL's own rules (NVLS/CollNet/PAT kernels exist for Simple only), or from a second
path through the code (simulate asked directly)."""
import csv
import io
import json
import subprocess
import sys

import pytest

import sim
from sim.errors import CollsimError
from sim.planning.planner import plan_step


def collsim(*args, timeout=600):
    p = subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_csv_holds_every_column_any_row_has():
    # faster_choice appears on some rows only (sizes where a faster NCCL pair exists): the first row lacked it
    p = collsim("simulate", "-t", "dgx-h100:nodes=2", "-b", "8", "-e", "8G", "-f", "4", "--format", "csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    j = json.loads(collsim("simulate", "-t", "dgx-h100:nodes=2", "-b", "8", "-e", "8G", "-f", "4", "--format", "json").stdout)
    assert len(rows) == len(j["results"])
    keys = {k for r in j["results"] for k in r}
    assert keys <= set(rows[0])
    with_choice = [r for r in rows if r["faster_choice"]]
    assert with_choice, "this sweep has sizes with a faster NCCL pair (the case that crashed)"
    assert json.loads(with_choice[0]["faster_choice"])["nccl_env"]          # nested values are JSON
    assert json.loads(rows[0]["time_us_range"])[0] < float(rows[0]["time_us"])


def test_explain_terms_reach_the_json():
    p = collsim("simulate", "-t", "dgx-h100:nodes=16", "-c", "broadcast", "-b", "64K", "-e", "64K", "--explain",
                "--format", "json")
    row = json.loads(p.stdout)["results"][0]
    assert row["explain"]["single_call_us"] > row["time_us"]   # the figure the table's broadcast note points to


def test_textbook_rows_are_not_validated():
    p = collsim("simulate", "-t", "dgx-h100:nodes=2", "-b", "64M", "-e", "64M", "-a", "all", "--format", "json")
    rows = json.loads(p.stdout)["results"]
    assert {r["algorithm"] for r in rows if not r["in_nccl"]}          # this table has textbook rows
    assert all(not r["validated"] and "not one of NCCL's" in r["note"] for r in rows if not r["in_nccl"])
    assert any(r["validated"] for r in rows if r["in_nccl"])


def test_simple_only_algorithms_refuse_other_protocols():
    with pytest.raises(CollsimError, match="Simple protocol only"):
        sim.simulate("all_reduce", 1 << 20, "dgx-h100", "nvls", "LL")
    with pytest.raises(CollsimError, match="Simple protocol only"):
        sim.simulate("all_reduce", 1 << 20, "dgx-h100:nodes=2,sharp=1", "collnet_chain", "LL128")
    with pytest.raises(CollsimError, match="point-to-point"):
        sim.simulate("all_to_all", 1 << 20, "dgx-h100:nodes=2", "p2p", "LL128")
    assert sim.simulate("all_reduce", 1 << 20, "dgx-h100", "nvls", "auto").protocol == "Simple"


def test_all_marks_a_pair_nccl_would_not_run_here():
    # multi-node NVLS needs NVLS+SHARP buffer registration: off by default on sharp=1 (the tuner says why)
    p = collsim("simulate", "-t", "dgx-h100:nodes=4,sharp=1", "-b", "4G", "-e", "4G", "-a", "all", "--format", "json")
    rows = {r["algorithm"]: r for r in json.loads(p.stdout)["results"]}
    assert "multi-node NVLS" in rows["nvls"]["nccl_disabled"] and not rows["nvls"]["validated"]
    assert "nccl_disabled" not in rows["nvls_tree"]
    t = collsim("simulate", "-t", "dgx-h100:nodes=4,sharp=1", "-b", "4G", "-e", "4G", "-a", "all").stdout
    assert any(line.split()[3] == "nvls" and line.rstrip().endswith("~") for line in t.splitlines() if not line.startswith("#"))
    assert "# ~ NCCL would not run this pair here" in t


def _fsdp(protocol):
    return plan_step("examples/workloads/fsdp-1b.yaml", "dgx-h100:nodes=2", protocol=protocol).to_dict()["summary"]


def test_plan_wire_bytes_carry_the_protocols_own_format():
    tiers = {p: _fsdp(p)["tier_bytes"] for p in ("Simple", "LL128", "LL")}
    for tier, simple in tiers["Simple"].items():
        assert tiers["LL"][tier] == pytest.approx(2 * simple, rel=1e-6)              # 16 bytes per 8 of data
        assert tiers["LL128"][tier] == pytest.approx(128 / 120 * simple, rel=1e-6)    # 128 per 120


def test_plan_initial_broadcast_grows_with_the_chain():
    small = plan_step("examples/workloads/ddp-1b.yaml", "dgx-h100:nodes=16").init_broadcast
    large = plan_step("examples/workloads/ddp-1b.yaml", "dgx-h100:nodes=128").init_broadcast
    # the first bucket pays the whole chain from the root, which is longer on 128 nodes
    assert large["time_us"] > small["time_us"]
    one = sim.simulate("broadcast", 250 << 20, "dgx-h100:nodes=128", model="auto")
    assert large["time_us"] > one.explain["single_call_us"]


def _chain_hop_by_hop(rings, first, pieces, wire, lat):
    """The chain's recurrence run over every hop: the reference the periodic skip must reproduce."""
    import numpy as np
    nch = rings.us_per_byte.shape[0]
    first = np.broadcast_to(np.asarray(first, dtype=np.int64), (nch,))
    rows, q, ready = np.arange(nch), np.arange(pieces), np.zeros((nch, pieces))
    for h in range(rings.nranks - 1):
        j = (first + h) % rings.nranks % rings.period
        b = (rings.us_per_byte[rows, j] * wire)[:, None]
        ready = (q + 1) * b + np.maximum.accumulate(ready - q * b, axis=1) + (rings.latency_us[rows, j] + lat)[:, None]
    return float(ready.max())


def test_chain_skips_whole_periods_exactly():
    import types

    import numpy as np

    from sim.prediction.flow import chain_time_us
    rng = np.random.default_rng(7)
    for _ in range(30):
        period, nch = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        rings = types.SimpleNamespace(nranks=period * int(rng.integers(2, 150)), period=period,
                                      us_per_byte=rng.uniform(1e-6, 1e-4, (nch, period)),
                                      latency_us=rng.uniform(0, 5, (nch, period)))
        first, pieces, wire = rng.integers(0, rings.nranks, nch), int(rng.integers(1, 40)), float(rng.uniform(1e3, 1e6))
        want = _chain_hop_by_hop(rings, first, pieces, wire, 0.3)
        assert chain_time_us(rings, first, pieces, wire, 0.3) == pytest.approx(want, rel=1e-12)


def test_engine_runs_whose_routes_would_not_fit_are_refused_up_front():
    # a tree on a ring of 65,536 GPUs routes over up to 32,768 hops each: once an out-of-memory error after 20 s
    p = collsim("simulate", "-t", "ring:n=65536", "-b", "1M", "-e", "1M", timeout=120)
    assert p.returncode != 0 and "-a ring" in p.stderr and "out of memory" not in p.stderr
    r = collsim("simulate", "-t", "ring:n=65536", "-b", "1M", "-e", "1M", "-a", "ring", "--format", "json", timeout=120)
    assert json.loads(r.stdout)["results"][0]["model"] == "flow"
