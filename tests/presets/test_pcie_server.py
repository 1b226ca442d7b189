"""PCIe servers as built: GPUs on root ports of two sockets, the socket link in the path, P2P as NCCL uses it.

Expected values are closed forms (a ring all-reduce moves 2(n-1)/n of the data over its slowest link,
the GPUs' x16 ports or the CPUs' socket link at their published rates) and NCCL's documented rules (``ncclTopoCheckP2p``: peer-to-peer up to PXB,
i.e. only under one PCIe switch), not numbers read off the simulator.
"""
import os

import pytest

import sim
from sim.errors import CollsimError
from sim.presets import load_topology
from sim.topology.nvidia_smi import load_topology_nvsmi, parse_nvidia_smi_topo

TWO_SOCKETS = os.path.join(os.path.dirname(__file__), "..", "data", "nvidia_smi", "pcie-2socket-8gpu-topo.txt")


# The slowest link of the ring, from the parts' published rates: a GPU's x16 port (PCIe gen4 16 GT/s x 16
# lanes = 32 GB/s, gen5 64 GB/s per direction), the socket link (two UPI links at 10.4 GT/s: 41.6 GB/s; three
# x16 xGMI links at 16 GT/s: 96 GB/s), or the socket_GBps a user gives.
@pytest.mark.parametrize("spec, bottleneck_GBps", [("pcie:gpus=8,sockets=2,gpus_per_switch=1", 32.0),   # the GPU port binds
                                                   ("pcie:gpus=8,sockets=2,gpus_per_switch=1,gen=5", 41.6),   # UPI binds
                                                   ("pcie:gpus=8,sockets=2,gpus_per_switch=1,gen=5,cpu=amd", 64.0),
                                                   ("pcie:gpus=8,sockets=2,gpus_per_switch=1,socket_GBps=20", 20.0),
                                                   ("pcie:gpus=8,sockets=2,gpus_per_switch=4,cpu=amd", 32.0)])
def test_a_ring_across_two_sockets_runs_at_its_slowest_link(spec, bottleneck_GBps):
    size = 1 << 31     # the 14 steps' hop latencies (~2 us each) stay under 1e-3 of the time
    r = sim.simulate("all_reduce", size, spec, algorithm="ring", protocol="ideal")
    assert r.time_us == pytest.approx(2 * 7 / 8 * size / 1e3 / bottleneck_GBps, rel=1e-3)


def test_routes_and_peer_to_peer_follow_the_board():
    t = load_topology("pcie:gpus=8,sockets=2,gpus_per_switch=2")
    hops = lambda a, b: [t.links[i].dst for i in t.route(a, b)]
    assert "cpu0" not in hops(0, 1) and hops(0, 1)[-1] == "gpu1"          # one switch: peer to peer through it
    assert "cpu0" in hops(0, 2) and "cpu1" not in hops(0, 2)               # another switch, same socket: via the CPU
    assert "cpu0" in hops(0, 7) and "cpu1" in hops(0, 7)                   # the other socket: over the socket link
    assert t.hardware.p2p is False                                          # some pairs go through host memory
    assert load_topology("pcie:gpus=8,sockets=2,gpus_per_switch=4,p2p=1").hardware.p2p is False
    assert load_topology("pcie:gpus=2,sockets=2,gpus_per_switch=1,cpu=amd").hardware.p2p is True   # NCCL: 2 GPUs on AMD
    # the same GPUs behind one switch (peer to peer) are faster than spread over two sockets (through host memory)
    one = sim.simulate("all_reduce", 1 << 26, "pcie:gpus=8").time_us
    two = sim.simulate("all_reduce", 1 << 26, "pcie:gpus=8,sockets=2,gpus_per_switch=1").time_us
    assert two > one


def test_nccl_p2p_level_lets_gpus_on_two_sockets_talk_directly():
    # NCCL's default (PXB) sends GPUs on different root ports through host memory; NCCL_P2P_LEVEL=SYS (the
    # preset's p2p_level) lets a P2P-capable board use the same links directly; without P2P it cannot
    base = "pcie:gpus=8,sockets=2,gpus_per_switch=1,cpu=amd,gen=5"
    assert load_topology(base + ",p2p=1").hardware.p2p is False
    assert load_topology(base + ",p2p=1,p2p_level=SYS").hardware.p2p is True
    assert load_topology(base + ",p2p=1,p2p_level=NODE").hardware.p2p is False      # the sockets' pairs are SYS
    assert load_topology("pcie:gpus=4,sockets=1,gpus_per_switch=1,p2p=1,p2p_level=NODE").hardware.p2p is True
    assert load_topology(base + ",p2p=0,p2p_level=SYS").hardware.p2p is False
    direct, bounced = (sim.simulate("all_reduce", 1 << 28, base + s).time_us for s in (",p2p=1,p2p_level=SYS", ",p2p=1"))
    assert direct < bounced


@pytest.mark.parametrize("spec, fix", [("pcie:gpus=8,sockets=2,p2p_level=FAR", "p2p_level"), ("pcie:gpus=6,sockets=4", "sockets=4"), ("pcie:gpus=6,sockets=2,gpus_per_switch=2", "gpus_per_switch=2"),
                                       ("pcie:gpus=7,sockets=2", "gpus=7"), ("pcie:gpus=4,sockets=2,socket_GBps=-1", "socket_GBps")])
def test_bad_servers_are_refused_with_the_key(spec, fix):
    with pytest.raises(CollsimError, match=fix.split("=")[0]):
        load_topology(spec)


def test_nvidia_smi_matrix_of_a_two_socket_server_builds_it():
    node, _ = parse_nvidia_smi_topo(open(TWO_SOCKETS).read())
    assert node.sockets == 2 and node.gpus_per_switch == 1 and node.nic_path == "NODE"
    t = load_topology_nvsmi(TWO_SOCKETS + ":gpu=ampere")
    assert "sockets=2" in t.name and "gpus_per_switch=1" in t.name and t.nranks == 8
    assert any("2 socket(s)" in line for line in t.hardware.xml_read)
