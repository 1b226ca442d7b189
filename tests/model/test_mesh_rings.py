"""One node of a direct NVLink mesh (4-GPU boards: V100 SXM2, HGX A100 4-GPU, GH200, HGX H100 4-GPU) runs
its rings over every GPU pair, as NCCL's rings do, not one ring over a third of the NVLinks.

Expected values: the mesh's arithmetic (a GPU's three pairs), the simulator's verifier, and ABCI (V)'s
published nccl-tests run on one node of 4 V100 (case ABCI-V-1-AR, 112.5 GB/s busbw at 32 MiB)."""
import json
from collections import Counter
from pathlib import Path

import pytest

import sim
import sim.nccl.execution as nr
from sim.collectives import get_collective
from sim.presets import load_topology
from sim.verify import verify

MESHES = ["hgx-v100-4", "hgx-a100-4", "gh200-4", "hgx-h100-4"]


@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_the_mesh_cycles_are_rings_that_load_every_directed_pair_alike(k):
    cycles = nr.mesh_cycles(k)
    assert all(sorted(c) == list(range(k)) and c[0] == 0 for c in cycles)   # each visits every GPU once
    assert len(set(cycles)) == len(cycles)
    for n in (2, len(cycles)):   # a ring and its reverse (a bound of 2 channels), and the whole set
        load = Counter((c[i], c[(i + 1) % k]) for c in cycles[:n] for i in range(k))
        assert len(set(load.values())) == 1
    if k <= 5:   # small meshes and prime sizes: every directed pair is used
        assert len(load) == k * (k - 1)


@pytest.mark.parametrize("spec", ["dgx-h100", "pcie:gpus=8,sockets=2,gpus_per_switch=1", "fully-connected:n=4"])
def test_other_one_node_machines_keep_rotated_rings(spec):
    topo = load_topology(spec)
    order = nr.channel_order(topo, 1, 4, ring=True).tolist()
    k = topo.nranks
    assert order == [(i + order[0]) % k for i in range(k)]   # a rotation of the drawn ring, not another cycle


@pytest.mark.parametrize("spec", MESHES)
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_mesh_rings_still_compute_the_collective(spec, collective):
    topo = load_topology(spec)
    spread, nch = nr.nccl_channels(topo, "ring")
    p = nr.spread_program("ring", get_collective(collective), topo, nch, 2, root=2)
    assert spread and nch == 6 and verify(p).ok


@pytest.mark.parametrize("spec", MESHES)
def test_a_large_all_reduce_uses_all_three_pairs_of_each_gpu(spec):
    r = sim.simulate("all_reduce", 1 << 30, spec, algorithm="ring", protocol="Simple")
    pair = load_topology(spec).hardware.nvlink_pair_GBps
    used = {k for k, busy in r.link_busy_us.items() if busy > 0 and k.startswith("h0.gpu0->")}
    assert used == {"h0.gpu0->h0.gpu1", "h0.gpu0->h0.gpu2", "h0.gpu0->h0.gpu3"}
    # one ring over one pair could reach at most one pair's rate; three pairs at link efficiency >= 0.7
    assert r.busbw_GBps > 2 * pair and r.busbw_GBps <= 3 * pair


@pytest.mark.parametrize("spec", ["fully-connected:n=4", "examples/topologies/dgx1-hybrid-cube-mesh.yaml"])
def test_a_textbook_mesh_and_a_partial_nvlink_file_keep_their_one_ring(spec):
    # the DGX-1 file joins 16 of 28 pairs: every-order rings would cross pairs without NVLink
    spread, nch = nr.nccl_channels(load_topology(spec), "ring")
    assert not spread and nch == 1


def test_one_v100_node_matches_abci_published_all_reduce():
    cases = json.loads(Path("sim/data/public_cases.json").read_text())["cases"]
    case = next(c for c in cases if c["id"] == "ABCI-V-1-AR")
    row = next(r for r in case["rows"] if r["size"] == 32 << 20)
    r = sim.simulate("all_reduce", row["size"], case["topology"], nccl_version="2.18")
    assert r.busbw_GBps == pytest.approx(row["busbw"], rel=0.15)   # 112.5 GB/s measured; one ring gave 39


def test_a_channel_bound_runs_that_many_mesh_rings_and_explain_names_the_cap():
    topo = load_topology("hgx-v100-4")
    with_bound = sim.simulate("all_reduce", 1 << 28, topo, nccl_env="NCCL_MAX_NCHANNELS=2")
    free = sim.simulate("all_reduce", 1 << 28, topo)
    assert with_bound.explain["mesh_rings"] == 2 and free.explain["mesh_rings"] == 6
    assert not with_bound.explain["channels_spread_over_nics"]   # one node: no NIC in the path
    assert with_bound.time_us > 2 * free.time_us                 # 2 channels of NCCL's 12 cannot fill the links
    from sim.nccl.explain import difference_lines
    assert "kernel cap" in difference_lines(with_bound, topo)[0]
