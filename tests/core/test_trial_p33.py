"""Defects a planner's trial found in the thirty-third pass (docs/accuracy-at-scale.md), pinned.

Expected values are the tool's own contracts stated independently of the code under test: a CSV whose header
does not depend on the data; a topology name that rebuilds the same machine.
"""
import csv
import io

import pytest

from sim.cli import main
from sim.presets import load_topology


def _header(capsys, *args) -> list[str]:
    assert main(["simulate", *args, "--format", "csv"]) == 0
    return next(csv.reader(io.StringIO(capsys.readouterr().out)))


def test_the_csv_header_does_not_depend_on_whether_a_row_is_validated(capsys):
    validated = _header(capsys, "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M")
    extrapolated = _header(capsys, "-t", "dgx-h100:nodes=2048", "-c", "all_to_all", "-b", "1M", "-e", "1M")
    assert validated == extrapolated and "note" in validated


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=128,nodes_per_leaf=8,oversubscription=4", "dgx-h100:nodes=64,nodes_per_leaf=16"])
def test_the_name_of_a_cluster_with_its_own_leaves_rebuilds_it(spec):
    # nodes_per_leaf changes which flows cross the spine (an all_to_all on 128 nodes: 87.3 ms with 8 per leaf, 70.7
    # with 32), and the name dropped it: rerunning the printed spec gave the other cluster
    topo = load_topology(spec)
    again = load_topology(topo.name)
    assert "nodes_per_leaf=" in topo.name
    assert again.hardware.nodes_per_leaf == topo.hardware.nodes_per_leaf
    assert len(again.links) == len(topo.links)


def test_validate_says_when_a_files_release_is_newer_than_those_documented(tmp_path, capsys):
    from tests.model.test_nccl_tests_format import CURRENT
    f = tmp_path / "ar.txt"
    f.write_text("# Collective test starting: all_reduce_perf\n" + CURRENT + "# NCCL version 2.32.3+cuda13.0\n")
    assert main(["validate", str(f), "-t", "dgx-h100:gpus_per_node=2"]) == 0
    assert "ran NCCL 2.32.3, newer than the releases collsim documents: scored with NCCL 2.30's rules" in capsys.readouterr().err


def test_a_variable_the_release_does_not_have_is_named_ignored():
    from sim.nccl.config import make_config
    assert "NCCL_PAT_ENABLE" in make_config("2.18", "NCCL_PAT_ENABLE=0").ignored     # PAT arrived in 2.23
    assert "NCCL_PAT_ENABLE" not in make_config("2.23", "NCCL_PAT_ENABLE=0").ignored
