"""``collsim simulate`` / ``topo`` / ``verify`` as a user runs them."""
import json

import pytest


def test_simulate_json_contract(cli):
    code, out, _ = cli("simulate", "--topology", "ring:n=8,bandwidth_GBps=100,latency_us=1", "--collective", "all_reduce",
                       "--algorithm", "ring", "--protocol", "ideal", "-b", "1M", "-e", "1G", "-f", "4", "--format", "json")
    assert code == 0
    d = json.loads(out)
    assert d["nranks"] == 8 and d["collective"] == "all_reduce" and d["topology"].startswith("ring")
    assert [r["nbytes"] for r in d["results"]] == [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30]
    for r in d["results"]:
        assert r["steps"] == 14
        assert r["time_us"] == pytest.approx(14 * (1 + r["nbytes"] / 8 / 100e3), rel=1e-3)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 1.75)


def test_simulate_table_looks_like_nccl_tests(cli):
    code, out, _ = cli("simulate", "-t", "ring:n=4", "--algorithm", "ring", "--protocol", "ideal", "-b", "8", "-e", "64", "-f", "8")
    assert code == 0
    lines = out.splitlines()
    assert "size" in lines[1] and "busbw" in lines[1] and "algorithm" in lines[1]
    assert lines[3].split()[:3] == ["8", "2", "float"]
    assert lines[-1].startswith("# Avg bus bandwidth")


def test_simulate_csv(cli):
    code, out, _ = cli("simulate", "-t", "ring:n=4", "-a", "ring", "-p", "ideal", "-b", "1K", "-e", "4K", "-f", "2", "--format", "csv")
    rows = out.splitlines()
    assert code == 0 and rows[0].startswith("nbytes,algorithm,protocol,time_us") and len(rows) == 4


def test_size_not_multiple_of_element_is_refused(cli):
    code, _, err = cli("simulate", "-t", "ring:n=4", "-b", "6", "-e", "6")
    assert code == 2 and "not a multiple of the float element size" in err


def test_unknown_algorithm_and_protocol(cli):
    code, _, err = cli("simulate", "-t", "ring:n=4", "-a", "zigzag", "-b", "8", "-e", "8")
    assert code == 2 and "unknown algorithm 'zigzag'" in err
    code, _, err = cli("simulate", "-t", "ring:n=4", "-a", "ring", "-p", "LL256", "-b", "8", "-e", "8")
    assert code == 2 and "unknown protocol 'LL256'" in err


def test_trace_file_is_chrome_trace_json(cli, tmp_path):
    path = tmp_path / "trace.json"
    code, _, _ = cli("simulate", "-t", "ring:n=4", "-a", "ring", "-p", "ideal", "-b", "1M", "-e", "1M", "--trace", path)
    assert code == 0
    d = json.loads(path.read_text())
    ev = d["traceEvents"]
    assert len(ev) == 4 * 6 and all(e["ph"] == "X" and e["dur"] > 0 for e in ev)
    assert max(e["ts"] + e["dur"] for e in ev) == pytest.approx(6 * (1 + (1 << 20) / 4 / 100e3))


def test_topo_summary_and_plot(cli, tmp_path):
    png = tmp_path / "t.png"
    code, out, _ = cli("topo", "switch:n=4,sharp=1", "--plot", png)
    assert code == 0 and "4 GPUs" in out and "reducing switches: 1 (sharp)" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_topo_lists_presets(cli):
    code, out, _ = cli("topo")
    assert code == 0 and "ring" in out and "switch" in out and "fully-connected" in out


def test_verify_builtin(cli):
    code, out, _ = cli("verify", "ring", "--ranks", "2-5")
    assert code == 0 and "24 of 24 programs verified" in out


USER_ALGO_OK = '''
from sim import Program
COLLECTIVES = ["all_gather"]
def build(collective, nranks):
    # direct all-gather: every rank copies its shard to every other rank in one step
    src, dst = zip(*[(s, d) for s in range(nranks) for d in range(nranks) if s != d])
    return Program.from_ops(collective, nranks, nranks, src, dst, src, [0] * len(src), [False] * len(src),
                            algorithm="direct-student", steps=1)
'''
USER_ALGO_BAD = USER_ALGO_OK.replace("if s != d]", "if s != d and d != 0]")


def test_verify_user_file(cli, tmp_path):
    good = tmp_path / "good.py"
    good.write_text(USER_ALGO_OK)
    code, out, _ = cli("verify", good, "--ranks", "2-6")
    assert code == 0 and "5 of 5 programs verified" in out
    bad = tmp_path / "bad.py"
    bad.write_text(USER_ALGO_BAD)
    code, out, _ = cli("verify", bad, "--ranks", "3")
    assert code == 1 and "FAIL" in out and "rank 0 ends with chunk 1" in out


def test_verify_user_file_that_does_not_import(cli, tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def build(:\n")
    code, _, err = cli("verify", bad)
    assert code == 2 and "failed to import: SyntaxError" in err
