"""What Slingshot's rendezvous costs under each tag-matching mode, and what the per-peer cost is fitted on
(issue 23, eleventh pass).

A network message at or above cxi's rendezvous threshold (16 KiB on the wire) pays ``rendezvous_us.<fabric>``
with hardware (the provider's default) or software matching, and nothing with hybrid matching, where the
public hybrid runs (NERSC Perlmutter, Sigma2 Olivia) show no jump. Expected values are closed forms: the
messages on the critical path (a tree's levels up and down, a ring's steps) times a cost the test chooses.
"""
import json
import math

import pytest

import sim
from sim.commands import crossval
from sim.commands.validate import PUBLIC_CASES
from sim.nccl import calibration
from sim.presets import load_topology

NODES = 8
SPEC = f"gh200-4:nodes={NODES},nics_per_node=4,nic_gbps=200,fabric=slingshot"
COST = 7.0   # what this test charges per rendezvous: any positive value would do


def _run(size, algo, proto, mode):
    env = {"FI_CXI_RX_MATCH_MODE": mode} if mode else None
    with calibration.override({"rendezvous_us.slingshot": COST, "recv_copy_us.slingshot": 0.0}):
        return sim.simulate("all_reduce", size, load_topology(SPEC), algo, proto, nccl_env=env)


@pytest.mark.parametrize("mode", [None, "hardware", "software"])
def test_a_tree_pays_one_rendezvous_per_level_up_and_down_unless_matching_is_hybrid(mode):
    size = 64 << 20   # MiBs a channel: every tree message is far above the 16 KiB threshold
    paid, hybrid = _run(size, "tree", "Simple", mode), _run(size, "tree", "Simple", "hybrid")
    levels = math.ceil(math.log2(NODES))
    assert paid.explain["rendezvous_us"] == pytest.approx(2 * levels * COST)
    assert "rendezvous_us" not in hybrid.explain
    assert paid.time_us - hybrid.time_us == pytest.approx(2 * levels * COST, rel=1e-6)


def test_below_the_threshold_no_mode_pays():
    # 1 KiB of LL is 2 KiB on the wire: an eager message whatever the matching
    for mode in (None, "software", "hybrid"):
        assert "rendezvous_us" not in _run(1024, "tree", "LL", mode).explain


def _public_cases():
    with open(PUBLIC_CASES) as f:
        data = json.load(f)
    return {c["id"]: crossval.Case(c) for c in (data["cases"] if isinstance(data, dict) else data)}


def test_the_fit_leaves_hybrid_runs_out_of_the_rendezvous_and_copied_runs_out_of_the_per_peer_cost():
    cases = _public_cases()
    hybrid = [c for c in cases.values() if c.nccl.rx_match == "hybrid"]
    assert {c.id for c in hybrid} >= {"PM-2-AR", "OLIVIA-2-AR"}   # the two public hybrid runs
    assert not any(c.pays_rendezvous for c in hybrid)
    assert not any(crossval._relevant(c, "rendezvous_us.slingshot") for c in hybrid)
    assert cases["ALPS-2-AR-223"].pays_rendezvous and cases["C6-2-AR-S4"].pays_rendezvous
    # all_to_all over Slingshot: Polaris's runs matched in software, Alps's in hardware; the per-peer cost
    # is what the runs without copies say
    a2a = [c for c in cases.values() if c.fabric == "slingshot" and c.remote_peers]
    plain = crossval._without_copies(a2a)
    assert plain and {c.system for c in plain} == {"cscs-alps"} and not any(c.software_matching for c in plain)
    # a fabric with no copied runs keeps them all; one with only copied runs too
    copied = [c for c in a2a if c.software_matching]
    assert crossval._without_copies(copied) == copied and crossval._without_copies(plain) == plain
