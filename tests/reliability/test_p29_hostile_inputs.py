"""p29 F14, F20, F3: nccl-tests rows of `nan` are refused like `inf`; `collsim validate` refuses what it cannot
score and times no collective takes; names from a topology file reach the terminal escaped (sim.io.printable)."""
import json
import os

import pytest
from conftest import ROOT, refused

from sim.io.printable import printable, printable_lines

A1 = os.path.join(ROOT, "tests", "compare", "fixtures", "a1_dgx_a100_all_reduce.txt")


def _with_row_times(tmp_path, value: str):
    """The A1 nccl-tests output with its 32768-byte row's two times replaced by ``value``; (path, line number)."""
    lines = open(A1).read().splitlines()
    n = next(i for i, l in enumerate(lines) if l.split()[:1] == ["32768"])
    f = lines[n].split()
    f[5] = f[9] = value
    lines[n] = "   ".join(f)
    path = tmp_path / f"{value}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path, n + 1


# ---- F14 ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "NaN", "inf"])
def test_a_row_of_nan_times_is_refused_like_inf(user, tmp_path, value):
    path, lineno = _with_row_times(tmp_path, value)
    refused(user("compare", "--measured", path.name, "--topology", "dgx-a100"),
            f"nccl-tests line {lineno}: time_us {value.lower()} is out of range", "damaged")


# ---- F20 ------------------------------------------------------------------------------------------------------
def test_validate_refuses_a_file_with_nothing_to_score(user, tmp_path):
    (tmp_path / "t0.json").write_text(json.dumps({"results": [{"nbytes": 1024, "time_us": 0},
                                                              {"nbytes": 0, "time_us": 3.5}]}))
    refused(user("validate", "t0.json", "-t", "ring:n=2"), "nothing to score", "size 0 or time 0")


def test_validate_refuses_a_time_no_collective_takes(user, tmp_path):
    (tmp_path / "tiny.json").write_text(json.dumps({"results": [{"nbytes": 1024, "time_us": 1e-300}]}))
    line = refused(user("validate", "tiny.json", "-t", "ring:n=2"), "row #0 time_us 1e-300", "microseconds")
    assert len(line) < 400   # no 300-digit error


def test_validate_says_which_rows_it_left_out_and_that_there_is_no_worst_case(user, tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"results": [{"nbytes": 1024, "time_us": 5.0},
                                                             {"nbytes": 0, "time_us": 1.0}]}))
    rc, out, err = user("validate", "m.json", "-t", "ring:n=2")
    assert rc == 0, err
    assert "1 row(s) of size 0 or time 0 left out" in err
    overall = next(l for l in out.splitlines() if l.startswith("overall:"))
    assert "None" not in overall and "no worst case (no size of 64 MiB or more" in overall


def test_validate_names_a_rank_mismatch_not_an_option_never_given(user, tmp_path):
    # an 8-rank nccl-tests output (nGpus 8: one process drives 8 GPUs) against a 3-GPU topology
    rc, out, err = user("validate", A1, "-t", "ring:n=3", "--collective", "all_reduce")
    line = refused((rc, out, err), "has 8 ranks but ring:n=3 has 3 GPUs")
    assert "--gpus-per-process" not in line


# ---- F3 and the shared helper ----------------------------------------------------------------------------
EVIL = "\u03a9mega\u202eevil\n\x1b[31mred"


def test_printable_escapes_what_a_terminal_would_act_on_and_keeps_text():
    assert printable(EVIL) == "\u03a9mega\\u202eevil\\n\\x1b[31mred"
    assert printable("gpu\u00e9 0\t") == "gpu\u00e9 0\\t" and printable(7) == "7"
    assert printable_lines(["a\nb", "c"]) == "a\\nb\nc"   # only the report's own lines break


def test_topology_file_names_are_printed_escaped(user, tmp_path):
    topo = {"name": EVIL, "nodes": [{"name": "gpu\u00e9", "kind": "gpu", "host": 0},
                                    {"name": "gpu\u202e1", "kind": "gpu", "host": 0, "label": "\x1b[2J"}],
            "links": [{"src": "gpu\u00e9", "dst": "gpu\u202e1", "bandwidth_GBps": 10, "latency_us": 1, "duplex": True}]}
    (tmp_path / "u.json").write_text(json.dumps(topo))
    for args in (("topo", "u.json"), ("simulate", "-t", "u.json", "-b", "1K", "-e", "1K")):
        rc, out, err = user(*args)
        assert rc == 0, err
        assert "\x1b" not in out + err and "\u202e" not in out + err
        assert "mega\\u202eevil\\n\\x1b[31mred" in out
    # nccl-tests' header stays one '#' line: every line of the simulate table is a comment or a result row
    header = [l for l in out.splitlines() if "collsim simulate" in l]
    assert len(header) == 1 and header[0].startswith("# collsim simulate: all_reduce on \u03a9mega")
