"""Links shared by several transfers are contended; multi-hop routes are cut-through."""
import pytest

from sim.engine import simulate_program
from sim.program import Program
from sim.topology import Link, Node, Topology


def _two_flows_through_one_link():
    # g0 -> sw -> g2 and g1 -> sw -> g2 share the link sw -> g2
    nodes = [Node(f"g{i}", "gpu") for i in range(3)] + [Node("sw", "switch")]
    links = []
    for i in range(3):
        links += [Link(f"g{i}", "sw", 100.0, 0.5), Link("sw", f"g{i}", 100.0, 0.5)]
    return Topology.build("y", nodes, links)


def _program(flows):
    src, dst = zip(*flows)
    return Program.from_ops("all_gather", 3, 3, src, dst, list(src), [0] * len(src), [False] * len(src),
                            algorithm="test", steps=1)


def test_two_flows_through_one_link_take_twice_as_long_as_one():
    topo = _two_flows_through_one_link()
    nbytes = 3 * 100e6  # chunk = 100 MB: 1000 us on a 100 GB/s link
    one = simulate_program(_program([(0, 2)]), topo, nbytes).time_us
    two = simulate_program(_program([(0, 2), (1, 2)]), topo, nbytes).time_us
    assert one == pytest.approx(1000 + 1.0)
    assert two == pytest.approx(2000 + 1.0)          # FIFO: the second waits for the first
    assert (two - 1.0) / (one - 1.0) == pytest.approx(2.0)


def test_flows_on_different_links_do_not_contend():
    topo = _two_flows_through_one_link()
    t = simulate_program(_program([(0, 2), (1, 0)]), topo, 3 * 100e6).time_us
    assert t == pytest.approx(1001.0)


def test_multi_hop_is_cut_through_not_store_and_forward():
    topo = _two_flows_through_one_link()
    t = simulate_program(_program([(0, 2)]), topo, 3 * 100e6).time_us
    assert t < 1.5 * 1000  # store-and-forward would take 2 x 1000 us


def test_bottleneck_link_sets_the_pace_on_a_multi_hop_route():
    nodes = [Node("a", "gpu"), Node("b", "gpu"), Node("sw", "switch")]
    links = [Link("a", "sw", 100.0, 1.0), Link("sw", "b", 25.0, 1.0), Link("b", "sw", 100.0, 1.0), Link("sw", "a", 100.0, 1.0)]
    topo = Topology.build("slow-tail", nodes, links)
    prog = Program.from_ops("broadcast", 2, 1, [0], [1], [0], [0], [False], algorithm="t", steps=1)
    t = simulate_program(prog, topo, 25e6).time_us
    assert t == pytest.approx(2.0 + 25e6 / 25e3)
