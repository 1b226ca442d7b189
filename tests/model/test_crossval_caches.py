"""The shortcuts that make a cross-validation fast must not change what it computes.

Each test compares a shortcut with the long way round, computed independently: a fresh topology object
(no cached ring hops), the grid search with every grid value run, a fresh read of /proc/meminfo, a
calibration rebuilt in another process (another string hash seed)."""
from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

from sim.commands import crossval
from sim.commands.validate import load_cases
from sim.nccl import calibration
from sim.nccl.execution import link_efficiency
from sim.prediction import budget
from sim.prediction.flow import ring_flows
from sim.presets import load_topology

CASES = {c["id"]: c for c in load_cases(None)}


def test_values_keys_invert_for_the_fits_mappings_and_any_other():
    fold = {**crossval.PRIORS, "efficiency.ib": 0.9}
    key = crossval._values_key(fold)
    assert crossval._key_values(key) == fold
    assert key != crossval._values_key(crossval.PRIORS)
    other = {"launch_overhead_us": 1.0}   # not the fits' constants: keyed by its sorted items
    assert crossval._key_values(crossval._values_key(other)) == other
    reordered = dict(reversed(list(fold.items())))   # the same values in another order: the same key
    assert crossval._values_key(reordered) == key


def test_tier_hops_cached_for_one_calibration_serve_another_as_a_fresh_topology_would():
    spec = "dgx-h100:nodes=8,nodes_per_leaf=4"
    topo = load_topology(spec)
    orders = [np.arange(topo.nranks)]
    ring_flows(topo, orders, method="tiers", efficiency=lambda _l: 0.5)   # fills the cache for topo
    halved = ring_flows(topo, orders, method="tiers", efficiency=lambda l: link_efficiency(topo, l))
    fresh_topo = load_topology(spec)   # another object: nothing cached for it
    fresh = ring_flows(fresh_topo, orders, method="tiers", efficiency=lambda l: link_efficiency(fresh_topo, l))
    np.testing.assert_array_equal(halved.us_per_byte, fresh.us_per_byte)
    np.testing.assert_array_equal(halved.latency_us, fresh.latency_us)


def test_a_linear_time_constant_fits_as_if_every_grid_value_were_run():
    cases = [crossval.Case(CASES[i]) for i in ("HP-P5-2-A2A", "HP-P5-8-A2A")]
    out = dict(crossval.PRIORS)
    key = "p2p_peer.efa2"
    grid = crossval.P2P_PEER_GRID[::8]
    fitted = crossval._fit_time(grid, cases, out, [key], crossval.PRIORS[key])
    # the long way: every grid value's own runs (base=None), scored by the same rule
    slow = min(grid, key=lambda v: crossval._score(
        [e for c in cases for e in crossval._lat_errors(c, {**out, key: v}, mid=True)], v, crossval.PRIORS[key]))
    assert fitted == pytest.approx(float(slow))


def test_available_memory_is_reread_after_its_ttl(monkeypatch):
    reads = []
    monkeypatch.setattr(budget, "_read_available_memory_bytes", lambda: reads.append(1) or 1000 * len(reads))
    monkeypatch.setattr(budget, "_AVAILABLE", [float("-inf"), 0])
    clock = [100.0]
    monkeypatch.setattr(budget.time, "monotonic", lambda: clock[0])
    assert budget.available_memory_bytes() == 1000
    clock[0] += budget.AVAILABLE_TTL_S / 2
    assert budget.available_memory_bytes() == 1000 and len(reads) == 1
    clock[0] += budget.AVAILABLE_TTL_S
    assert budget.available_memory_bytes() == 2000


def test_a_pickled_calibration_hashes_as_one_built_in_its_own_process():
    cal = calibration.DEFAULT.with_values({"efficiency.ib": 0.77})
    hash(cal)   # cached in this process
    code = ("import pickle, sys; from sim.nccl import calibration as c; x = pickle.loads(sys.stdin.buffer.read()); "
            "y = c.Calibration.from_values(x.as_dict()); print(hash(x) == hash(y), x == y, {x: 1}.get(y))")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(cal), capture_output=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=".")
    assert out.stdout.split() == [b"True", b"True", b"1"]


def test_a_fold_answered_from_earlier_searches_fits_what_a_fresh_fit_does():
    # cases sharing fabrics and fitted constants (two InfiniBand systems, EFA's all_to_all and all_reduce,
    # one-node cases for the launch overhead and the host bounce), so each fold repeats most searches of
    # the fit before it
    ids = ("HP-P5-2-A2A", "HP-P5-8-A2A", "HP-P5-2-AR", "ABCI-A-2-AR", "S2-AR", "S2-AG", "A1", "E1")
    assert set(ids) <= set(CASES), f"public cases renamed: {sorted(set(ids) - set(CASES))}"
    cases = [crossval.Case(CASES[i]) for i in ids]
    crossval._SEARCHES.clear()
    try:
        crossval.fit(cases)   # fills the memo
        for k in range(len(cases)):
            fold = cases[:k] + cases[k + 1:]
            before = len(crossval._SEARCHES)
            warm = crossval.fit(fold)
            made = len(crossval._SEARCHES) - before   # the searches this fold could not take from others
            saved = dict(crossval._SEARCHES)
            crossval._SEARCHES.clear()   # the long way: every search made again
            assert crossval.fit(fold) == warm, f"fold without {cases[k].id}"
            assert made < len(crossval._SEARCHES), f"fold without {cases[k].id} repeated no search"
            crossval._SEARCHES.clear()
            crossval._SEARCHES.update(saved)
    finally:
        crossval._SEARCHES.clear()


def _moved(name: str, value: float) -> float:
    """Another value of constant ``name``: a time 7 us later, a share or efficiency 40% lower."""
    is_time = name.endswith("_us") or name.partition(".")[0] in ("latency", "net_overhead", "p2p_peer")
    return value + 7.0 if is_time else value * 0.6


def _representatives() -> list[crossval.Case]:
    """The smallest public case of each kind the read sets tell apart (fabric, collective, paths, NVLS)."""
    kinds: dict[tuple, crossval.Case] = {}
    for raw in sorted(CASES.values(), key=lambda c: c["id"]):
        c = crossval.Case(raw)
        kind = (c.fabric, c.coll.name, c.p2p_off, c.host_bridge, c.no_gdr, c.nvls_tree, frozenset(c.reads()))
        if kind not in kinds or c.nranks < kinds[kind].nranks:
            kinds[kind] = c
    return list(kinds.values())


@pytest.mark.parametrize("case", _representatives(), ids=lambda c: c.id)
def test_a_case_runs_the_same_whatever_the_constants_it_is_said_not_to_read(case):
    # the memo keys a case's runs by the constants it reads only (Case.key): moving every other constant
    # at once must leave its runs as they are, at a small size (latency constants) and its largest
    rows = case.lat_rows[:1] + case.bw_rows[-1:] or case.mid_rows[-1:]
    sizes = [r["size"] for r in rows]
    unread = {n: _moved(n, v) for n, v in crossval.PRIORS.items() if n not in case.reads()}
    assert unread, "every constant read: nothing to move"
    moved = {**crossval.PRIORS, **unread}
    assert case.key(moved) == case.key(crossval.PRIORS)
    fresh = crossval.Case(case.raw)   # its own memo: the moved values are run, not looked up
    assert fresh.runs(sizes, moved) == case.runs(sizes, crossval.PRIORS)


def test_a_constant_a_case_reads_moves_its_key():
    case = crossval.Case(CASES["HP-P5-2-AR"])
    for name in ("efficiency.efa2", "latency.efa2", "nvls_tree_share", "launch_overhead_us"):
        assert name in case.reads()
        assert case.key({**crossval.PRIORS, name: _moved(name, crossval.PRIORS[name])}) != case.key(crossval.PRIORS)
    assert "efficiency.ib" not in case.reads() and "gdr_host_bridge_efficiency" not in case.reads()
