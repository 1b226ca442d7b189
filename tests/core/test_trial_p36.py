"""Defects a new user's trial found in the thirty-sixth pass (docs/accuracy-at-scale.md), pinned.

Expected values come from a second route to the same answer: the untrimmed nccl-tests file, the preset a
rack-scale spec was meant to be.
"""
import json
import subprocess
import sys

import pytest

ROWS = """#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    70.12   14.95   28.04      0    69.80   15.02   28.17      0
    67108864      16777216     float     sum      -1    520.4  128.96  241.80      0    518.9  129.33  242.49      0
  1073741824     268435456     float     sum      -1   5720.1  187.71  351.96      0   5718.3  187.77  352.07      0
"""


def _nccl_tests(path, device_lines: int):
    # all_reduce over 16 ranks: busbw/algbw = 2 x 15/16 = 1.875 on every row, whatever the device lines say
    devices = "".join(f"#  Rank {r:2d} Group  0 Pid  {100 + r} on node-{r // 8} device {r % 8} [0x18] NVIDIA H100 80GB HBM3\n"
                      for r in range(device_lines))
    path.write_text("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 64(factor) warmup iters: 5 iters: 20\n#\n"
                    f"# Using devices\n{devices}#\n{ROWS}# Avg bus bandwidth    : 207.3\n")
    return str(path)


def test_a_file_cut_to_one_device_line_scores_as_the_whole_file_when_its_columns_fit_the_topology(cli, tmp_path):
    scores = {}
    for lines in (16, 1):
        code, out, err = cli("validate", _nccl_tests(tmp_path / f"ar{lines}.txt", lines), "-t", "dgx-h100:nodes=2",
                             "--format", "json")
        assert code == 0, err
        scores[lines] = json.loads(out)["cases"][0]["bw_median"]
        assert ("device listing was cut" in err) == (lines == 1) and "gives 0" not in err
    assert scores[1] == scores[16]


@pytest.mark.parametrize("extra", [["-t", "dgx-h100:nodes=4"], [], ["-t", "dgx-h100:nodes=2", "-c", "broadcast"]])
def test_a_cut_file_whose_columns_fit_no_given_topology_gets_one_error(cli, tmp_path, extra):
    # a topology of other ranks, none at all, or a collective whose bus factor the columns contradict
    code, _, err = cli("validate", _nccl_tests(tmp_path / "ar1.txt", 1), *extra)
    assert code == 2 and err.count("collsim: error") == 1 and "give --topology the ranks the run had" in err
    assert "Traceback" not in err and "warning" not in err and "out of range" not in err


def test_a_cut_file_with_a_bad_topology_gets_the_topology_error(cli, tmp_path):
    code, _, err = cli("validate", _nccl_tests(tmp_path / "ar1.txt", 1), "-t", "dgx-h100:nodes=abc")
    assert code == 2 and err.count("collsim: error") == 1 and "nodes='abc' is not a valid int" in err


@pytest.mark.parametrize("spec,note", [("gb200-nvl72:nodes=18,gpus_per_node=4", True), ("gb200-nvl72:nodes=2", False),
                                       ("gb200-nvl72:gpus_per_node=8", False), ("dgx-h100:nodes=18,gpus_per_node=4", False)])
def test_a_rack_scale_preset_split_into_tray_sized_domains_is_said_to_be_so(cli, spec, note):
    # nodes= of gb200-nvl72 counts NVLink domains: 18 domains of 4 GPUs are not one rack's 18 trays
    code, _, err = cli("simulate", "-t", spec, "-b", "1G", "-e", "1G")
    assert code == 0
    assert ("separate NVLink domains" in err) == note


def test_a_patch_release_other_than_the_one_read_is_said_in_the_header(cli):
    # collsim reads one release per minor version; asked for another patch, the header names whose rules ran
    # (the JSON's nccl_rules), as it does for a minor version between two entries
    code, out, _ = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--nccl-version", "2.27", "--format", "json")
    assert code == 0
    tag = json.loads(out)["nccl_rules"]
    asked = tag.lstrip("v").split("-")[0].rsplit(".", 1)[0] + ".0"
    code, out, _ = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--nccl-version", asked)
    assert code == 0 and f"asked {asked}: the rules of {tag}" in out.splitlines()[0]
    code, out, _ = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--nccl-version", tag.lstrip("v").split("-")[0])
    assert code == 0 and "asked" not in out.splitlines()[0]


@pytest.mark.parametrize("nodes", ["16385", "2000000", "1e9"])
def test_too_many_nodes_names_the_gpu_limit_whatever_the_count(cli, nodes):
    # nodes=16385 and nodes=1e9 once named two different limits (131,072 GPUs; "at most 1048576")
    code, _, err = cli("simulate", "-t", f"dgx-h100:nodes={nodes}", "-b", "1M", "-e", "1M")
    assert code == 2 and err.count("\n") == 1 and "131,072 GPUs" in err and "1048576" not in err


def test_a_negative_size_says_why_argparse_did_not_take_it():
    p = subprocess.run([sys.executable, "-m", "sim", "simulate", "-t", "dgx-h100:nodes=2", "-b", "-1M", "-e", "1M"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "read as an option" in p.stderr


def test_the_size_message_names_every_suffix_it_accepts(cli):
    code, _, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1T", "-e", "1T")   # T is read
    assert code == 0 and "cannot read" not in err
    code, _, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1P", "-e", "1P")
    assert code == 2 and "K/M/G/T" in err


@pytest.mark.parametrize("spec,why", [("pcie:gpus=8,sockets=2,gpus_per_switch=4", True), ("pcie:gpus=8,sockets=2,gpus_per_switch=1", True),
                                      ("pcie:gpus=8,sockets=2,gpus_per_switch=4,p2p_level=SYS", False), ("pcie:gpus=4,p2p=0", False)])
def test_topo_says_why_p2p_reads_false_when_the_spec_asked_for_it(cli, spec, why):
    # p2p=1 in the spec, "p2p: False" in the summary: the flag is "every pair", and pairs beyond NCCL's P2P
    # level (PXB) bounce through host memory; with p2p_level=SYS every pair talks peer to peer again
    code, out, _ = cli("topo", spec)
    line = next(x for x in out.splitlines() if x.strip().startswith("p2p:"))
    assert code == 0 and ("not every pair" in line) == why
    assert line.strip().startswith("p2p: True") == ("p2p_level=SYS" in spec)
