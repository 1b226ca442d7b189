"""``collsim validate``: the public cases, raw nccl-tests output with --topology, and bad input."""
import json

from sim.commands.validate import PUBLIC_CASES, load_cases, score_case, summarize

A1_TEXT = "".join(f"#  Rank {r:2d} Group  0 Pid  1 on a100 device {r:2d} [0x07] A100-SXM4-80GB\n" for r in range(8)) + """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    67108864      16777216     float     sum      -1    684.6   98.02  171.54      0    684.6   98.02  171.54      0
  1073741824     268435456     float     sum      -1   8203.9  130.88  229.04      0   8203.9  130.88  229.04      0
 17179869184    4294967296     float     sum      -1   127997  134.22  234.89      0   127997  134.22  234.89      0
"""


def test_public_cases_carry_sources_and_topologies():
    cases = load_cases(None)
    assert PUBLIC_CASES.endswith("sim/data/public_cases.json")
    assert {c["id"] for c in cases} >= {"A1", "B1", "C1", "D1", "C6-2", "C6-8", "E1"} and len(cases) >= 20
    assert all(c["source"] and c["topology"] and c["rows"] for c in cases)
    assert next(c for c in cases if c["id"] == "D1")["algorithm"] == "collnet_chain"   # measured with NCCL_ALGO


def test_scores_of_fast_cases():
    """Scoring mechanics on two cases; accuracy is asserted out of sample (E1 with the constants refitted
    on its machine's other collectives only, against its published busbw)."""
    cases = {c["id"]: c for c in load_cases(None)}
    e1 = score_case(cases["E1"])
    assert len(e1["bw_errors"]) == 5 and set(e1["chosen"]) == {"ring/LL", "ring/Simple"}
    c6 = score_case(cases["C6-2"])
    from sim.commands import crossval
    from sim.nccl import calibration
    fitted = crossval.fit([crossval.Case(cases[k]) for k in ("E1-AG", "E1-BC", "E1-RD", "E1-A2A")])
    with calibration.override(fitted):
        assert score_case(cases["E1"])["bw_median"] < 0.10
    total = summarize([e1, c6])
    assert total["bw_points"] == 10 and total["lat_points"] == 29
    assert total["worst_bw_case"] in ("E1", "C6-2")


def test_cli_on_raw_nccl_tests_output(cli, tmp_path):
    f = tmp_path / "a1.txt"
    f.write_text(A1_TEXT)
    code, out, err = cli("validate", f, "--topology", "dgx-a100")
    assert code == 0, err
    assert "a1.txt" in out and "ring/Simple" in out and out.strip().splitlines()[-1].startswith("overall:")
    code, out, _ = cli("validate", f, "--topology", "dgx-a100", "--format", "json")
    d = json.loads(out)
    assert d["overall"]["bw_points"] == 3 and d["overall"]["bw_median"] < 0.25


def test_raw_output_that_names_no_collective(cli, tmp_path):
    # A1's table names no *_perf binary: busbw/algbw = 1.75 = 2(8-1)/8 on every row says all_reduce (and it
    # says so); the same table with all_gather's ratio, (8-1)/8, fits all_gather, reduce_scatter and
    # all_to_all alike: refused, not scored as an all_reduce
    f = tmp_path / "a1.txt"
    f.write_text(A1_TEXT)
    code, out, err = cli("validate", f, "--topology", "dgx-a100")
    assert code == 0 and "says all_reduce" in err
    assert "its out-of-place times, as `collsim compare --time out-of-place`" in out.splitlines()[0]   # which column
    ag = tmp_path / "ag.txt"
    ag.write_text(A1_TEXT.replace("171.54", "85.77").replace("229.04", "114.52").replace("234.89", "117.44")
                  .replace("sum", "none"))
    code, out, err = cli("validate", ag, "--topology", "dgx-a100")
    assert code != 0 and "does not say its collective" in err and "--collective" in err
    code, out, err = cli("validate", ag, "--topology", "dgx-a100", "--collective", "all_gather")
    assert code == 0, err


def test_raw_output_of_two_runs_of_one_size_is_refused(cli, tmp_path):
    # two all_reduce_perf runs of 8 ranks pasted into one file: each size would be scored twice as one sweep
    f = tmp_path / "twice.txt"
    f.write_text("# Collective test starting: all_reduce_perf\n" + A1_TEXT + A1_TEXT)
    code, out, err = cli("validate", f, "--topology", "dgx-a100")
    assert code != 0 and "2 runs" in err and "one run per file" in err


def test_raw_output_is_scored_with_the_nccl_release_it_printed(cli, tmp_path):
    f = tmp_path / "a1.txt"
    f.write_text("# NCCL version 2.21.5+cuda12.4\n" + A1_TEXT)
    code, out, err = cli("validate", f, "--topology", "dgx-a100", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["cases"][0]["nccl_version"] == "2.21"


def test_cli_public_case_and_pins(cli):
    code, out, _ = cli("validate", "--case", "E1")
    assert code == 0 and out.count("\n  E1 ") == 1
    code, out, _ = cli("validate", "--case", "D1", "--model", "tuner")
    assert code == 0 and "collnet_chain/Simple" in out and "[pinned collnet_chain]" in out


def test_cli_errors(cli, tmp_path):
    f = tmp_path / "a1.txt"
    f.write_text(A1_TEXT)
    code, _, err = cli("validate", f)
    assert code == 2 and "--topology" in err
    code, _, err = cli("validate", f, "--topology", "dgx-h100:nodes=2")
    assert code == 2 and "8 ranks" in err and "16 GPUs" in err
    code, _, err = cli("validate", tmp_path / "missing.txt")
    assert code == 2 and "cannot read" in err
    code, _, err = cli("validate", "--case", "Z9")
    assert code == 2 and "no case named Z9" in err


def test_raw_output_cut_inside_a_row_is_refused(cli, tmp_path):
    # a file cut mid-row used to validate on the rows before it, without a word; a short row followed by
    # more output (a wrapped line) is not the end of the file and is only skipped
    f = tmp_path / "cut.txt"
    cut = A1_TEXT.rstrip("\n").rsplit("127997", 1)[0] + "127997  134.22\n"
    f.write_text("# Collective test starting: all_reduce_perf\n" + cut)
    code, out, err = cli("validate", f, "--topology", "dgx-a100")
    assert code != 0 and "cut short" in err and "truncated" in err
    f.write_text("# Collective test starting: all_reduce_perf\n" + cut + "# Avg bus bandwidth    : 200.0\n")
    code, out, err = cli("validate", f, "--topology", "dgx-a100")
    assert code == 0, err
