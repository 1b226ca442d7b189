"""Shrink vs re-initialisation: the closed form, the simulation, monotonic behaviour, the docs table."""
import os

import pytest

from sim.errors import CollsimError
from sim.flight.recovery import RecoveryParams, closed_form, compare, simulate, table

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "flight.md")


def test_closed_form_value_by_hand():
    p = RecoveryParams()
    # reinit at 64 ranks: detect 60 + abort 1 + restart 20 + store 64*4*100us + 3 all-gathers of 63 hops
    # of 200us + init 2 + 80 connections * 5ms + checkpoint 60
    assert closed_form("reinit", 64, 1, p)["resume_s"] == pytest.approx(60 + 1 + 20 + 0.0256 + 0.0378 + 2 + 0.4 + 60)
    # shrink at 64 ranks (63 survivors): detect + abort + one all-gather of 62 hops + graphs 1 + connections
    assert closed_form("shrink", 64, 1, p)["resume_s"] == pytest.approx(60 + 1 + 0.0124 + 1 + 0.4)
    assert closed_form("reinit", 64, 1, p)["lost_work_s"] == 900 and closed_form("shrink", 64, 1, p)["lost_work_s"] == 1


@pytest.mark.parametrize("n", [2, 64, 512, 4096])
@pytest.mark.parametrize("method", ["shrink", "reinit"])
def test_simulation_agrees_with_closed_form(n, method):
    assert simulate(method, n)["resume_s"] == pytest.approx(closed_form(method, n)["resume_s"], rel=1e-12)


def test_monotonic_in_ranks_and_shrink_always_faster():
    rows = compare((8, 64, 512, 4096, 8192))
    for a, b in zip(rows, rows[1:]):
        assert b["shrink_resume_s"] > a["shrink_resume_s"] and b["reinit_resume_s"] > a["reinit_resume_s"]
        gap = lambda r: r["reinit_resume_s"] - r["shrink_resume_s"]
        assert gap(b) > gap(a)  # re-init's O(N) rendezvous and all-gathers grow faster
    assert all(r["shrink_total_s"] < r["reinit_total_s"] for r in rows)


def test_with_no_fixed_costs_only_the_scaling_terms_remain():
    zero = {k: 0 for k in RecoveryParams.__dataclass_fields__}
    p = RecoveryParams.from_dict(dict(zero, store_op_us=100, store_ops_per_rank=4, bootstrap_hop_us=200,
                                      init_allgathers=3, shrink_allgathers=1))
    n = 4096
    assert closed_form("reinit", n, 1, p)["resume_s"] == pytest.approx(n * 4 * 100e-6 + 3 * (n - 1) * 200e-6)
    assert simulate("shrink", n, 1, p)["resume_s"] == pytest.approx((n - 2) * 200e-6)


def test_docs_table_is_generated_from_the_code():
    with open(DOC) as f:
        doc = f.read()
    assert table(compare((64, 512, 4096), 1)) in doc


def test_bad_parameters():
    with pytest.raises(CollsimError, match="unknown recovery parameter"):
        RecoveryParams.from_dict({"detect": 1})
    with pytest.raises(CollsimError, match="1 <= failed < ranks"):
        closed_form("shrink", 4, 4)
