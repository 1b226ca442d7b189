"""NCCL releases and variables as inputs (issue 23): what each release can pick, and NCCL_* honoured.

Expected values come from NCCL's source at the tags named in sim/nccl/versions.py (read there, not from
collsim's output) and from closed forms of the tuner's arithmetic."""
from __future__ import annotations

import functools
import json
import math

import pytest

import sim
from sim.errors import CollsimError
from sim.nccl import config
from sim.nccl.tuner import tuner_terms
from sim.nccl.versions import LATEST, release
from sim.presets import load_topology

ONE_GPU = "dgx-h100:nodes=64,gpus_per_node=1"


@pytest.fixture(scope="module")
def one_gpu():
    return load_topology(ONE_GPU)


def pick(topo, size, **kw):
    r = sim.simulate("all_gather", size, topo, model="tuner", **kw)
    return r.algorithm, r.protocol


def test_pat_arrives_in_2_23(one_gpu):
    # tuning.cc: 2.18 considers only rings for all_gather; 2.23 adds PAT for one GPU per node
    assert pick(one_gpu, 1 << 20, nccl_version="2.18")[0] == "ring"
    assert pick(one_gpu, 1 << 20, nccl_version="2.21")[0] == "ring"
    assert pick(one_gpu, 1 << 20, nccl_version="2.23") == ("pat", "Simple")
    assert pick(one_gpu, 1 << 20, nccl_version="2.27") == ("pat", "Simple")


def test_pat_switched_off_by_its_variables(one_gpu):
    for env in ("NCCL_PAT_ENABLE=0", "NCCL_ALGO=^PAT", "NCCL_ALGO=allgather:ring"):
        assert pick(one_gpu, 1 << 20, nccl_version="2.27", nccl_env=env)[0] == "ring", env
    # a prefix for another collective leaves all_gather alone
    assert pick(one_gpu, 1 << 20, nccl_version="2.27", nccl_env="NCCL_ALGO=allreduce:tree")[0] == "pat"


def test_pat_latency_is_nccls_formula(one_gpu):
    # tuning.cc (2.23-2.27): lat = 8 + log2(nNodes) * interLat / 3.5 + nRanks * 2.8, interLat the tree's
    # Simple network hop (14 us) + twice the net latency (hop and flush), plus collsim's launch overhead
    from sim.nccl.machine import machine
    m = machine(one_gpu)
    with config.use(config.make_config("2.27")):
        t = tuner_terms("all_gather", 1 << 20, one_gpu, "pat", "Simple")
    inter = 14.0 + 2 * m.net_latency_us
    assert t.latency_us == pytest.approx(8 + 6 * inter / 3.5 + 64 * 2.8 + m.call_overhead_us)


def test_pat_bus_factor_changed_in_2_24(one_gpu):
    # PAT busBw x .85 in 2.23, x .75 from 2.24 (tuning.cc)
    with config.use(config.make_config("2.23")):
        a = tuner_terms("all_gather", 1 << 30, one_gpu, "pat", "Simple").bus_GBps
    with config.use(config.make_config("2.24")):
        b = tuner_terms("all_gather", 1 << 30, one_gpu, "pat", "Simple").bus_GBps
    assert b / a == pytest.approx(0.75 / 0.85)


def test_ring_ll_share_before_2_21():
    # tuning.cc: 2.18-2.20 credit ring LL with 1/4 of busBw across nodes or for all_reduce/reduce, 1/3
    # otherwise; 2.21 on with 1/2 (a 4-GPU PCIe box stays below llMaxBw, which would cap both)
    topo = load_topology("pcie:gpus=4")
    want = {("2.18", "all_reduce"): 1 / 4, ("2.18", "all_gather"): 1 / 3, ("2.21", "all_reduce"): 1 / 2,
            ("2.21", "all_gather"): 1 / 2}
    for (v, c), share in want.items():
        with config.use(config.make_config(v)):
            ll = tuner_terms(c, 1 << 20, topo, "ring", "LL")
            simple = tuner_terms(c, 1 << 20, topo, "ring", "Simple")
        assert ll.bus_GBps / simple.bus_GBps == pytest.approx(share), (v, c)


def test_channel_bounds_leave_nccls_estimate_and_choice_alone():
    # tuning.cc: busBw = graphs[a]->nChannels x bw, the search's channels; connect.cc applies
    # NCCL_MIN/MAX_NCHANNELS and NCCL_MIN/MAX_CTAS to comm->nChannels after the search. So NCCL's estimate
    # (and so its choice) is the same with or without them, while the channels it runs follow them. A
    # planner's trial found NCCL_MIN_NCHANNELS=32 lifting a 2-node ring to 991 GB/s, past its 8 NICs
    topo = load_topology("dgx-h100:nodes=2")
    base = tuner_terms("all_reduce", 1 << 30, topo, "ring", "Simple")
    for env, runs in (("NCCL_MAX_NCHANNELS=4", 4), ("NCCL_MIN_CTAS=32", 32), ("NCCL_MIN_NCHANNELS=32", 32)):
        with config.use(config.make_config(env=env)):
            bounded = tuner_terms("all_reduce", 1 << 30, topo, "ring", "Simple")
            pick = sim.simulate("all_reduce", 256 << 20, topo, model="tuner")
        assert bounded.nchannels == runs, env
        assert bounded.bus_GBps == pytest.approx(base.bus_GBps), env
        assert (pick.algorithm, pick.protocol) == (lambda r: (r.algorithm, r.protocol))(
            sim.simulate("all_reduce", 256 << 20, topo, model="tuner")), env
    # what runs is bounded: 4 channels cross on 4 of the 8 NICs (50 GB/s each), so the engine is slower
    slow = sim.simulate("all_reduce", 1 << 28, topo, algorithm="ring", protocol="Simple", nccl_env="NCCL_MAX_NCHANNELS=4")
    assert slow.busbw_GBps <= 4 * 50 * 1.001


def test_nvls_enable_and_proto():
    topo = load_topology("dgx-h100")
    assert sim.simulate("all_reduce", 64 << 20, topo, model="tuner").algorithm == "nvls"
    assert sim.simulate("all_reduce", 64 << 20, topo, model="tuner", nccl_env={"NCCL_NVLS_ENABLE": "0"}).algorithm != "nvls"
    r = sim.simulate("all_reduce", 64 << 20, topo, model="tuner", nccl_env="NCCL_ALGO=Ring,Tree,NCCL_PROTO=LL")
    assert (r.algorithm in ("ring", "tree"), r.protocol) == (True, "LL")


def test_env_parsing_follows_nccl_syntax():
    c = config.make_config(env="NCCL_ALGO=ring,tree;allreduce:^tree,NCCL_IB_HCA=mlx5_0,NCCL_DEBUG=INFO")
    assert c.algo_enabled("broadcast", "tree") and not c.algo_enabled("broadcast", "nvls")
    assert c.algo_enabled("all_reduce", "nvls") and not c.algo_enabled("all_reduce", "tree")
    assert c.ignored == ("NCCL_DEBUG", "NCCL_IB_HCA")
    for bad in ("NCCL_ALGO=Ring;Tree", "NCCL_ALGO=Rings", "NCCL_ALGO=foo:ring", "NCCL_MIN_NCHANNELS=zero",
                "NCCL_PAT_ENABLE=yes", "ALGO=Ring"):
        with pytest.raises(CollsimError):
            config.make_config(env=bad)


def test_min_above_max_channels_duplicates_the_first_as_nccl_does():
    """connect.cc takes at most NCCL_MAX_NCHANNELS channels, then duplicates them up to NCCL_MIN_NCHANNELS: with
    MAX=1 and MIN=4 four CTAs run, all on the first channel's NIC, so a ring across DGX H100 nodes moves at
    most one 400 Gb/s NIC's 50 GB/s (busbw of a 2-node ring = the per-node network rate), not four NICs'."""
    c = config.make_config(env="NCCL_MAX_NCHANNELS=1,NCCL_MIN_NCHANNELS=4")
    assert (c.channels(16), c.distinct_channels(16)) == (4, 1)
    topo = load_topology("dgx-h100:nodes=2")
    dup = sim.simulate("all_reduce", 1 << 30, topo, algorithm="ring", protocol="Simple",
                       nccl_env="NCCL_MAX_NCHANNELS=1,NCCL_MIN_NCHANNELS=4")
    four = sim.simulate("all_reduce", 1 << 30, topo, algorithm="ring", protocol="Simple", nccl_env="NCCL_MAX_NCHANNELS=4")
    assert dup.busbw_GBps <= 50.0 < four.busbw_GBps


def test_nvls_channels_follow_the_cta_bounds_only():
    """transport/nvls.cc bounds NVLS's channels by NCCL_MIN/MAX_CTAS alone: NCCL_MAX_NCHANNELS=1 leaves an NVLS
    all_reduce as it was (it once disabled NVLS under 2.28: "needs at least 2 NVLS channels"), NCCL_MAX_CTAS=4
    leaves it 4 of its 16 channels."""
    assert config.make_config(env="NCCL_MAX_NCHANNELS=1").nvls_channels(16) == 16
    run = functools.partial(sim.simulate, "all_reduce", 1 << 30, "dgx-h100", algorithm="nvls", nccl_version="2.28")
    base, nch, ctas = run(), run(nccl_env="NCCL_MAX_NCHANNELS=1"), run(nccl_env="NCCL_MAX_CTAS=4")
    assert nch.time_us == base.time_us < ctas.time_us


def test_releases_before_2_25_read_hoppers_rows_for_blackwell():
    """Before 2.25 tuning.cc had no Blackwell row: ``compCapIndex = minCompCap >= 90 ? HOPPER_COMPCAP_IDX : ...``.
    A tree all_reduce on 4 DGX B200 nodes (8 search channels) is capped at Hopper's perChMaxTreeBw for 4+ nodes,
    36.0 GB/s a channel, then x .85 for the tree pattern (tuning.cc literals): 8 x 36.0 x .85 under 2.24; 2.25 reads
    Blackwell's row, whose cap (72.0) does not bind."""
    from sim.nccl.machine import machine, tree_graph
    topo = load_topology("dgx-b200:nodes=4")
    nch = tree_graph(machine(topo)).nchannels
    with config.use(config.make_config("2.24")):
        old = tuner_terms("all_reduce", 1 << 30, topo, "tree", "Simple")
    with config.use(config.make_config("2.25")):
        new = tuner_terms("all_reduce", 1 << 30, topo, "tree", "Simple")
    assert old.bus_GBps == pytest.approx(nch * 36.0 * 0.85)
    assert new.bus_GBps > old.bus_GBps
    assert release("2.24").table_arch("blackwell") == "hopper" and release("2.24").table_arch("hopper") == "hopper"


def test_cta_and_channel_pairs_resolve_as_nccl_resolves_them():
    """init.cc lowers a CTA minimum above the CTA maximum to it ("minCTAs %d is larger than maxCTAs %d, set both to
    %d"); connect.cc lets NCCL_MIN_NCHANNELS above NCCL_MAX_NCHANNELS win (max first, then duplicate)."""
    ctas = config.make_config(env="NCCL_MIN_CTAS=8,NCCL_MAX_CTAS=2")
    assert (ctas.channels(16), ctas.nvls_channels(16)) == (2, 2)
    assert config.make_config(env="NCCL_MIN_NCHANNELS=8,NCCL_MAX_NCHANNELS=2").channels(16) == 8


def test_nvls_channel_bounds_scale_its_kernels_and_never_refuse_it():
    """tuning.cc's "NVLS/NVLStree needs at least 2 channels" reads the search's graph, which the CTA bounds do not
    touch: NCCL_MAX_CTAS=1 leaves NVLS on one channel, not off. Fewer channels move less: 1 < 4 < 12 < all 16 on
    DGX H100. From 2.28 NVLS across nodes also takes at most the rings' channels (enqueue.cc: nc = min(nvlsChannels,
    nChannels)), so NCCL_MAX_NCHANNELS slows it there and not under 2.27."""
    run = functools.partial(sim.simulate, "all_reduce", 1 << 30, "dgx-h100", algorithm="nvls", nccl_version="2.28")
    times = [run(nccl_env=f"NCCL_MAX_CTAS={n}").time_us for n in (1, 4, 12)] + [run().time_us]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4
    sharp = "dgx-h100:nodes=4,sharp=1,nvls_sharp=1"
    for version, slower in (("2.28", True), ("2.27", False)):
        both = [sim.simulate("all_reduce", 1 << 30, sharp, algorithm="nvls", nccl_version=version, nccl_env=env).time_us
                for env in (None, "NCCL_MAX_NCHANNELS=2")]
        assert (both[1] > both[0]) is slower, (version, both)


def test_versions_resolve_to_documented_rules():
    assert release("2.26").version == "2.25" and release("2.27.7-1").version == "2.27"
    assert release(None) is LATEST
    for bad in ("2.7", "2.13", "3.0", "two", "2"):   # older than 2.8, between 2.9 and 2.18, newer, malformed
        with pytest.raises(CollsimError):
            release(bad)
    assert release("2.8.4").version == release("2.9.9-1").version == "2.8"


def test_nccl_2_8_reads_its_own_latency_tables():
    # v2.8.4-1's tuning.cc (the same at v2.9.9-1): baseLat ring LL 3.6 (2.18: 6.6), tree LL 4.4 (6.8); hwLat NVLink
    # ring LL .47 (.6), network ring Simple 9.6 (14). A 4 B all_reduce on one DGX A100, ring/LL: baseLat + 14 hops
    from sim.collectives import get_collective
    from sim.presets import load_topology
    topo = load_topology("dgx-a100")
    lat = {}
    for v in ("2.8", "2.18"):
        with config.use(config.make_config(v)):
            lat[v] = tuner_terms(get_collective("all_reduce"), 4, topo, "ring", "LL").latency_us
    # (both add the same launch cost, fitted, so the difference is the two releases' tables alone)
    assert lat["2.18"] - lat["2.8"] == pytest.approx((6.6 + 14 * 0.6) - (3.6 + 14 * 0.47))


def test_default_call_names_the_release():
    r = sim.simulate("all_reduce", 1 << 20, "dgx-h100", model="tuner")
    assert r.explain["nccl_version"] == LATEST.version
    # an explicit default gives the same answer as none
    assert sim.simulate("all_reduce", 1 << 20, "dgx-h100", model="tuner", nccl_version=LATEST.version).time_us == r.time_us


def test_cli_versions_differ_and_rows_say_so(cli):
    args = ["simulate", "-t", ONE_GPU, "-c", "all_gather", "-b", "1K", "-e", "1G", "-f", "16", "--model", "tuner",
            "--format", "json"]
    a = json.loads(cli(*args, "--nccl-version", "2.18")[1])
    b = json.loads(cli(*args, "--nccl-version", "2.27")[1])
    assert a["nccl_version"] == "2.18" and all(r["nccl_version"] == "2.27" for r in b["results"])
    assert {r["algorithm"] for r in a["results"]} == {"ring"} and "pat" in {r["algorithm"] for r in b["results"]}
    for r in b["results"]:
        lo, hi = r["time_us_range"]
        assert lo <= r["time_us"] <= hi and isinstance(r["validated"], bool)


def test_cli_names_ignored_variables_once(cli):
    code, out, err = cli("simulate", "-t", "dgx-h100", "--model", "tuner", "--nccl-env", "NCCL_IB_HCA=mlx5,NCCL_ALGO=Ring")
    lines = [l for l in err.splitlines() if "ignoring" in l]
    assert code == 0 and len(lines) == 1 and "NCCL_IB_HCA" in lines[0] and "NCCL_ALGO" not in lines[0]
    assert " ring " in out
    code, out, err = cli("simulate", "-t", "dgx-h100", "--nccl-version", "2.7")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "2.8" in err
    code, out, err = cli("simulate", "-t", "dgx-a100", "--nccl-version", "2.15")   # between 2.9 and 2.18: not modelled
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--nccl-version 2.18" in err


def test_cli_points_machine_variables_to_the_topology(cli):
    code, out, err = cli("simulate", "-t", "pcie:gpus=8,sockets=2,gpus_per_switch=1,cpu=amd", "--model", "tuner",
                         "--nccl-env", "NCCL_P2P_LEVEL=SYS")
    assert code == 0 and "NCCL_P2P_LEVEL" in err and "p2p_level=" in err


def test_pat_program_moves_n_minus_1_shards():
    from sim.algorithms import build_program
    for n in (2, 5, 8, 64):
        for c in ("all_gather", "reduce_scatter"):
            p = build_program("pat", c, n)
            assert p.steps == math.ceil(math.log2(n)) and p.nops == n * (n - 1)


def test_nvls_model_of_2_28_moves_the_b200_handover():
    # 2.27.7 measured NVLS on 6 B200 at 8 GiB (docs/nccl-model.md, Selections); 2.28's nvlsEfficiency
    # model (bwIntra x 0.74 x (nch-1)/nch, algBw = busBw x n/nsteps) credits NVLS less: ring wins there
    assert sim.simulate("all_reduce", 8 << 30, "dgx-b200:gpus_per_node=6", model="tuner", nccl_version="2.27").algorithm == "nvls"
    assert sim.simulate("all_reduce", 8 << 30, "dgx-b200:gpus_per_node=6", model="tuner", nccl_version="2.28").algorithm == "ring"


def test_2_29_corrects_nvls_tree_on_blackwell_x86_hosts():
    # tuning.cc v2.29.7-1 (and 2.30): NVLSTree all_reduce's bandwidth x treeCorrectionFactor[proto][log2(n/64)]
    # when minCompCap >= 100 and the CPU is x86; 1 MiB is index 14 (Simple .5), 512 MiB index 23 (a 24th
    # entry, Simple .9); 1 GiB is past the table. A GB200 tray's Grace (Arm) host keeps 2.28's bandwidth.
    b200 = load_topology("dgx-b200:nodes=4")
    gb200 = load_topology("gb200-nvl72:nodes=2")

    def alg(topo, size, version):
        with config.use(config.make_config(version)):
            return tuner_terms("all_reduce", size, topo, "nvls_tree", "Simple").alg_GBps

    def bw(topo, size, version):   # the bandwidth time implies, net of the latency term
        with config.use(config.make_config(version)):
            t = tuner_terms("all_reduce", size, topo, "nvls_tree", "Simple")
        return size / (1000 * (t.time_us - t.latency_us))

    for size, factor in ((1 << 20, 0.5), (512 << 20, 0.9), (1 << 30, 1.0)):
        assert bw(b200, size, "2.29") == pytest.approx(alg(b200, size, "2.29") * factor, rel=1e-9), size
        assert bw(b200, size, "2.28") == pytest.approx(alg(b200, size, "2.28"), rel=1e-9), size
    assert bw(gb200, 1 << 20, "2.29") == pytest.approx(alg(gb200, 1 << 20, "2.29"), rel=1e-9)


def test_2_29_caps_blackwell_ring_ll128_at_40_per_channel():
    # perChMaxRingLL128Bws, Blackwell row: {2*36.7, 34.6, 2*36.7} in v2.28.9-1, {40, 40, 40} in v2.29.7-1.
    # On 2 B200 nodes (column N2) the ring's search bandwidth x .92 exceeds both caps, so the cap binds.
    topo = load_topology("dgx-b200:nodes=2")
    terms = {}
    for v in ("2.28", "2.29"):
        with config.use(config.make_config(v)):
            terms[v] = tuner_terms("all_reduce", 64 << 20, topo, "ring", "LL128")
    nch = terms["2.29"].nchannels
    assert terms["2.28"].bus_GBps == pytest.approx(nch * 34.6)
    assert terms["2.29"].bus_GBps == pytest.approx(nch * 40.0)
    assert release("2.29.2").tag == "v2.29.7-1"   # one entry per minor release, read at its newest tag


def test_env_from_shell_and_flag_precedence(cli, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    args = ["simulate", "-t", "dgx-a100:nodes=2", "-b", "1G", "-e", "1G", "--model", "tuner", "--format", "json"]
    code, out, err = cli(*args, "--nccl-env-from-shell")
    d = json.loads(out)
    assert code == 0 and d["results"][0]["algorithm"] == "tree" and d["nccl_env"] == {"NCCL_ALGO": "Tree"}
    assert "NCCL_SOCKET_IFNAME" in err
    code, out, _ = cli(*args, "--nccl-env-from-shell", "--nccl-env", "NCCL_ALGO=Ring")
    assert json.loads(out)["results"][0]["algorithm"] == "ring"
    code, out, _ = cli(*args)   # without the flag the shell is not read
    assert json.loads(out)["nccl_env"] == {}


def test_pat_at_scale_runs_as_flows():
    # the engine's program has n(n-1) ops: a 1,024-node one-GPU-per-node all_gather goes to the flow model
    from sim.prediction.budget import ops_per_piece
    assert ops_per_piece("pat", "all_gather", 1024) == 1024 * 1023
    big = sim.simulate("all_gather", 1 << 30, "dgx-h100:nodes=1024,gpus_per_node=1")
    assert (big.algorithm, big.model) == ("pat", "flow")
    # where both run, the flow model's steps (each as long as its slowest flow, one after the other) stay
    # within 20% of the engine, never slower (the engine's FIFO sends can wait on a late shard)
    for size in (1 << 20, 1 << 30):
        e = sim.simulate("all_gather", size, ONE_GPU, "pat", "Simple", model="engine")
        f = sim.simulate("all_gather", size, ONE_GPU, "pat", "Simple", model="flow")
        assert 0.8 * e.time_us <= f.time_us <= e.time_us * 1.001


def test_configured_out_is_refused_like_nccl(one_gpu):
    # NCCL fails a collective its variables leave no algorithm for; a release without the pinned one too
    with pytest.raises(CollsimError, match="NCCL_NVLS_ENABLE=0"):
        sim.simulate("all_reduce", 1 << 20, "dgx-h100", nccl_env="NCCL_ALGO=NVLS,NCCL_NVLS_ENABLE=0")
    with pytest.raises(CollsimError, match="since NCCL 2.23"):
        sim.simulate("all_gather", 1 << 20, one_gpu, algorithm="pat", nccl_version="2.18")
    assert sim.simulate("all_gather", 1 << 20, one_gpu, algorithm="pat", nccl_version="2.23").algorithm == "pat"
