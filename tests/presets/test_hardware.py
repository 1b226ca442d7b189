"""Hardware presets: public facts in meta and links, rail-optimised fat trees, PCIe boxes, clear errors."""

import pytest

import sim
from sim.errors import CollsimError
from sim.presets import load_topology

META_KEYS = {"gpu_arch", "gpu", "nvlink_GBps", "nvlink_links", "intra", "nvswitch", "pcie_gen", "p2p", "nodes",
             "gpus_per_node", "nics_per_node", "nic_GBps", "nic_gbps", "sharp", "nvls", "cpu", "nic_latency_us"}

VALIDATION_SPECS = ["dgx-a100", "gb200-nvl72:gpus_per_node=8", "dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100",
                    "dgx-h100:nodes=8,nics_per_node=8,nic_gbps=400,sharp=1", "hgx-a100-4:nodes=2,nics_per_node=2,nic_gbps=200",
                    "hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200", "pcie:gpus=2,gen=3,p2p=0"]


@pytest.mark.parametrize("spec", VALIDATION_SPECS + ["dgx-h200", "dgx-b200:nodes=2", "gb200-nvl72", "pcie:gpus=4,gen=5"])
def test_specs_build_with_every_meta_key(spec):
    topo = load_topology(spec)
    assert META_KEYS <= set(topo.meta)
    assert topo.meta["nodes"] * topo.meta["gpus_per_node"] == topo.nranks
    assert topo.meta["nic_GBps"] == topo.meta["nic_gbps"] / 8


@pytest.mark.parametrize("spec,arch,gpu,nvlink,links,cpu,nvls", [
    ("dgx-a100", "ampere", "A100-SXM4", 300.0, 12, "amd", False),      # 12 x NVLink3 (25 GB/s/dir)
    ("dgx-h100", "hopper", "H100-SXM", 450.0, 18, "intel", True),      # 18 x NVLink4
    ("dgx-h200", "hopper", "H200-SXM", 450.0, 18, "intel", True),
    ("dgx-b200", "blackwell", "B200", 900.0, 18, "intel", True),       # 18 x NVLink5 (50 GB/s/dir)
    ("gb200-nvl72", "blackwell", "GB200", 900.0, 18, "arm", True),
    ("hgx-a100-4", "ampere", "A100-SXM4", 300.0, 12, "amd", False),
])
def test_public_facts(spec, arch, gpu, nvlink, links, cpu, nvls):
    m = load_topology(spec).meta
    assert (m["gpu_arch"], m["gpu"], m["nvlink_GBps"], m["nvlink_links"], m["cpu"], m["nvls"]) == (arch, gpu, nvlink, links, cpu, nvls)
    assert m["intra"] == "nvlink" and m["p2p"] is True and m["sharp"] is False


def test_nvswitch_node_model():
    topo = load_topology("dgx-h100")
    assert topo.nranks == 8 and topo.nhosts == 1 and topo.meta["symmetry"] == "rotation"
    nvlinks = [l for l in topo.links if l.kind == "nvlink"]
    assert len(nvlinks) == 16 and {l.bandwidth_GBps for l in nvlinks} == {450.0}
    assert [topo.links[i].dst for i in topo.route(0, 5)] == ["h0.nvswitch", "h0.gpu5"]
    assert topo.path_latency_us(0, 5) == pytest.approx(0.7)
    assert topo.reducing_switches("nvls") == (topo.node_index["h0.nvswitch"],)
    assert not load_topology("dgx-h100:nvls=0").reducing_switches()


def test_gb200_rack_is_one_node():
    rack = load_topology("gb200-nvl72")
    assert rack.nranks == 72 and rack.nhosts == 1
    eight = load_topology("gb200-nvl72:gpus_per_node=8,nodes=2")
    assert eight.meta["nics_per_node"] == 8 and eight.meta["nic_gbps"] == 400.0   # one 400G NIC per GPU


def test_hgx_a100_4_is_a_direct_mesh():
    topo = load_topology("hgx-a100-4:nodes=2,nics_per_node=2,nic_gbps=200")
    assert topo.meta["nvswitch"] is False and topo.meta["nvlink_pair_GBps"] == 100.0  # 4 links x 25 GB/s per pair
    assert [topo.links[i].dst for i in topo.route(0, 3)] == ["h0.gpu3"]
    assert topo.path_bandwidth_GBps(0, 3) == 100.0
    # GPUs 0,1 use NIC 0 (rail 0), GPUs 2,3 NIC 1 (rail 1)
    assert [topo.links[i].dst for i in topo.route(1, 5)] == ["h0.pcie0", "h0.nic0", "leaf0", "h1.nic0", "h1.pcie0", "h1.gpu1"]
    assert "leaf1" in [topo.links[i].dst for i in topo.route(2, 6)]


def test_rail_optimised_fat_tree():
    topo = load_topology("dgx-h100:nodes=2")
    route = lambda a, b: [topo.links[i].dst for i in topo.route(a, b)]
    assert route(3, 11) == ["h0.pcie3", "h0.nic3", "leaf3", "h1.nic3", "h1.pcie3", "h1.gpu3"]   # same rail: one leaf
    assert "spine" in route(3, 12)                                                          # other rail: via spine
    assert route(0, 1) == ["h0.nvswitch", "h0.gpu1"]                                        # inside a node: NVLink
    assert topo.path_bandwidth_GBps(3, 11) == 50.0                                          # 400 Gb/s NIC
    assert topo.path_latency_us(3, 11) == pytest.approx(0.5 + 0.25 + 0.6 + 0.6 + 0.25 + 0.5)
    leaf_up = [l for l in topo.links if l.src == "leaf0" and l.dst == "spine"]
    assert leaf_up[0].bandwidth_GBps == 2 * 50.0                                            # non-blocking: 2 hosts x 50
    half = load_topology("dgx-h100:nodes=2,oversubscription=2")
    assert [l for l in half.links if l.src == "leaf0" and l.dst == "spine"][0].bandwidth_GBps == 50.0


def test_scalable_units_and_sharp_switches():
    topo = load_topology("dgx-h100:nodes=40,sharp=1")
    names = set(topo.node_index)
    assert {"su0.leaf0", "su1.leaf7", "spine"} <= names and "su2.leaf0" not in names   # 32 nodes per leaf
    assert len(topo.reducing_switches("sharp")) == 2 * 8 + 1
    assert len(topo.reducing_switches("nvls")) == 40


def test_nics_per_node_and_part_of_a_node():
    topo = load_topology("dgx-a100:nodes=2,nics_per_node=4,nic_gbps=100")
    assert topo.meta["nic_GBps"] == 12.5 and sum(1 for n in topo.nodes if n.kind == "nic") == 8
    # GPUs 2 and 3 share NIC 1
    assert "h0.nic1" in [topo.links[i].dst for i in topo.route(2, 10)]
    assert "h0.nic1" in [topo.links[i].dst for i in topo.route(3, 11)]
    part = load_topology("dgx-h100:nodes=2,gpus_per_node=4")
    assert part.nranks == 8 and part.meta["nics_per_node"] == 4


def test_pcie_p2p_and_host_bounce():
    p2p = load_topology("pcie:gpus=2,gen=3,p2p=1")
    bounce = load_topology("pcie:gpus=2,gen=3,p2p=0")
    assert [p2p.links[i].dst for i in p2p.route(0, 1)] == ["pcie", "gpu1"]
    assert [bounce.links[i].dst for i in bounce.route(0, 1)] == ["pcie.up", "cpu", "pcie.down", "gpu1"]
    assert p2p.meta["intra"] == "pcie" and bounce.meta["p2p"] is False and bounce.meta["pcie_gen"] == 3
    assert p2p.path_bandwidth_GBps(0, 1) == 16.0 and load_topology("pcie:gen=5").path_bandwidth_GBps(0, 1) == 64.0
    # both GPUs send at once: through the host they share one upstream port, so a large all_reduce takes twice as long
    t = {name: sim.simulate("all_reduce", 1 << 30, topo, algorithm="ring", protocol="ideal").time_us
         for name, topo in (("p2p", p2p), ("bounce", bounce))}
    assert t["bounce"] / t["p2p"] == pytest.approx(2.0, rel=0.01)


@pytest.mark.parametrize("spec,message", [
    ("dgx-a100:nvls=1", "no NVLink SHARP"),
    ("hgx-a100-4:nvls=1", "no NVSwitch"),
    ("dgx-h100:sharp=1", "nodes=2 or more"),
    ("dgx-h100:gpus_per_node=9", "gpus_per_node=9"),
    ("dgx-h100:nodes=2,gpus_per_node=4,nics_per_node=5", "nics_per_node=5"),
    ("dgx-h100:nodes=2,nic_gbps=0", "nic_gbps=0"),
    ("dgx-h100:nodes=2,oversubscription=0.5", "oversubscription=0.5"),
    ("dgx-h100:gpus_per_node=1", "at least 2"),
    ("dgx-h100:rails=8", "no parameter 'rails'"),
    ("pcie:gen=2", "gen=2"),
    ("pcie:gpus=1", "gpus=1"),
    ("pcie:arch=turing", "arch='turing'"),
])
def test_bad_specs_name_the_problem(spec, message):
    with pytest.raises(CollsimError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_topology(spec)


def test_2048_node_cluster_builds():
    # How fast it builds is the benchmarks' job (benchmarks/run.py times 16,384-GPU runs end to end);
    # a timed assertion here would fail on a loaded machine, not on slow code.
    topo = load_topology("dgx-h100:nodes=2048")
    assert topo.nranks == 16384 and topo.nhosts == 2048
    assert sum(1 for n in topo.nodes if n.kind == "nic") == 2048 * 8


def test_plot_draws_a_cluster(tmp_path):
    from sim.viz.topology_plot import plot_topology
    path = tmp_path / "topo.png"
    plot_topology(load_topology("dgx-h100:nodes=2"), str(path))
    assert path.stat().st_size > 20_000


@pytest.mark.parametrize("spec", ["dgx-h100", "hgx-a100-4", "gb200-nvl72:gpus_per_node=16"])
def test_single_node_presets_use_the_engines_symmetric_fast_path(spec):
    from sim.algorithms import build_program
    from sim.engine import simulate_program
    topo = load_topology(spec)
    p = build_program("ring", "all_reduce", topo.nranks, nchannels=2, pipeline=2)
    fast, slow = simulate_program(p, topo, 1 << 24), simulate_program(p, topo, 1 << 24, symmetry="off")
    assert fast.symmetric and fast.time_us == pytest.approx(slow.time_us, rel=1e-12)


def test_every_platform_of_the_table_is_a_preset_with_its_text_and_parameters():
    import inspect

    from sim.presets import presets
    from sim.presets.hardware import PLATFORMS
    known = presets()
    keys = ["nodes", "gpus_per_node", "nics_per_node", "nic_gbps", "sharp", "nvls", "oversubscription",
            "nodes_per_leaf", "nvls_sharp", "fabric", "nic_path", "gpus_without_gdr"]
    assert [pf.preset for pf in PLATFORMS] == ["dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "hgx-a100-4", "hgx-h100-4",
                                                "gh200-4", "hgx-v100-4"]
    for pf in PLATFORMS:
        pr = known[pf.preset]
        assert pr.summary == pf.summary and pr.builder.__doc__ == pf.sources and "Source" in pf.sources
        assert list(pr.params) == keys and pr.params["nodes"] == (int, 1)
        assert pr.params["fabric"] == (str, "slingshot" if pf.preset in ("hgx-a100-4", "gh200-4") else "ib")
        # Polaris-like and ABCI (V) nodes: NICs on the CPU's root complex (PHB); DGX/HGX 8-GPU boards: behind the GPU's switch
        assert pr.params["nic_path"] == (str, "PHB" if pf.preset in ("hgx-a100-4", "gh200-4", "hgx-v100-4") else "PXB")
        assert pr.builder.__name__ == pf.preset.replace("-", "_") and inspect.isfunction(pr.builder)
