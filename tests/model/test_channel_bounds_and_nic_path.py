"""NCCL's channel bounds and the GPU-to-NIC path bound what a collective moves (issue 23, a new user's trial).

Expected values are physical bounds stated in the test (one NCCL channel is one ring through one NIC; a NIC
behind a PCIe link no faster than the link gives a channel no more than the link), not the model's output."""
from __future__ import annotations

import pytest

import sim
from sim.nccl import config as nccl_config
from sim.nccl.machine import machine, ring_graph
from sim.presets import load_topology

NIC_GBps = 400 / 8   # dgx-h100: one 400G NIC per GPU


def _ring(topo: str, nbytes: int, env: str = "", **kw):
    return sim.simulate("all_reduce", nbytes, topo, algorithm="ring", protocol="Simple", nccl_env=env or None, **kw)


@pytest.mark.parametrize("channels", [1, 2, 4])
def test_fewer_channels_than_nics_cross_on_that_many_nics(channels):
    # NCCL_MAX_NCHANNELS=c: c rings, each leaving a node through one NIC, so the busbw of a large
    # all_reduce across nodes is at most c NICs' line rate (it was the 8 NICs' rate whatever c)
    r = _ring("dgx-h100:nodes=2", 1 << 28, f"NCCL_MAX_NCHANNELS={channels}")
    assert r.busbw_GBps <= channels * NIC_GBps * 1.001
    assert r.busbw_GBps > 0.5 * channels * NIC_GBps   # and not absurdly below it


def test_more_channels_never_slower_up_to_the_search_and_the_default_is_the_most():
    times = [_ring("dgx-h100:nodes=2", 1 << 28, f"NCCL_MAX_NCHANNELS={c}").time_us for c in (1, 2, 4, 8)]
    assert times == sorted(times, reverse=True)
    assert _ring("dgx-h100:nodes=2", 1 << 28).time_us <= times[-1] * 1.001


def test_one_cta_on_one_node_is_a_fraction_of_all_of_them():
    # a single CTA cannot drive the 18 NVLinks of an H100 that the default's 24 channels fill
    full = _ring("dgx-h100", 1 << 30)
    one = _ring("dgx-h100", 1 << 30, "NCCL_MAX_CTAS=1")
    assert one.busbw_GBps < full.busbw_GBps / 4


def test_a_faster_nic_behind_the_same_pcie_link_changes_nothing_in_nccls_search():
    # PCIe Gen5 x16 is a 48 GB/s path in NCCL's units (width x 32 GT/s / 80): an 800G NIC behind it gives
    # a channel what a 400G one does, so the search finds the same channels at the same speed
    g400 = ring_graph(machine(load_topology("dgx-h100:nodes=64,nic_gbps=400")))
    g800 = ring_graph(machine(load_topology("dgx-h100:nodes=64,nic_gbps=800")))
    assert (g800.nchannels, g800.bw_inter) == (g400.nchannels, g400.bw_inter)
    # and two NICs per GPU share that GPU's link: no more channels than one NIC per GPU
    g16 = ring_graph(machine(load_topology("dgx-h100:nodes=64,nics_per_node=16")))
    assert g16.nchannels == g400.nchannels


@pytest.mark.parametrize("nbytes", [4096, 1 << 20, 1 << 30])
def test_a_faster_or_second_nic_is_never_slower(nbytes):
    base = sim.simulate("all_reduce", nbytes, "dgx-h100:nodes=16").time_us
    for spec in ("dgx-h100:nodes=16,nic_gbps=800", "dgx-h100:nodes=16,nics_per_node=16"):
        assert sim.simulate("all_reduce", nbytes, spec).time_us <= base * 1.001, spec


def test_channel_bound_is_part_of_what_the_engine_layout_caches():
    # the engine's channel layout is cached per machine: a bound in force must not leak into a run without it
    topo = load_topology("dgx-h100:nodes=2")
    from sim.nccl.execution import nccl_channels
    with nccl_config.use(nccl_config.make_config(env="NCCL_MAX_NCHANNELS=2")):
        assert nccl_channels(topo, "ring") == (True, 2)
    assert nccl_channels(topo, "ring") == (True, 8)
