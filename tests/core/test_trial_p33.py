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


@pytest.mark.parametrize("extra", [[], ["-a", "all"]])
def test_the_csv_header_does_not_depend_on_whether_a_row_is_validated(capsys, extra):
    # with -a all, columns follow the note ("fastest", "nccl_pick"): the note was placed by the first row having one
    validated = _header(capsys, "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", *extra)
    extrapolated = _header(capsys, "-t", "dgx-h100:nodes=1024", "-b", "1M", "-e", "1M", *extra)
    assert validated == extrapolated and validated[-1] == "note"


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


def test_a_channel_request_past_maxchannels_is_clamped_not_refused():
    from sim.nccl.config import make_config
    assert make_config("2.24", "NCCL_MIN_NCHANNELS=100").min_channels == 32    # NCCL clamps ("limiting to")
    assert make_config("2.25", "NCCL_MIN_NCHANNELS=100").min_channels == 64


def test_the_nccl_tests_banner_gives_the_release():
    from sim.io.nccl_tests_format import parse_nccl_tests_meta
    banner = "# nccl-tests version 2.17.6 nccl-headers=21903 nccl-library=21903\n"
    assert parse_nccl_tests_meta(banner)["nccl_version"] == "2.19.3"   # NCCL_VERSION_CODE 2 x 10000 + 19 x 100 + 3


def test_p5_mid_sizes_at_32_nodes_are_not_validated_by_the_cases_missed_there(capsys):
    assert main(["simulate", "-t", "dgx-h100:nodes=32,nics_per_node=8,nic_gbps=400,fabric=efa2", "-b", "32M", "-e", "32M",
                 "--nccl-version", "2.27", "--format", "json"]) == 0
    import json
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert row["validated"] is False and "HP-P5-32-AR" in row["note"]


def test_validate_says_when_a_files_release_falls_between_those_documented(tmp_path, capsys):
    # 2.8 stands for 2.8-2.9 (its latency tables); a 2.13 run is scored with 2.18's rules, and says so
    from tests.model.test_nccl_tests_format import CURRENT
    f = tmp_path / "ar.txt"
    f.write_text("# Collective test starting: all_reduce_perf\n" + CURRENT + "# NCCL version 2.13.4+cuda11.7\n")
    assert main(["validate", str(f), "-t", "dgx-h100:gpus_per_node=2"]) == 0
    assert "ran NCCL 2.13.4, between the releases collsim documents: scored with NCCL 2.18's rules" in capsys.readouterr().err
    f.write_text("# Collective test starting: all_reduce_perf\n" + CURRENT + "# NCCL version 2.9.9+cuda11.2\n")
    assert main(["validate", str(f), "-t", "dgx-h100:gpus_per_node=2"]) == 0
    assert "ran NCCL" not in capsys.readouterr().err   # a release an entry stands for: nothing to say
