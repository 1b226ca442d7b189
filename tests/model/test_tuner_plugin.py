"""aws-ofi-nccl's region tuner (NCCL_TUNER_PLUGIN) as collsim models it.

The geometry is checked against the plugin's own unit test (aws-ofi-nccl v1.16.3,
tests/unit/region_based_tuner.cpp: its polygon, and the points it expects on an edge, inside and outside);
the choices against the plugin's published P5 vertices read by hand. (What the plugin's choices do to the
HyperPod p5 cases, which ran with it, is in docs/accuracy-at-scale.md, sixteenth pass.)"""
import pytest

import sim
from sim.nccl import config
from sim.nccl.tuner_plugin import AWS_OFI, extend_region, region_position

MAX_SIZE, MAX_RANKS = 100.0 * 1024 ** 3, 1024.0 * 1024
MiB, GiB = 1024.0 ** 2, 1024.0 ** 3
P5 = "dgx-h100:nodes={n},nics_per_node=8,nic_gbps=400,fabric=efa2"
OFI = "NCCL_TUNER_PLUGIN=/opt/aws-ofi-nccl/install/lib/libnccl-ofi-tuner.so"


def test_extend_region_as_the_plugin_tests_it():
    z = (MAX_SIZE, MAX_RANKS)
    assert extend_region((2, 8), (4, 8), z) == (MAX_SIZE, 8)            # along x
    assert extend_region((8, 2), (8, 4), z) == (8, MAX_RANKS)           # along y
    slope = (72.0 - 64.0) / (8290304.0 - 8.0)
    assert extend_region((8, 64), (8290304, 72), z) == pytest.approx((MAX_SIZE, 72.0 + slope * (MAX_SIZE - 8290304.0)))
    slope = (1024.0 - 64.0) / (16.0 - 8.0)
    assert extend_region((8, 64), (16, 1024), z) == pytest.approx(((MAX_RANKS - 1024.0) / slope + 16, MAX_RANKS))


def _plugin_test_polygon():
    e = extend_region((48 * MiB, 16), (288 * MiB, 128), (MAX_SIZE, MAX_RANKS))
    return e, (e, (288 * MiB, 128), (48 * MiB, 16), (4 * MiB, 2), (MAX_SIZE, 2))


def test_region_position_matches_the_plugins_unit_test():
    e, poly = _plugin_test_polygon()
    assert [region_position(v, poly) for v in poly] == [0] * 5          # vertices lie on the edge
    # points on the one edge the plugin's test walks (its loop runs where x grows: (4 MiB, 2) to (MAX, 2))
    x = 4 * MiB
    while x < MAX_SIZE:
        assert region_position((x, 2.0), poly) == 0, x
        x *= 2
    inside = [(16 * MiB, 4), (128 * MiB, 4), (GiB, 4), (4 * GiB, 4), (16 * GiB, 4), (32 * GiB, 4), (64 * MiB, 16),
              (GiB, 16), (4 * GiB, 16), (16 * GiB, 16), (32 * GiB, 16), (64 * GiB, 16), (512 * MiB, 128),
              (4 * GiB, 128), (16 * GiB, 128), (32 * GiB, 128), (64 * GiB, 128), (64 * GiB, 256), (MAX_SIZE - 1, 128),
              (e[0] - 1, e[1] - 1)]
    assert [region_position(p, poly) for p in inside] == [1] * len(inside)
    outside = [(8 * MiB, 4), (8 * MiB, 32), (8 * MiB, 128), (8 * MiB, 512), (8 * MiB, MAX_RANKS), (16 * MiB, 8),
               (16 * MiB, 32), (16 * MiB, 128), (16 * MiB, 512), (16 * MiB, MAX_RANKS), (32 * MiB, 16), (32 * MiB, 32),
               (32 * MiB, 64), (32 * MiB, 128), (32 * MiB, 256), (64 * MiB, 32), (64 * MiB, 64), (64 * MiB, 256),
               (64 * MiB, 1024), (256 * MiB, 256), (2 * MiB, 2), (200 * MiB, 128), (GiB, 1024), (GiB, 2048)]
    assert [region_position(p, poly) for p in outside] == [-1] * len(outside)


def _pick(nodes, size, env=OFI, version="2.27"):
    r = sim.simulate("all_reduce", size, P5.format(n=nodes), nccl_version=version, nccl_env=env)
    return (r.algorithm, r.protocol), r.explain.get("selected_by")


def test_the_plugin_picks_its_regions_pair_on_p5():
    # 256 ranks at 2 GiB is the vertex (2147483648, 256) of the plugin's ring/LL128 polygon; 32 ranks at 32 MiB
    # lies under its tree/LL128 edge (31457280,16)-(37748736,32); 32 ranks at 8 GiB is right of (1610612736, 32)
    # on the ring/Simple polygon; NCCL's own model picks none of these there
    assert _pick(32, 2 << 30) == (("ring", "LL128"), AWS_OFI)
    assert _pick(32, 2 << 30, env="")[0] != ("ring", "LL128")
    assert _pick(4, 32 << 20) == (("tree", "LL128"), AWS_OFI)
    assert _pick(4, 8 << 30) == (("ring", "Simple"), AWS_OFI)


def test_the_plugin_stands_aside_where_it_does_and_passes_over_what_nccl_cannot_run():
    ncc = _pick(2, 1 << 30, env="")
    assert _pick(2, 1 << 30) == ncc and AWS_OFI not in str(ncc[1])            # 2 nodes: left to NCCL
    assert _pick(32, 2 << 30, version="2.18") == _pick(32, 2 << 30, env="", version="2.18")   # no plugins before 2.19
    # Ring disabled: (2 GiB, 256) also lies on the edge (1074790400,256)-(2684354560,256) of the NVLSTree polygon
    assert _pick(32, 2 << 30, env=OFI + ",NCCL_ALGO=^Ring") == (("nvls_tree", "Simple"), AWS_OFI)
    assert _pick(32, 2 << 30, env="NCCL_TUNER_PLUGIN=libnccl-ofi-tuner.so", version="2.27")[1] == AWS_OFI
    other = config.make_config("2.27", "NCCL_TUNER_PLUGIN=libmy-tuner.so")
    assert other.tuner_plugin == "" and other.ignored == ("NCCL_TUNER_PLUGIN",)


def test_forcing_the_protocol_nccl_picks_anyway_changes_nothing():
    # NCCL_PROTO=LL128 once dropped Simple from the ratio that sets LL128's share of the bandwidth (15% too fast)
    t = {env: sim.simulate("all_reduce", 2 << 30, P5.format(n=32), nccl_version="2.27", nccl_env=env).time_us
         for env in ("NCCL_ALGO=Ring", "NCCL_ALGO=Ring,NCCL_PROTO=LL128")}
    assert t["NCCL_ALGO=Ring"] == pytest.approx(t["NCCL_ALGO=Ring,NCCL_PROTO=LL128"], rel=1e-9)
