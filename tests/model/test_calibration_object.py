"""The fitted constants as an immutable Calibration read through one context (no global state to mutate)."""
import threading

import pytest

import sim
from sim.nccl import calibration
from sim.nccl.execution import effective_topology
from sim.presets import load_topology


def test_with_values_makes_a_new_calibration_and_leaves_the_default():
    before = calibration.DEFAULT.as_dict()
    other = calibration.DEFAULT.with_values({"efficiency.ib": 0.5})
    assert other.value("efficiency.ib") == 0.5 and other != calibration.DEFAULT
    assert calibration.DEFAULT.as_dict() == before
    with pytest.raises(sim.CollsimError, match="unknown calibration constant"):
        calibration.DEFAULT.with_values({"efficiency.xyz": 1.0})


def test_use_is_scoped_to_the_block_and_the_thread():
    seen = {}
    with calibration.override({"launch_overhead_us": 11.0}):
        assert calibration.value("launch_overhead_us") == 11.0
        t = threading.Thread(target=lambda: seen.setdefault("other", calibration.value("launch_overhead_us")))
        t.start()
        t.join()
    assert seen["other"] == calibration.DEFAULT.value("launch_overhead_us")   # another thread saw no change
    assert calibration.current() is calibration.DEFAULT


def test_effective_links_follow_the_calibration_in_force():
    topo = load_topology("dgx-a100:nodes=2,fabric=ib")
    net = next(i for i, l in enumerate(topo.links) if l.kind == "net")
    with calibration.use(calibration.DEFAULT.with_values({"efficiency.ib": 0.5})):
        half = effective_topology(topo)
        assert effective_topology(topo) is half                       # cached per calibration
    full = effective_topology(topo)
    assert half.links[net].bandwidth_GBps == pytest.approx(0.5 * topo.links[net].bandwidth_GBps)
    assert full.links[net].bandwidth_GBps == pytest.approx(calibration.DEFAULT.value("efficiency.ib")
                                                           * topo.links[net].bandwidth_GBps)
