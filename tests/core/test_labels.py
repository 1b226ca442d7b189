"""Honest labels: NCCL's algorithms and the textbook ones told apart in tables, JSON rows and plots."""
import json
import subprocess
import sys

import pytest

import sim
from sim.algorithms import algorithms, in_nccl

# NCCL 2.27 (src/enqueue.cc, the tuner's tables): which collectives each of its algorithms runs (PAT since
# 2.23: ncclPatEnable, all_gather and reduce_scatter only)
NCCL_RUNS = {"pat": {"all_gather", "reduce_scatter"}, "ring": {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"},
             "tree": {"all_reduce"}, "collnet_direct": {"all_reduce"}, "collnet_chain": {"all_reduce"},
             "nvls": {"all_reduce", "all_gather", "reduce_scatter"}, "nvls_tree": {"all_reduce"},
             "p2p": {"all_to_all"}}


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("name", sorted(algorithms()))
def test_registry_knows_which_algorithms_nccl_runs(name):
    for coll in algorithms()[name].collectives:
        assert in_nccl(name, coll) == (coll in NCCL_RUNS.get(name, set())), (name, coll)


def test_every_json_row_says_in_nccl_and_textbook_rows_are_false():
    rows = json.loads(_cli("simulate", "-t", "dgx-h100:nodes=2", "-a", "all", "-b", "1M", "-e", "1M", "--format", "json"))["results"]
    assert rows and all("in_nccl" in r for r in rows)
    by = {r["algorithm"]: r["in_nccl"] for r in rows}
    assert by["recursive_hd"] is False and by["hierarchical_ring"] is False and by["ring"] is True


def test_pat_chosen_by_nccls_own_rules_is_not_labelled_textbook():
    # one GPU per node on 2.27: NCCL's tuner picks PAT for all_gather; the row must not carry the "^" mark
    out = _cli("simulate", "-t", "dgx-h100:nodes=64,gpus_per_node=1", "-c", "all_gather", "-b", "1M", "-e", "1M",
               "--nccl-version", "2.27")
    rows = [l for l in out.splitlines() if not l.startswith("#")]
    assert rows and " pat " in rows[0] and not rows[0].rstrip().endswith("^")
    assert "not an NCCL algorithm" not in out


def test_table_marks_textbook_rows_and_says_so_in_the_footer():
    out = _cli("simulate", "-t", "dgx-h100:nodes=2", "-a", "all", "-b", "1M", "-e", "1M")
    rows = [l for l in out.splitlines() if not l.startswith("#")]
    assert all(l.rstrip().endswith("^") == (" recursive_hd " in l or " hierarchical_ring " in l) for l in rows)
    assert "# ^ not an NCCL algorithm for all_reduce" in out


def test_select_fastest_says_when_nccl_cannot_run_its_pick():
    # ideal protocol on one switch: no NCCL ranking, and recursive_hd (2 log2 16 = 8 steps) beats the
    # ring (30 steps) at 1 KiB: the pick is one NCCL cannot run, and both the Result and the table say so
    r = sim.simulate("all_reduce", 1 << 10, "switch:n=16", "auto", "ideal", select="fastest")
    assert r.algorithm == "recursive_hd" and "NCCL cannot run" in r.explain["nccl_cannot_run"]
    out = _cli("simulate", "-t", "switch:n=16", "-p", "ideal", "-b", "1K", "-e", "1K", "--select", "fastest")
    assert "--select fastest picked an algorithm NCCL cannot run: recursive_hd at 1024 B" in out
    r = sim.simulate("all_reduce", 1 << 10, "ring:n=16", "auto", "ideal", select="fastest")
    assert r.algorithm == "ring" and "nccl_cannot_run" not in r.explain


@pytest.mark.parametrize("model", ["alpha-beta", "tuner"])
def test_closed_form_models_say_what_they_leave_out(model):
    out = _cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--model", model)
    assert f"# model {model} leaves out:" in out and "contention" in out


def test_plot_legend_marks_textbook_series():
    from sim.viz.bandwidth import plot_bandwidth
    rows = [sim.simulate("all_reduce", s, "dgx-h100", "recursive_hd", "Simple") for s in (1 << 20, 1 << 24)]
    fig = plot_bandwidth({"rhd": rows, "ring": [sim.simulate("all_reduce", 1 << 20, "dgx-h100", "ring", "Simple")]})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["rhd (not in NCCL)", "ring"]
