"""The receive path of Slingshot's cxi provider as an input (issue 23, ninth pass).

With software tag matching (``FI_CXI_RX_MATCH_MODE=software``) every eager message lands in a host buffer
and is copied into GPU memory: by GDRCopy when the run enabled it and the message is at most
``FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD``, by cudaMemcpy otherwise (``recv_copy_us.<fabric>`` per message).
Expected values are closed forms: the number of network messages on the critical path (a ring's steps, a
tree's levels up and down, an all_to_all's remote peers) times a cost the test chooses, and the protocol's
bytes on the wire against the thresholds; and the published pairs of sweeps the mechanism was taken from."""
import json
import math

import pytest

import sim
from sim.commands import crossval
from sim.commands.validate import PUBLIC_CASES
from sim.errors import CollsimError
from sim.nccl import calibration
from sim.nccl import config as nccl_config
from sim.nccl.machine import machine
from sim.presets import load_topology

SPEC = "hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200,fabric=slingshot"
COST = 5.0   # what this test charges per copy: any positive value would do
SOFT = {"FI_CXI_RX_MATCH_MODE": "software"}


def _time(coll, size, spec, algo, proto, env=None, cost=COST):
    with calibration.override({"recv_copy_us.slingshot": cost}):
        return sim.simulate(coll, size, load_topology(spec), algo, proto, nccl_env=env)


def test_variables_parse_and_are_listed_as_honoured():
    c = nccl_config.make_config(env="NCCL_ALGO=Ring,FI_CXI_RX_MATCH_MODE=Software,FI_HMEM_CUDA_USE_GDRCOPY=1,"
                                    "FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD=16384,FI_CXI_RDZV_PROTO=alt_read")
    assert (c.rx_match, c.gdrcopy, c.safe_devmem_copy) == ("software", True, 16384)
    assert c.ignored == ("FI_CXI_RDZV_PROTO",)
    assert nccl_config.make_config().rx_match == "hardware" and not nccl_config.make_config().gdrcopy
    for bad in ("FI_CXI_RX_MATCH_MODE=fast", "FI_HMEM_CUDA_USE_GDRCOPY=maybe", "FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD=-1"):
        with pytest.raises(CollsimError, match=bad.split("=")[0]):
            nccl_config.make_config(env=bad)
    shell = dict(nccl_config.env_from_shell({"FI_CXI_RX_MATCH_MODE": "software", "FI_OTHER": "1", "NCCL_ALGO": "Ring"}))
    assert shell == {"FI_CXI_RX_MATCH_MODE": "software", "NCCL_ALGO": "Ring"}


def test_tree_pays_one_copy_per_level_up_and_down():
    # 8 nodes: 3 levels up, 3 down; 1 KiB of LL is 2 KiB on the wire, below every threshold
    hw = _time("all_reduce", 1024, SPEC, "tree", "LL")
    sw = _time("all_reduce", 1024, SPEC, "tree", "LL", SOFT)
    assert sw.time_us - hw.time_us == pytest.approx(2 * math.ceil(math.log2(8)) * COST)
    assert sw.explain["recv_copy_us"] == pytest.approx(6 * COST)
    hybrid = _time("all_reduce", 1024, SPEC, "tree", "LL", {"FI_CXI_RX_MATCH_MODE": "hybrid"})
    assert hybrid.time_us == pytest.approx(hw.time_us)   # the NIC matches and writes GPU memory: no copy


def test_a_ring_step_pays_the_larger_of_its_floor_and_the_copy():
    # NCCL's floor under every step of a ring across nodes is the net overhead (set here to 3 us, above
    # NCCL's own 1-2 us); the copy is the same proxy's work on the step's message, so a step pays the larger
    n, floor = 32, 3.0
    with calibration.override({"net_overhead.slingshot": floor}):
        assert machine(load_topology(SPEC)).net_overhead_us == floor
        for cost, extra in ((COST, COST - floor), (2.0, 0.0)):
            hw = _time("all_gather", n * 256, SPEC, "ring", "LL", cost=cost)
            sw = _time("all_gather", n * 256, SPEC, "ring", "LL", SOFT, cost=cost)
            assert sw.time_us - hw.time_us == pytest.approx((n - 1) * extra)


def test_gdrcopy_takes_the_copies_up_to_its_threshold():
    gdr = {**SOFT, "FI_HMEM_CUDA_USE_GDRCOPY": "1"}
    hw = _time("all_reduce", 1024, SPEC, "tree", "LL")
    assert _time("all_reduce", 1024, SPEC, "tree", "LL", gdr).time_us == pytest.approx(hw.time_us)
    # a threshold below the message hands the copy back to cudaMemcpy
    low = _time("all_reduce", 1024, SPEC, "tree", "LL", {**gdr, "FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD": "0"})
    assert low.time_us - hw.time_us == pytest.approx(6 * COST)


def test_rendezvous_messages_and_other_fabrics_copy_nothing():
    # 64 KiB a rank is above cxi's 16 KiB rendezvous threshold for any channel count <= 2: fetched into
    # the posted buffer, no copy
    size = 32 * 64 * 1024
    assert _time("all_gather", size, SPEC, "ring", "LL", SOFT).time_us == \
        pytest.approx(_time("all_gather", size, SPEC, "ring", "LL").time_us)
    ib = SPEC.replace("slingshot", "ib")
    assert _time("all_reduce", 1024, ib, "tree", "LL", SOFT).time_us == pytest.approx(_time("all_reduce", 1024, ib, "tree", "LL").time_us)


def test_all_to_all_pays_one_copy_per_remote_peer():
    n, ppn = 32, 4
    size = n * 64   # 64 B per peer
    hw = _time("all_to_all", size, SPEC, "p2p", "LL")
    sw = _time("all_to_all", size, SPEC, "p2p", "LL", SOFT)
    assert sw.time_us - hw.time_us == pytest.approx((n - ppn) * COST)


def test_public_pairs_show_the_copy_where_the_model_charges_it():
    """The two published pairs the mechanism comes from: the runs the model charges copies (software matching,
    no GDRCopy) are slower at 8 B - 1 KiB than their partner at every node count, by more the more levels
    their tree has."""
    cases = {c["id"]: c for c in json.load(open(PUBLIC_CASES))["cases"]}
    pairs = [("ALPS-2-AR-223-NOGDR", "ALPS-2-AR-223"), ("ALPS-128-AR-223-NOGDR", "ALPS-128-AR-223"),
             ("C6-2", "C6-2-AR-S4"), ("C6-8", "C6-8-AR-S4"), ("C6-256-AR-221", "C6-256-AR-S4")]
    gaps = []
    for slow, fast in pairs:
        s, f = crossval.Case(cases[slow]), crossval.Case(cases[fast])
        assert s.software_matching and (f.nccl.gdrcopy or not f.software_matching)
        small = lambda c: sorted(r["time_us"] for r in c.raw["rows"] if 8 <= r["size"] <= 1024)[3]
        gaps.append(small(s) - small(f))
        assert gaps[-1] > 5.0, (slow, fast)
    assert gaps[1] > gaps[0] and gaps[4] > gaps[3] > gaps[2]
