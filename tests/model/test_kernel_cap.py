"""NCCL's per-channel tree kernel cap (perChMaxTreeBw) bounds the engine's tree, as it bounds NCCL's tuner.

Expected values: the cap's closed form from NCCL's table (tuning.cc, Blackwell row: 24 GB/s per channel
at 4+ nodes, 42.8 at 2) and Together AI's published forced-Tree runs on 8 x B200 + 8 x 400G IB nodes
(together-nccl-tests, baselines/flapping-airplanes/2026-05-12 report: 338.52 GB/s at 2 nodes, 192.25 at 4)."""
import pytest

from sim import api
from sim.collectives import get_collective
from sim.nccl import config
from sim.nccl.execution import kernel_cap_us, plan_nccl
from sim.nccl.machine import with_gpus_per_process
from sim.presets import load_topology

B200 = "dgx-b200:nodes={},nics_per_node=8,nic_gbps=400,fabric=ib"
AR = get_collective("all_reduce")
SIZE = 32 << 30


def predict(spec, algorithm, nbytes=SIZE, version="2.28"):
    topo = with_gpus_per_process(load_topology(spec), 8)   # the runs' -g 8
    return api.simulate("all_reduce", nbytes, topo, algorithm=algorithm, protocol="Simple", nccl_version=version)


def test_the_cap_is_nccl_channels_times_the_per_channel_figure():
    with config.use(config.make_config(version="2.28")):
        p = plan_nccl(AR, SIZE, load_topology(B200.format(4)), "tree", "Simple")
    assert p.tuned.nchannels == 8
    # 8 channels x 24 GB/s of busBw, algBw half of it (a tree's bus-to-alg ratio), no correction at 32 GiB
    assert kernel_cap_us(p, SIZE) == pytest.approx(SIZE / (8 * 24.0 * 0.5 * 1e3))


def test_rings_have_no_kernel_cap():
    with config.use(config.make_config(version="2.28")):
        p = plan_nccl(AR, SIZE, load_topology(B200.format(4)), "ring", "Simple")
    assert kernel_cap_us(p, SIZE) == 0.0


@pytest.mark.parametrize("nodes,measured", [(2, 338.52), (4, 192.25)])
def test_forced_tree_on_b200_is_near_the_published_runs(nodes, measured):
    r = predict(B200.format(nodes), "tree")
    assert r.busbw_GBps == pytest.approx(measured, rel=0.10)


def test_the_engine_never_beats_the_cap_and_says_when_it_binds():
    r = predict(B200.format(8), "tree", version="2.28")
    n = 64
    cap_busbw = 8 * 24.0 * 0.5 * 2 * (n - 1) / n   # busbw of the capped algbw
    assert r.busbw_GBps <= cap_busbw * (1 + 1e-9)
    assert r.explain.get("kernel_cap_us", 0) > 0


def test_collnet_direct_takes_nccls_model_of_its_kernels():
    # Together's SHARP runs (same report): CollnetDirect all_reduce on 16 nodes, 563.13 GB/s at 16 GiB and
    # 588.83 at 32 GiB. NCCL's model: 8 channels x the search's 86 GB/s intra-node speed x 0.85 (Hopper+),
    # one GPU per channel (no GPUs-per-channel division); the links alone carry 2 x 400 GB/s of busbw.
    spec = B200.format(16) + ",sharp=1"
    with config.use(config.make_config(version="2.28")):
        p = plan_nccl(AR, SIZE, load_topology(spec), "collnet_direct", "Simple")
    assert p.tuned.detail["kernel_cap_alg_GBps"] == pytest.approx(8 * 86 * 0.85 * 0.5)   # algBw: half of busBw
    for size, measured in ((16 << 30, 563.13), (32 << 30, 588.83)):
        assert predict(spec, "collnet_direct", size).busbw_GBps == pytest.approx(measured, rel=0.10)
