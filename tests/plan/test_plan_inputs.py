"""Workload files, process-group layouts and sub-topologies."""
import glob
import os

import pytest

import sim
from sim.errors import CollsimError
from sim.planning import Layout, from_dict, load_workload, plan_step, sub_topology
from sim.planning.training_workload import parse_count
from sim.presets import load_topology

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "workloads", "*.yaml")))


def test_counts_are_decimal():
    assert parse_count("1B", "p") == 10 ** 9 and parse_count("7e9", "p") == 7 * 10 ** 9
    assert parse_count("512K", "t") == 512_000 and parse_count(1.5e9, "p") == 1_500_000_000


@pytest.mark.parametrize("spec,needle", [
    ({"model": {"params": "1B"}, "parallelism": {"strategy": "zero4"}, "compute": {"layer_forward_ms": 1}}, "strategy"),
    ({"model": {"params": "1B", "layerz": 2}, "compute": {"layer_forward_ms": 1}}, "layerz"),
    ({"model": {"params": "-5"}, "compute": {"layer_forward_ms": 1}}, "params"),
    ({"model": {"params": "1B"}, "compute": {}}, "layer_forward_ms"),
    ({"model": {"params": "1B"}, "compute": {"layer_forward_ms": 1, "mfu": 1.5}}, "mfu"),
    ({"model": {"params": "1B"}, "parallelism": {"shard_group": 4}, "compute": {"layer_forward_ms": 1}}, "shard_group"),
    ({"model": {"params": "1B", "dtype": "int4"}, "compute": {"layer_forward_ms": 1}}, "dtype"),
    ({"compute": {"layer_forward_ms": 1}}, "model.params"),
    ({"model": {"params": "1B"}, "parallelism": {"strategy": "fsdp", "pp": 2}, "compute": {"layer_forward_ms": 1}}, "pp"),
])
def test_bad_workloads_say_what_to_fix(spec, needle):
    with pytest.raises(CollsimError, match=needle):
        from_dict(spec)


@pytest.mark.parametrize("par,needle", [({"tp": 3}, "tp=3"), ({"strategy": "zero3", "shard_group": 3}, "shard_group=3"),
                                        ({"tp": 2}, "hidden")])
def test_degrees_must_fit_the_topology(par, needle):
    w = {"model": {"params": "1B", "layers": 4}, "parallelism": par, "compute": {"layer_forward_ms": 1}}
    with pytest.raises(CollsimError, match=needle):
        plan_step(w, "dgx-h100")


def test_yaml_is_read_safely(tmp_path):
    f = tmp_path / "evil.yaml"
    f.write_text("model: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(CollsimError, match="not valid YAML"):
        load_workload(str(f))


@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_examples_plan(path):
    p = plan_step(path)
    assert p.step_us > 0 and p.collectives
    assert p.workload.name == os.path.splitext(os.path.basename(path))[0]


def test_examples_exist():
    names = {os.path.basename(p) for p in EXAMPLES}
    assert {"ddp-1b.yaml", "fsdp-1b.yaml", "tp-dp-8b.yaml", "hsdp-8b.yaml"} <= names


def test_megatron_rank_order():
    lay = Layout.build(world=32, tp=4, pp=2, shard=2)
    assert lay.dp == 4
    assert lay.group("tp") == (0, 1, 2, 3)
    assert lay.group("dp") == (0, 4, 8, 12)
    assert lay.group("shard") == (0, 4) and lay.group("replicate") == (0, 8)
    assert lay.group("pp") == (0, 16)
    for fam in ("tp", "dp", "shard", "replicate"):
        members = sorted(r for g in lay.groups(fam) for r in g)
        assert members == list(range(32)), fam  # every family partitions the ranks


def test_node_subgroup_is_the_single_node_topology():
    two = load_topology("dgx-h100:nodes=2")
    sub = sub_topology(two, range(8, 16))
    assert sub.nranks == 8 and {l.kind for l in sub.links} == {"nvlink"}
    assert sub.meta["nodes"] == 1 and sub.meta["gpus_per_node"] == 8 and sub.meta["nics_per_node"] == 0
    for coll in ("all_reduce", "all_gather"):
        assert sim.simulate(coll, 64 << 20, sub).time_us == pytest.approx(sim.simulate(coll, 64 << 20, "dgx-h100").time_us)


def test_rail_subgroup_keeps_one_nic_per_server():
    four = load_topology("dgx-h100:nodes=4")
    sub = sub_topology(four, (0, 8, 16, 24))
    assert sub.nranks == 4 and sub.nhosts == 4
    assert sub.meta["gpus_per_node"] == 1 and sub.meta["nics_per_node"] == 1
    assert sum(1 for n in sub.nodes if n.kind == "nic") == 4
    assert all(n.kind != "gpu" or n.name in {four.nodes[four.gpus[r]].name for r in (0, 8, 16, 24)} for n in sub.nodes)


def test_group_of_all_ranks_is_the_topology_itself():
    t = load_topology("dgx-h100")
    assert sub_topology(t, range(8)) is t


def test_subgroup_of_a_ring_forwards_through_the_gpus_between():
    sub = sub_topology(load_topology("ring:n=8"), (0, 4))
    assert sub.nranks == 2
    assert [n.kind for n in sub.nodes].count("switch") == 3  # gpu1..gpu3 (or gpu5..gpu7) forward
    with pytest.raises(CollsimError, match="two distinct"):
        sub_topology(load_topology("ring:n=8"), (3,))


@pytest.mark.parametrize("spec", ["dgx-h100:nodes=2", "ring:n=6", "dgx-a100:nodes=2,nics_per_node=4", "fully-connected:n=4"])
def test_one_search_per_member_gives_the_topology_routes(spec):
    from sim.planning.subtopo import shortest_path_tree
    t = load_topology(spec)
    out = [[] for _ in t.nodes]
    for li, l in enumerate(t.links):
        out[t.node_index[l.src]].append((li, t.node_index[l.dst]))
    for a in t.gpus:
        prev = shortest_path_tree(t, a, out)
        for b in t.gpus:
            path, v = [], b
            while v != a:
                li, v = prev[v]
                path.append(li)
            assert tuple(reversed(path)) == t.route_nodes(a, b)


@pytest.mark.parametrize("nics,share", [(8, 1), (2, 4)])
def test_concurrent_rail_groups_share_a_nic(nics, share):
    t = load_topology(f"dgx-h100:nodes=2,nics_per_node={nics}")
    rails = [(j, j + 8) for j in range(8)]
    sub = sub_topology(t, (0, 8), concurrent=rails)
    nic_links = [l for l in sub.links if l.kind == "net"]
    assert nic_links and min(l.bandwidth_GBps for l in nic_links) == pytest.approx(t.meta["nic_GBps"] / share)
    alone = sim.simulate("all_reduce", 256 << 20, sub_topology(t, (0, 8))).time_us
    together = sim.simulate("all_reduce", 256 << 20, sub).time_us
    assert together == pytest.approx(alone, rel=0.01) if share == 1 else together > 3 * alone


@pytest.mark.parametrize("value", [1e30, "1e30", "5000T", 10**16])
def test_a_parameter_count_beyond_any_model_is_refused(value):
    # 1e30 parameters used to plan a step and advise "a larger bucket_mb (at least 7.6e+18)"
    with pytest.raises(CollsimError, match="more than any model or batch"):
        parse_count(value, "model.params")
    assert parse_count("2T", "model.params") == 2 * 10**12 and parse_count(10**15, "model.params") == 10**15


def test_v100_and_gh200_presets_have_a_compute_speed(cli):
    # a new user's trial: plan on hgx-v100-4 or gh200-4 stopped asking for peak_tflops, and --vs then timed an H100
    # cluster's compute at the number given for V100. The datasheets: V100 SXM2 125 TFLOP/s fp16 tensor, A100 312
    # bf16, GH200's H100 989 (1,979 with sparsity)
    import json
    step = {}
    for spec in ("hgx-v100-4:nodes=2", "hgx-a100-4:nodes=2", "gh200-4:nodes=2"):
        code, out, err = cli("plan", "examples/workloads/ddp-1b.yaml", "-t", spec, "--format", "json")
        assert code == 0, err
        step[spec.split(":")[0]] = json.loads(out)["summary"]["compute_us"]
    assert step["hgx-v100-4"] / step["hgx-a100-4"] == pytest.approx(312 / 125)
    assert step["hgx-a100-4"] / step["gh200-4"] == pytest.approx(989 / 312)
