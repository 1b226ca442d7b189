"""A network message is a share of the channels NCCL runs on that size, not of all of them.

NCCL (enqueue.cc ``topoGetAlgoInfo``) drops channels on a small message until each carries about
threads x ``THREAD_THRESHOLD`` bytes, so a tree all_reduce of 4 KiB runs on one channel and sends one
4 KiB message per hop, not four of 1 KiB. On Slingshot with software tag matching that decides whether
GDRCopy takes the receive copy (at most 4 KiB of wire) or cudaMemcpy does. Expected values are the
published CSCS Alps sweeps (boeschf/nccl-benchmark-on-alps-2025, 8 nodes of 4 GH200, NCCL 2.23.4): with
GDRCopy 51 us at 512 B and 158 us at 4 KiB, without it 92 and 109 us.
"""
import math

import sim
from sim.nccl.machine import machine
from sim.nccl.tuner import _network_messages, used_channels
from sim.presets import load_topology

ALPS8 = "gh200-4:nodes=8,nics_per_node=4,nic_gbps=200,fabric=slingshot"
ENV = "NCCL_NET_GDR_LEVEL=PHB,FI_CXI_RX_MATCH_MODE=software,FI_HMEM_CUDA_USE_GDRCOPY={}"


def _time(nbytes, gdrcopy):
    return sim.simulate("all_reduce", nbytes, ALPS8, nccl_version="2.23", nccl_env=ENV.format(gdrcopy)).time_us


def test_nccls_channel_rule():
    # closed form of the rule for tree LL (512 threads x 8 bytes a channel): channels = size / 4 KiB, at least 1
    for size, nch in ((1024, 8), (4096, 8), (16 << 10, 8), (64 << 10, 8), (1 << 20, 8)):
        assert used_channels(size, 32, "tree", "LL", nch)[0] == max(1, min(nch, size // 4096))
    # ring LL's threshold is per rank: 32 ranks x 4 KiB a channel
    assert used_channels(256 << 10, 32, "ring", "LL", 8)[0] == 2
    assert used_channels(1 << 20, 32, "nvls", "Simple", 8)[0] == 8   # NVLS keeps its channels


def test_a_tree_message_is_a_share_of_the_channels_in_use():
    m = machine(load_topology(ALPS8))
    size, messages = _network_messages("tree", "LL", m, 4096, 8, 0)
    assert size == 4096 and messages == 2 * math.ceil(math.log2(8))


def test_gdrcopy_helps_small_trees_and_stops_helping_at_4_kib():
    assert _time(512, 1) < _time(512, 0)                        # measured 51 vs 92 us
    assert _time(4096, 1) >= _time(4096, 0) * 0.95              # measured 158 vs 109 us: no longer faster
    assert _time(4096, 1) - _time(512, 1) > 0.25 * (158 - 51)   # the jump (107 us measured) shows
