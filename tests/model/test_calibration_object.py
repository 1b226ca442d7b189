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


# topologies that reach every branch of link_efficiency: NVLink + NVLS, host-bounced PCIe, each fabric, the
# host-bridge path (A100 with the NIC on a CPU root port), a GB200 rack's NVLS domain
LINK_TOPOLOGIES = ("dgx-h100:nodes=2,fabric=efa2", "dgx-h100:nodes=2,fabric=efa", "dgx-h100:nodes=2,fabric=tcpxo",
                   "dgx-a100:nodes=2,fabric=ib", "hgx-a100-4:nodes=2,nics_per_node=2,fabric=slingshot",
                   "gh200-4:nodes=2,fabric=slingshot", "dgx-a100:nodes=2,fabric=roce", "pcie:gpus=2,gen=3,p2p=0",
                   "gb200-nvl72:nodes=2,gpus_per_node=64,nics_per_node=64,nic_gbps=800,fabric=roce")


def _all_link_efficiencies():
    from sim.nccl.execution import link_efficiency
    return [link_efficiency(topo, link, nvls, duplex, p2p) for spec in LINK_TOPOLOGIES
            for topo in [load_topology(spec)] for link in topo.links
            for nvls in ("", "nvls", "nvls_tree") for duplex in (False, True) for p2p in (False, True)]


def test_no_link_reads_a_time_only_constant():
    # the engine's caches are keyed by Calibration.links (the time-only constants at their defaults): sound
    # only if no effective link moves with one of them, which is what this checks, constant by constant
    time_only = [k for k in calibration.DEFAULTS if k.startswith(calibration.TIME_ONLY)]
    assert {k.partition(".")[0] for k in time_only} == {"latency", "net_overhead", "rendezvous_us", "recv_copy_us", "p2p_peer",
                                                        "launch_overhead_us", "per_gpu_launch_us", "tree_chunk_lag_us",
                                                        "blackwell_nvlink_hop_us"}
    base = _all_link_efficiencies()
    for key in time_only:
        with calibration.override({key: calibration.DEFAULTS[key] + 7.0}):
            assert _all_link_efficiencies() == base, key
    for key in (k for k in calibration.DEFAULTS if k not in time_only):
        with calibration.override({key: calibration.DEFAULTS[key] * 0.5 + 0.01}):
            assert _all_link_efficiencies() != base, f"{key} moves no link: add it to calibration.TIME_ONLY"


def test_a_latency_change_reuses_the_engine_runs_and_gets_the_fresh_answer():
    # the engine's caches ignore the time-only constants: a prediction under changed latencies, made after
    # the same prediction at the defaults filled the caches, must be the one a fresh process makes
    import json
    import subprocess
    import sys
    spec, sizes = "hgx-a100-4:nodes=8,nics_per_node=2,fabric=slingshot", (8, 1 << 16, 1 << 22)
    changed = {"latency.slingshot": 30.0, "net_overhead.slingshot": 2.0, "rendezvous_us.slingshot": 40.0,
               "tree_chunk_lag_us": 3.0, "p2p_peer.slingshot": 9.0, "recv_copy_us.slingshot": 11.0}
    colls = ("all_reduce", "all_to_all")   # rings and trees; many-peer p2p sends
    env = {"FI_CXI_RX_MATCH_MODE": "software"}   # so that the receive copies count too
    times = lambda model: [sim.simulate(c, s, spec, model=model, nccl_env=env).time_us for c in colls for s in sizes]
    for model in ("flow", "engine"):
        before = times(model)
        with calibration.override(changed):
            warm = times(model)
        fresh = subprocess.run([sys.executable, "-c", (
            "import json, sim; from sim.nccl import calibration\n"
            f"with calibration.override({changed!r}):\n"
            f"    print(json.dumps([sim.simulate(c, s, {spec!r}, model={model!r}, nccl_env={env!r}).time_us for c in {colls!r} for s in {sizes!r}]))")],
            capture_output=True, text=True, check=True)
        assert warm == json.loads(fresh.stdout) and warm != before, model
