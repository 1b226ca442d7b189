"""One typed home per concept (issue 22): collective facts as data, NCCL's per-collective rules as a
table, keyword-only platform rows, a typed hardware description behind ``Topology.meta``."""
import dataclasses
import json
import subprocess
import sys

import pytest

from sim.collectives import COLLECTIVES, get_collective
from sim.errors import CollsimError
from sim.nccl.constants import NCCL_RULES
from sim.presets import load_topology
from sim.presets.hardware import DGX_H100, Platform
from sim.topology.files import topology_from_dict
from sim.topology.hardware import Hardware

PAIR = {"gpus": 2, "links": [{"src": "gpu0", "dst": "gpu1", "bandwidth_GBps": 10, "duplex": True}]}


@pytest.mark.parametrize("n", [2, 3, 8, 72])
def test_bus_factor_and_ring_steps_are_nccl_tests_formulas(n):
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
    # reduce_scatter, alltoall), 1 (broadcast, reduce); ring all_reduce takes 2(n-1) steps, the others n-1
    want = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "all_to_all": (n - 1) / n, "broadcast": 1.0, "reduce": 1.0}
    for name, factor in want.items():
        c = get_collective(name)
        assert c.bus_factor(n) == pytest.approx(factor)
        assert c.ring_steps(n) == (2 if name == "all_reduce" else 1) * (n - 1)


def test_collective_facts():
    rooted = {c.name for c in COLLECTIVES.values() if c.rooted}
    sharded = {c.name for c in COLLECTIVES.values() if c.sharded}
    assert rooted == {"broadcast", "reduce"} and sharded == {"all_gather", "reduce_scatter"}
    assert [c.name for c in COLLECTIVES.values() if c.root_is_source] == ["broadcast"]
    assert [c.name for c in COLLECTIVES.values() if c.pairwise] == ["all_to_all"]


def test_nccl_rules_cover_every_collective():
    # NCCL runs broadcast/reduce with rings only, all_to_all as grouped p2p sends, and has no tree all_gather
    assert set(NCCL_RULES) == set(COLLECTIVES.values())
    assert NCCL_RULES[get_collective("broadcast")].algorithms == ("ring",)
    assert NCCL_RULES[get_collective("all_to_all")].algorithms == ("p2p",)
    assert "tree" not in NCCL_RULES[get_collective("all_gather")].algorithms
    assert [c.name for c, r in NCCL_RULES.items() if r.allreduce_terms] == ["all_reduce"]


def test_platform_rows_are_keyword_only():
    args = [getattr(DGX_H100, f.name) for f in dataclasses.fields(Platform)][:13]
    with pytest.raises(TypeError):
        Platform(*args)
    assert Platform(**{f.name: getattr(DGX_H100, f.name) for f in dataclasses.fields(Platform)}) == DGX_H100


def test_preset_hardware_is_typed_and_meta_serialises_it():
    t = load_topology("dgx-h100:nodes=2")
    hw = t.hardware
    # DGX H100 datasheet: 18 NVLink4 links x 25 GB/s per direction, 8 x 400 Gb/s ConnectX-7, 2 nodes
    assert (hw.gpu_arch, hw.nvswitch, hw.nvlink_links, hw.nvlink_GBps, hw.nics_per_node, hw.nic_gbps, hw.nodes) == \
        ("hopper", True, 18, 450.0, 8, 400.0, 2)
    assert t.meta["nic_GBps"] == 400 / 8 and t.meta == hw.to_meta()
    assert Hardware.from_meta(t.meta) == hw


def test_topology_file_meta_is_validated_into_hardware():
    t = topology_from_dict({**PAIR, "meta": {"gpu_arch": "ampere", "nvlink_links": 12}})
    assert t.hardware.gpu_arch == "ampere" and t.hardware.nvlink_links == 12 and t.hardware.nics_per_node is None
    with pytest.raises(CollsimError, match=r"meta: unknown key\(s\) gpu_archh: did you mean gpu_arch\?"):
        topology_from_dict({**PAIR, "meta": {"gpu_archh": "ampere"}})
    with pytest.raises(CollsimError, match="meta.nvswitch .* must be true or false"):
        topology_from_dict({**PAIR, "meta": {"nvswitch": "yes"}})


def test_topo_json_keeps_the_meta_contract():
    out = subprocess.run([sys.executable, "-m", "sim", "topo", "dgx-h100:nodes=2", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    meta = json.loads(out)["meta"]
    assert {"gpu_arch", "nvswitch", "nvlink_links", "nics_per_node", "nic_gbps"} <= set(meta)
    assert meta["nvlink_links"] == 18 and meta["nic_gbps"] == 400.0
