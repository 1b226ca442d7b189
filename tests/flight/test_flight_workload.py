"""Workloads from YAML and the built-ins; fault application."""
import yaml

from sim.flight.faults import apply_rank_faults, parse_faults
from sim.flight.rank_workload import Call, Compute, Wait, from_dict, fsdp_step, tp_dp_step

SPEC = """
world_size: 4
process_groups: {tp: [[0, 1], [2, 3]]}
steps: 2
program:
  - compute_us: 100
  - {all_reduce: 4M, pg: tp, wait: true}
  - {collective: all_gather, nbytes: 1M, dtype: bfloat16}
  - wait
rank_programs:
  3: [{compute_us: 5}, {all_reduce: 4M, pg: tp}, {all_gather: 1M, dtype: bfloat16}, wait]
"""


def test_yaml_workload_with_group_families_and_overrides():
    w = from_dict(yaml.safe_load(SPEC))
    assert w.groups["1"].ranks == (0, 1) and w.groups["2"].ranks == (2, 3) and w.groups["2"].desc == "tp.1"
    assert w.programs[0][:4] == (Compute(100.0), Call("all_reduce", 4 << 20, "float32", "1", True),
                                 Call("all_gather", 1 << 20, "bfloat16", "0", False), Wait())
    assert len(w.programs[0]) == 8 and w.calls(2)[0].pg == "2" and w.programs[3][0] == Compute(5.0)


def test_builtins_issue_the_expected_collectives():
    f = fsdp_step(world_size=4, layers=2)
    assert [c.op for c in f.calls(0)] == ["all_gather"] * 3 + ["reduce_scatter", "all_gather", "reduce_scatter"]
    t = tp_dp_step(world_size=8, tp=4, layers=1)
    assert [t.groups[c.pg].ranks for c in t.calls(5)] == [(4, 5, 6, 7), (1, 5)]


def test_faults_rewrite_one_rank_only_and_keep_call_numbers():
    w = from_dict({"world_size": 3, "program": [{"all_reduce": 1024}, {"all_reduce": 2048}, {"broadcast": 4096}]})
    f = parse_faults([{"kind": "skip", "rank": 1, "call": 0}, {"kind": "size", "rank": 1, "call": 2, "nbytes": 8},
                      {"kind": "straggler", "rank": 2, "call": 1, "delay_us": 7}])
    g = apply_rank_faults(w, f)
    assert [c.nbytes for c in g.calls(1)] == [2048, 8] and g.programs[0] == w.programs[0]
    assert g.programs[2][1] == Compute(7.0) and len(g.calls(2)) == 3
