"""collsim tune: NCCL's example tuner-plugin CSV, contiguous ranges, agreeing with --select fastest."""
import json
import subprocess
import sys

import sim
from sim.commands.tune import config_lines

TOPO = "dgx-h100"   # one node: quick to predict


def _tune(*args):
    return subprocess.run([sys.executable, "-m", "sim", "tune", *args], capture_output=True, text=True, timeout=300)


def _rows(path):
    rows = []
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            c, lo, hi, a, p, ch, nn, nr = line.strip().split(",")
            rows.append((c, int(lo), int(hi), a, p, int(ch), int(nn), int(nr)))
    return rows


def test_ranges_cover_zero_to_max_and_match_select_fastest(tmp_path):
    out = tmp_path / "nccl_tuner.conf"
    p = _tune("--topology", TOPO, "--collective", "all_reduce", "--collective", "all_gather", "-e", "64M", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert open(out).readline().startswith("# NCCL tuner plugin config")
    rows = _rows(out)
    for coll, name in (("allreduce", "all_reduce"), ("allgather", "all_gather")):
        mine = sorted(r for r in rows if r[0] == coll)
        assert mine[0][1] == 0 and mine[-1][2] == 64 << 20
        assert all(b[1] == a[2] + 1 for a, b in zip(mine, mine[1:]))       # no gap, no overlap
        assert all(r[5:] == (-1, 1, 8) for r in mine)                      # NCCL's channels; 1 node, 8 ranks
        for size in (8, 4096, 1 << 20, 64 << 20):
            row = next(r for r in mine if r[1] <= size <= r[2])
            f = sim.simulate(name, size, TOPO, select="fastest")
            assert (row[3], row[4]) == (f.algorithm, f.protocol.lower())


def test_config_lines_merge_equal_neighbours():
    picks = {"reduce": [(1, "ring", "LL"), (2, "ring", "LL"), (4, "tree", "LL128"), (8, "ring", "LL")]}
    assert config_lines(picks, 100, 1, 4) == ["reduce,0,2,ring,ll,-1,1,4", "reduce,3,4,tree,ll128,-1,1,4",
                                              "reduce,5,100,ring,ll,-1,1,4"]


def _bench_doc(algo, proto, times):
    return {"topology": "local:nccl:8", "collective": "all_reduce", "nranks": 8, "backend": "nccl",
            "options": {"nccl_env": [["NCCL_ALGO", algo], ["NCCL_PROTO", proto]]}, "env": {},
            "results": [{"nbytes": s, "time_us": t, "inplace_time_us": t} for s, t in times.items()]}


def test_measured_sweeps_pick_the_measured_fastest(tmp_path):
    ll = tmp_path / "ring_ll.json"
    simple = tmp_path / "ring_simple.json"
    ll.write_text(json.dumps(_bench_doc("Ring", "LL", {1024: 10.0, 1 << 20: 90.0, 1 << 26: 9000.0})))
    simple.write_text(json.dumps(_bench_doc("Ring", "Simple", {1024: 25.0, 1 << 20: 60.0, 1 << 26: 400.0})))
    out = tmp_path / "m.conf"
    p = _tune("--measured", str(ll), str(simple), "-e", "1G", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert _rows(out) == [("allreduce", 0, 1024, "ring", "ll", -1, 1, 8),
                          ("allreduce", 1025, 1 << 30, "ring", "simple", -1, 1, 8)]


def test_bad_inputs_are_one_line_errors(tmp_path):
    unforced = tmp_path / "plain.json"
    doc = _bench_doc("Ring", "LL", {1024: 10.0})
    doc["options"] = {}
    unforced.write_text(json.dumps(doc))
    p = _tune("--measured", str(unforced), "--out", str(tmp_path / "x.conf"))
    assert p.returncode == 2 and "--nccl-algo" in p.stderr and "Traceback" not in p.stderr
    p = _tune("--measured", str(unforced), "--out", str(unforced))
    assert p.returncode == 2 and "also an input of this command" in p.stderr
    p = _tune("--topology", TOPO, "--collective", "all_to_all", "--out", str(tmp_path / "y.conf"))
    assert p.returncode == 2 and "does not cover all_to_all" in p.stderr
