"""``NCCL_BUFFSIZE`` and its LL siblings as inputs (issue 23, item 3).

Expected values come from NCCL's source, not from collsim's constants: ``init.cc`` (v2.26.2-1, lines
606-622) sizes a connection's buffer per protocol (Simple 4 MiB = 1 << 22; LL 8 lines/thread x 512 threads
x 8 steps x 16 B = 524,288; LL128 120 elements x 640 threads x 8 steps x 8 B = 4,915,200) unless
``NCCL_BUFFSIZE`` / ``NCCL_LL_BUFFSIZE`` / ``NCCL_LL128_BUFFSIZE`` say otherwise, and ``enqueue.cc``
(lines 1859-1864) cuts a chunk of ``buffSize / NCCL_STEPS`` (8) x chunkSteps (4 for a ring's Simple, 1
for a tree), LL128's keeping 120 of every 128 bytes. NVLS takes its own ``NCCL_NVLS_CHUNKSIZE`` (128 KiB)
and point-to-point sends ``NCCL_P2P_*_CHUNKSIZE`` instead."""
from __future__ import annotations

import pytest

import sim
from sim.errors import CollsimError
from sim.nccl import config
from sim.nccl.protocols import nccl_chunk_bytes

MiB = 1 << 20


def chunks(env: str) -> dict[str, int]:
    with config.use(config.make_config(env=env or None)):
        return {"ring/Simple": nccl_chunk_bytes("ring", "Simple"), "tree/Simple": nccl_chunk_bytes("tree", "Simple"),
                "tree/LL128": nccl_chunk_bytes("tree", "LL128"), "tree/LL": nccl_chunk_bytes("tree", "LL"),
                "nvls": nccl_chunk_bytes("nvls", "Simple"), "p2p": nccl_chunk_bytes("p2p", "Simple")}


def test_default_chunks_are_ncclS_buffers_over_eight_steps():
    c = chunks("")
    assert c["ring/Simple"] == 4 * (4 * MiB // 8) and c["tree/Simple"] == 4 * MiB // 8
    assert c["tree/LL128"] == 4_915_200 // 8 * 120 // 128
    assert c["tree/LL"] == 524_288 // 8 // 2          # LL: half of each 16-byte line is data


def test_a_buffer_sets_its_protocols_step_and_nothing_else():
    c = chunks("NCCL_BUFFSIZE=8388608")
    assert (c["ring/Simple"], c["tree/Simple"]) == (4 * MiB, 1 * MiB)
    assert c["tree/LL128"] == chunks("")["tree/LL128"] and c["tree/LL"] == chunks("")["tree/LL"]
    assert c["nvls"] == 128 << 10 and c["p2p"] == chunks("")["p2p"]   # their own chunk parameters
    c = chunks("NCCL_LL128_BUFFSIZE=9830400,NCCL_LL_BUFFSIZE=1048576")
    assert c["tree/LL128"] == 9_830_400 // 8 * 120 // 128 and c["tree/LL"] == 1_048_576 // 16
    assert c["tree/Simple"] == 4 * MiB // 8


def test_the_variables_are_honoured_not_ignored_and_bad_values_are_refused():
    c = config.make_config(env="NCCL_BUFFSIZE=16777216,NCCL_IB_HCA=mlx5")
    assert c.ignored == ("NCCL_IB_HCA",) and c.buffer_bytes("Simple") == 16 * MiB and c.buffer_bytes("LL") == 524_288
    for bad in ("NCCL_BUFFSIZE=4M", "NCCL_BUFFSIZE=-1", "NCCL_BUFFSIZE=1024", "NCCL_LL_BUFFSIZE=2147483648"):
        with pytest.raises(CollsimError, match="NCCL_(LL_)?BUFFSIZE"):
            config.make_config(env=bad)


def test_a_deep_trees_time_follows_its_buffer():
    """A 512-node tree/Simple all_reduce of 1 GiB: a smaller buffer cuts more, smaller chunks, which pay the
    tree's per-chunk lag more often (tree_lag_units counts them), so it cannot be faster; nor can a larger
    buffer make it slower. At 64 MiB every chunk is already halved below the smallest buffer's step, so the
    three agree there."""
    spec = "gh200-4:nodes=512,nics_per_node=4,nic_gbps=200,fabric=slingshot"
    kw = dict(algorithm="tree", protocol="Simple", nccl_version="2.23")
    t = {b: sim.simulate("all_reduce", 1 << 30, spec, nccl_env=f"NCCL_BUFFSIZE={b}", **kw) for b in (MiB, 4 * MiB, 8 * MiB)}
    assert t[MiB].time_us > t[4 * MiB].time_us > t[8 * MiB].time_us
    for b, r in t.items():   # at 1 GiB no chunk is halved: a tree's chunk is one step, and it is cut that many times
        assert r.explain["chunk_bytes"] == b // 8
        assert r.explain["tree_lag_units"] * (b // 8) == t[MiB].explain["tree_lag_units"] * (MiB // 8)
    mid = {b: sim.simulate("all_reduce", 64 * MiB, spec, nccl_env=f"NCCL_BUFFSIZE={b}", **kw).time_us for b in (MiB, 8 * MiB)}
    assert mid[MiB] == pytest.approx(mid[8 * MiB])
