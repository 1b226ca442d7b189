"""NCCL's variables read as each release reads them (tuning.cc, device.h at the release tags).

- NCCL_MIN/MAX_NCHANNELS are bounded by MAXCHANNELS: 32 up to NCCL 2.24, 64 from 2.25; NCCL clamps a larger
  request and warns ("limiting to"): under 2.18, 64 channels asked run as 32 (collsim had taken 64 under
  every release: 198.4 us against 203.0 us).
- Up to 2.23, without CollNet, an NCCL_ALGO that leaves no ring, tree, NVLS or NVLSTree (counting what the
  machine ruled out) gets ring and tree back; 2.24 dropped the rule.
- Collective prefixes (allreduce:tree) exist from 2.24; before, parseList splits on commas only.
"""
import pytest

import sim
from sim.nccl.config import make_config

H100 = "dgx-h100:nodes=128"


def test_a_request_past_maxchannels_runs_as_maxchannels():
    assert make_config("2.18", "NCCL_MIN_NCHANNELS=64").min_channels == 32
    assert make_config("2.25", "NCCL_MIN_NCHANNELS=64").min_channels == 64
    t = [sim.simulate("all_reduce", 1 << 20, H100, nccl_version="2.18", nccl_env=f"NCCL_MIN_NCHANNELS={n}").time_us
         for n in (32, 64)]
    assert t[0] == t[1]


def test_up_to_2_23_an_algo_list_leaving_nothing_gets_ring_and_tree_back_without_collnet():
    # tuning.cc up to v2.23: "If user has hard set NCCL_ALGO=COLLNET, ignore it" (ring and tree back); 2.24 dropped it
    spec, env = "dgx-a100:nodes=4", "NCCL_ALGO=CollNetDirect"
    assert sim.simulate("all_reduce", 1 << 30, spec, nccl_version="2.21", nccl_env=env).algorithm in ("ring", "tree")
    try:
        sim.simulate("all_reduce", 1 << 30, spec, nccl_version="2.27", nccl_env=env)
    except sim.CollsimError as e:
        assert "CollNet needs IB SHARP" in str(e)   # says why the algorithm asked for cannot run, not only the rest
    else:
        raise AssertionError("NCCL 2.27 runs nothing here")
    # with SHARP, CollNet runs and nothing falls back
    assert sim.simulate("all_reduce", 1 << 30, spec + ",sharp=1", nccl_version="2.21", nccl_env=env).algorithm == "collnet_direct"


def test_a_collective_prefix_names_nothing_before_2_24():
    before, after = (make_config(v, "NCCL_ALGO=allreduce:ring") for v in ("2.18", "2.24"))
    # 2.18: the token enables nothing, so every collective falls back to ring and tree, NVLS off
    assert before.algo_enabled("all_reduce", "tree") and not before.algo_enabled("all_reduce", "nvls_tree")
    # 2.24: all_reduce runs ring only; the other collectives keep everything
    assert not after.algo_enabled("all_reduce", "tree") and after.algo_enabled("all_gather", "pat")


def test_before_2_24_a_list_is_split_on_commas_only():
    # parseList up to 2.23 (no prefixes): a token that is no name matches nothing; "^" enables all but the names
    assert make_config("2.18", "NCCL_PROTO=^LL128;allreduce:LL").proto_enabled("all_reduce", "LL128")
    assert make_config("2.18", "NCCL_ALGO=^NVLS;allreduce:tree").algo_enabled("all_reduce", "nvls")
    ring_only = make_config("2.18", "NCCL_ALGO=Ring,allreduce:tree")
    assert ring_only.algo_enabled("all_reduce", "ring") and not ring_only.algo_enabled("all_reduce", "tree")


@pytest.mark.parametrize("spec, env", [("dgx-h100:nodes=2", "NCCL_ALGO=NVLS"), ("dgx-a100:nodes=2", "NCCL_ALGO=NVLS"),
                                       ("dgx-h100", "NCCL_ALGO=NVLSTree")])
def test_the_fallback_counts_what_the_machine_already_ruled_out(spec, env):
    # NVLS across nodes without CollNet, NVLS on A100, NVLSTree on one node: NCCL 2.21 turned them off before its
    # check, so the list leaves nothing and ring and tree come back
    assert sim.simulate("all_reduce", 1 << 30, spec, nccl_version="2.21", nccl_env=env).algorithm in ("ring", "tree")
