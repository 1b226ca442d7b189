"""Fabrics, NIC layouts, launch mode and all_to_all (issue 13), and the leave-one-case-out fit.

Expected values come from the published measurements in sim/data/public_cases.json (each with its source),
from closed forms (bytes over links), or from fits that exclude the case being predicted."""
import json
import os
import subprocess
import sys

import pytest

import sim
from sim.commands import crossval
from sim.commands.validate import PUBLIC_CASES, score_case
from sim.errors import CollsimError
from sim.io.nccl_tests_format import parse_nccl_tests_meta
from sim.nccl import calibration
from sim.nccl.machine import machine, with_gpus_per_process
from sim.nccl.versions import LATEST
from sim.presets import load_topology
from sim.topology.files import topology_from_dict

CASES = {c["id"]: c for c in json.load(open(PUBLIC_CASES))["cases"]}


def test_public_set_is_broad_and_cited():
    cases = list(CASES.values())
    assert len(cases) >= 20
    assert len({c["collective"] for c in cases}) >= 5
    assert len({c["fabric"] for c in cases if c.get("fabric")}) >= 4
    for c in cases:
        assert c["source"] and c["conditions"] and c["topology"], c["id"]
        assert load_topology(c["topology"]).nranks == c["nranks"], c["id"]


@pytest.mark.parametrize("spec, message", [
    ("dgx-h100:nodes=2,fabric=xyz", "use one of ib, roce, efa, efa2, slingshot, tcpxo"),
    ("dgx-h100:nodes=2,nics_per_node=64", "more than 32: NCCL's topology search finds at most 32 channels"),
    ("dgx-h100:nodes=2,nics_per_node=12", "a multiple of 8"),
])
def test_bad_network_parameters_say_why(spec, message):
    with pytest.raises(CollsimError, match=message):
        load_topology(spec)


def test_topology_file_fabric_is_checked():
    doc = {"gpus": 2, "links": [{"src": "gpu0", "dst": "gpu1", "bandwidth_GBps": 10, "duplex": True}]}
    assert topology_from_dict({**doc, "meta": {"fabric": "RoCE"}}).meta["fabric"] == "roce"
    with pytest.raises(CollsimError, match="fabric='ethernet' is not a fabric"):
        topology_from_dict({**doc, "meta": {"fabric": "ethernet"}})


def test_several_nics_per_gpu_carry_their_sum():
    # p5-like: 32 x 100G = 8 ports of 4 x 12.5 GB/s; a NIC-bound ring moves the same bytes as 8 x 400G
    p5 = load_topology("dgx-h100:nodes=2,nics_per_node=32,nic_gbps=100")
    ports = [l for l in p5.links if l.kind == "net" and l.src.startswith("h0.nic")]
    assert len(ports) == 8 and all(l.bandwidth_GBps == pytest.approx(4 * 100 / 8) for l in ports)
    a = sim.simulate("all_reduce", 1 << 30, p5, "ring", "Simple")
    b = sim.simulate("all_reduce", 1 << 30, "dgx-h100:nodes=2,nics_per_node=8,nic_gbps=400", "ring", "Simple")
    assert a.busbw_GBps == pytest.approx(b.busbw_GBps, rel=0.02)


def test_fewer_nics_than_gpus_share_them():
    # 4 NICs for 8 GPUs: a NIC-bound ring gets half the bandwidth of 8 NICs (bytes over half the links)
    four = sim.simulate("all_reduce", 1 << 30, "dgx-a100:nodes=2,nics_per_node=4,nic_gbps=200", "ring", "Simple")
    eight = sim.simulate("all_reduce", 1 << 30, "dgx-a100:nodes=2,nics_per_node=8,nic_gbps=200", "ring", "Simple")
    assert four.busbw_GBps / eight.busbw_GBps == pytest.approx(0.5, rel=0.1)


def test_launch_mode_from_header_and_flag():
    assert parse_nccl_tests_meta("# nThread 1 nGpus 8 minBytes 32768 maxBytes 17179869184\n")["gpus_per_process"] == 8
    assert machine(with_gpus_per_process(load_topology("dgx-a100"), 8)).gpus_per_process == 8
    with pytest.raises(CollsimError, match="whole number from 1 to 8"):
        with_gpus_per_process(load_topology("dgx-a100"), 9)
    out = subprocess.run([sys.executable, "-m", "sim", "simulate", "-t", "dgx-a100", "-b", "8", "-e", "8",
                          "--gpus-per-process", "0"], capture_output=True, text=True, env={**os.environ})
    assert out.returncode == 2 and "collsim: error: --gpus-per-process 0" in out.stderr


def test_launch_mode_out_of_sample():
    """A1 was run with -g 8 (one thread, 8 GPUs). Fit the launch constants on the other single-node
    cases only (E1 family: -g 2; B1: -g 1), then predict A1's small sizes: the published times are met
    within 30%, and far better than a prediction that ignores -g."""
    train = [crossval.Case(CASES[k]) for k in ("B1", "E1", "E1-AG", "E1-BC", "E1-RD", "E1-A2A")]
    fitted = crossval.fit(train)
    a1 = CASES["A1"]
    with calibration.override(fitted):
        with_g = score_case(a1)["lat_median"]
        without = score_case({**a1, "gpus_per_process": 1})["lat_median"]
    assert with_g <= 0.30 and with_g < without


def test_all_to_all_runs_point_to_point():
    one = sim.simulate("all_to_all", 1 << 30, "dgx-h100")
    two = sim.simulate("all_to_all", 1 << 30, "dgx-h100:nodes=2")
    assert one.algorithm == two.algorithm == "p2p" and two.explain["selected_by"] == f"NCCL {LATEST.version} tuner model"
    small = sim.simulate("all_to_all", 16 * 1024, "dgx-h100:nodes=2")
    assert small.protocol == "LL"   # 1 KiB per peer: under NCCL_P2P_LL_THRESHOLD


@pytest.mark.parametrize("case, train, tolerance", [("E1-A2A", ("E1", "E1-AG"), 0.20), ("S2-A2A", (), 0.15)])
def test_all_to_all_large_sizes_match_published(case, train, tolerance):
    """Largest published size, two nodes (2x DGX A100 over IB, with the priors: public figures not fitted
    on any case) within 15%, and one node (2 GPUs over host-bounced PCIe, with the host-bounce efficiency
    fitted on the same machine's other two-way collectives only) within 20%: there the model is 15% low
    (all_to_all moves 4.6 GB/s each way where all_gather moves 3.8; docs/nccl-model.md, Known gaps)."""
    c = CASES[case]
    big = max(c["rows"], key=lambda r: r["size"])
    values = crossval.fit([crossval.Case(CASES[k]) for k in train]) if train else crossval.PRIORS
    with calibration.override(values):
        r = sim.simulate("all_to_all", big["size"], with_gpus_per_process(load_topology(c["topology"]), c["gpus_per_process"]))
    assert r.busbw_GBps == pytest.approx(big["busbw"], rel=tolerance)


@pytest.mark.parametrize("case, train", [("C6-2-A2A", "C6-8-A2A"), ("C6-8-A2A", "C6-2-A2A")])
def test_slingshot_all_to_all_from_the_other_node_count(case, train):
    """ALCF Polaris (Slingshot 11, aws-ofi-nccl) all_to_all runs at about half what its NICs give the
    other collectives. The share its nodes keep (two of four GPUs without GPUDirect RDMA:
    ``no_gdr_p2p_share``) fitted on one node count alone predicts the other's largest published size
    within 15% (the published busbw, public_cases.json); the priors alone miss the 2-node case by far more."""
    c = CASES[case]
    big = max(c["rows"], key=lambda r: r["size"])
    fitted = crossval.fit([crossval.Case(CASES[train])])
    topo = load_topology(c["topology"])
    with calibration.override(fitted):
        r = sim.simulate("all_to_all", big["size"], topo)
    assert r.algorithm == "p2p" and r.busbw_GBps == pytest.approx(big["busbw"], rel=0.15)
    if case == "C6-2-A2A":
        with calibration.override(crossval.PRIORS):
            prior = sim.simulate("all_to_all", big["size"], topo)
        assert abs(prior.busbw_GBps / big["busbw"] - 1) > 0.3


def test_many_rank_all_to_all_pipelines_to_the_nic_bound():
    """32 ranks (8 nodes x 4 A100, 2 NICs of 25 GB/s per node), links at line rate: NCCL chunks every
    peer's block, so the NICs stay busy and the time is their load: each node sends 4 x 28/32 of a
    buffer over 50 GB/s (within 6%: latency, pipeline fill, first-come first-served queueing). It ran
    unpipelined (one piece per block) at 60% of that rate."""
    size = 1 << 30
    line_rate = {"efficiency.slingshot": 1.0, "p2p_share.slingshot": 1.0, "gdr_host_bridge_efficiency": 1.0,
                 "no_gdr_p2p_share": 1.0}
    with calibration.override(line_rate):
        r = sim.simulate("all_to_all", size, "hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200", "p2p", "Simple")
    bound_us = 4 * size * 28 / 32 / 50e3
    assert r.time_us == pytest.approx(bound_us, rel=0.06)


def test_cross_validation_never_sees_the_scored_case(tmp_path):
    """Leave-one-case-out: the constants a case is scored with do not change when its own measurements
    do; the JSON summary has the same keys as the in-sample one."""
    pick = [CASES[k] for k in ("E1", "E1-AG", "E1-BC", "E1-RD")]
    scores, _ = crossval.cross_validate(pick, score_case)
    doubled = [dict(pick[0], rows=[{**r, "time_us": 2 * r["time_us"], "busbw": r["busbw"] / 2} for r in pick[0]["rows"]])] + pick[1:]
    again, _ = crossval.cross_validate(doubled, score_case)
    assert again[0]["fitted"] == scores[0]["fitted"]
    assert again[1]["fitted"] != scores[1]["fitted"] or again[2]["fitted"] != scores[2]["fitted"]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": pick}))
    out = subprocess.run([sys.executable, "-m", "sim", "validate", str(path), "--cross-validate", "--format", "json"],
                         capture_output=True, text=True, env={**os.environ})
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert set(d["cross_validated"]) == set(d["overall"]) and len(d["cross_validated_cases"]) == 4


def test_slingshot_rendezvous_adds_one_cost_per_ring_step_above_the_threshold():
    # closed form: a ring all_gather over n ranks has n - 1 steps; LL puts 2 bytes on the wire per byte, so
    # a rank's share per channel of at least 8 KiB crosses cxi's 16 KiB rendezvous threshold
    spec = "hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200,fabric=slingshot"
    topo, n, r = load_topology(spec), 32, 10.0

    def time(size, cost):
        with calibration.override({"rendezvous_us.slingshot": cost}):
            q = sim.simulate("all_gather", size, topo, "ring", "LL")
        return q.time_us, q.explain.get("nchannels") or 1

    small, nch = time(n * 1024, r)
    assert small == pytest.approx(time(n * 1024, 0.0)[0])          # 1 KiB a rank: eager
    size = n * 8192 * 8                                              # 64 KiB a rank: above for any channel count <= 8
    assert time(size, r)[0] - time(size, 0.0)[0] == pytest.approx((n - 1) * r)
    with calibration.override({"rendezvous_us.slingshot": r}):   # --explain says it apart
        assert sim.simulate("all_gather", size, topo, "ring", "LL").explain["rendezvous_us"] == pytest.approx((n - 1) * r)
    # InfiniBand has no such switch; FI_CXI_RDZV_THRESHOLD is not modelled (named as ignored)
    assert sim.simulate("all_gather", size, topo, "ring", "LL", nccl_env={"FI_CXI_RDZV_THRESHOLD": "0"}).time_us == \
        pytest.approx(sim.simulate("all_gather", size, topo, "ring", "LL").time_us)
    ib = load_topology("hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200,fabric=ib")
    with calibration.override({"rendezvous_us.slingshot": r}):
        a = sim.simulate("all_gather", size, ib, "ring", "LL").time_us
    assert a == pytest.approx(sim.simulate("all_gather", size, ib, "ring", "LL").time_us)
