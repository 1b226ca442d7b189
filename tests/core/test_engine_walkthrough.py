"""docs/engine.md's walk-through holds: ring all_reduce on ring:n=4, ideal protocol, 4 MB, through both
engines, with the times computed by hand (1 MB chunks: 10 us on a 100 GB/s link plus 1 us latency per
step), the fast loop's queue as the page shows it, and the reference engine's same-instant hand-over."""
import ast
import pathlib

import numpy as np
import simpy

import sim.engine.reference as reference_module
from sim.algorithms import build_program
from sim.engine import simulate_program
from sim.engine.loop import EventLoop
from sim.engine.reference import Delivery
from sim.engine.reference import simulate_program as reference
from sim.presets import load_topology

STEP_US = 1.0 + 1e6 / 100e3     # latency + chunk bytes / (bytes per us)


def test_both_engines_give_the_hand_computed_times_exactly():
    p, topo = build_program("ring", "all_reduce", 4), load_topology("ring:n=4")
    fast, ref = simulate_program(p, topo, 4e6, symmetry="off"), reference(p, topo, 4e6)
    for run in (fast, ref):
        assert run.time_us == 6 * STEP_US == 66.0
        assert run.op_start_us.tolist() == (STEP_US * p.step).tolist()
        assert run.op_end_us.tolist() == (STEP_US * (p.step + 1)).tolist()
    assert fast.events == 6                       # one queue entry per step


def _ring_step_loop() -> EventLoop:
    """Step 0 and 1 of the page's example as the fast engine hands them to the loop: op r and op 4+r
    leave rank r on slot r (10 us, 1 us); op 5 waits for op 0, 6 for 1, 7 for 2, 4 for 3."""
    routes = [((r, 10.0, 1.0),) for r in range(4)]
    succ_ptr = np.array([0, 1, 2, 3, 4, 4, 4, 4, 4])
    return EventLoop(routes, np.array([0, 1, 2, 3, 0, 1, 2, 3]), np.array([0, 0, 0, 0, 1, 1, 1, 1]),
                     np.array([5, 6, 7, 4]), succ_ptr, 4, 0.0)


def test_fast_loop_queue_is_as_the_page_shows():
    loop = _ring_step_loop()
    loop.launch_group(np.flatnonzero(loop.remaining_a == 0), 0.0)
    assert loop.queue == [(11.0, 0, [0, 1, 2, 3])]
    assert loop.free_a.tolist() == [10.0] * 4
    loop.step()
    assert loop.queue == [(22.0, 1, [5, 6, 7, 4])]  # released in the order their arrivals were handled
    assert loop.start_a[4:].tolist() == [11.0] * 4 and loop.free_a.tolist() == [21.0] * 4
    loop.step()
    assert loop.queue == [] and loop.end_a.tolist() == [11.0] * 4 + [22.0] * 4


def test_delivery_hands_over_in_send_order_each_after_the_last_ones_consequences():
    env, seen = simpy.Environment(), []
    desk = Delivery(env)

    def follow_up(name):          # something one arrival sets in motion at the same instant, 2 events deep
        yield env.timeout(0)
        yield env.timeout(0)
        seen.append(f"{name} done")

    def message(sent):
        yield env.timeout(5.0)
        arrived = env.event()
        arrived.callbacks.append(lambda _: (seen.append(sent), env.process(follow_up(sent))))
        desk.land(sent, sent, arrived)

    for sent in (2, 0, 1):        # scheduled in another order than sent
        env.process(message(sent))
    env.run()
    assert seen == [0, "0 done", 1, "1 done", 2, "2 done"]
    assert env.now == 5.0


def test_reference_engine_uses_no_private_simpy_state():
    tree = ast.parse(pathlib.Path(reference_module.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):   # a subclass of a simpy class would reach its private state via self
            assert "simpy" not in ast.unparse(node).split(":", 1)[0], f"{node.name} subclasses simpy"
        if isinstance(node, ast.Attribute):
            on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            assert on_self or not private, f"line {node.lineno}: private attribute {node.attr!r}"
            assert on_self or not isinstance(node.ctx, ast.Store), f"line {node.lineno}: sets {node.attr!r} on another object"


def test_reference_engine_sends_in_the_order_the_page_shows(monkeypatch):
    landed, land = [], Delivery.land

    def spy(self, sent, op, arrived):
        landed.append((float(self.env.now), sent, op))
        land(self, sent, op, arrived)

    monkeypatch.setattr(Delivery, "land", spy)
    reference(build_program("ring", "all_reduce", 4), load_topology("ring:n=4"), 4e6)
    # step 0: ops 0-3 sent 0-3, land at 11; they release ops 5, 6, 7, 4 in that order (sent 4-7), landing at 22
    assert landed[:8] == [(11.0, 0, 0), (11.0, 1, 1), (11.0, 2, 2), (11.0, 3, 3),
                          (22.0, 4, 5), (22.0, 5, 6), (22.0, 6, 7), (22.0, 7, 4)]
