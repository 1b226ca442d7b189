"""Edge cases found in review: each one used to give a traceback, a silent guess or a wrong answer."""
import pytest

import sim
from sim.presets import load_topology


def test_two_gpu_ring_has_one_link_each_way():
    topo = load_topology("ring:n=2")
    assert sorted((l.src, l.dst) for l in topo.links) == [("gpu0", "gpu1"), ("gpu1", "gpu0")]


def test_algorithm_all_with_the_tuner_lists_only_what_nccl_runs(cli):
    code, out, err = cli("simulate", "-t", "ring:n=4", "-a", "all", "--model", "tuner", "-b", "1M", "-e", "1M", "--format", "csv")
    assert code == 0, err
    algos = {line.split(",")[1] for line in out.splitlines()[1:]}
    assert algos and algos <= {"ring", "tree"} and "recursive_hd" not in algos
    code, out, err = cli("simulate", "-t", "ring:n=3", "-c", "broadcast", "-a", "all", "--model", "tuner", "-b", "1M", "-e", "1M")
    assert code == 0, err


@pytest.mark.parametrize("args,message", [
    (["-b", "nan", "-e", "4"], "cannot read size 'nan'"),
    (["-b", "4", "-e", "inf"], "cannot read size 'inf'"),
    (["-b", "4", "-e", "4", "-f", "nan"], "step factor nan is not a number"),
    (["-b", "4", "-e", "4", "--trace", "/no/such/dir/t.json"], "does not exist"),
    (["-a", "ring", "-p", "Simple", "--nchannels", "0", "-b", "4", "-e", "4"], "nchannels=0 must be at least 1"),
    (["-a", "ring", "-p", "Simple", "--model", "alpha-beta", "--pipeline", "3", "-b", "4", "-e", "4"], "no effect on the alpha-beta model"),
])
def test_simulate_refuses_in_one_line(cli, args, message):
    code, _, err = cli("simulate", "-t", "ring:n=4", *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_plot_and_report_paths_are_checked_before_the_work(cli, tmp_path):
    code, _, err = cli("topo", "ring:n=4", "--plot", tmp_path / "x.txt")
    assert code == 2 and "ending in .png" in err
    existing = tmp_path / "afile"
    existing.write_text("x")
    code, _, err = cli("compare", "-m", existing, "-t", "ring:n=2", "--report", existing)
    assert code == 2 and "is an existing file" in err


def test_alpha_beta_uses_the_slowest_ring_hop():
    # 2 DGX H100: the ring's node-crossing hop is a 400 Gb/s NIC, not NVLink; a single textbook ring
    # cannot beat that hop's bandwidth
    r = sim.simulate("all_reduce", 1 << 30, "dgx-h100:nodes=2", "ring", "Simple", model="alpha-beta")
    assert r.busbw_GBps <= 50.0 + 1e-6


@pytest.mark.parametrize("spec,nbytes", [("ring:n=8", 16384), ("ring:n=8", 16 << 20), ("dgx-h100:nodes=2", 65536)])
def test_flow_and_engine_pick_the_same_protocol(spec, nbytes):
    a = sim.simulate("broadcast", nbytes, spec, "ring", "auto")
    b = sim.simulate("broadcast", nbytes, spec, "ring", "auto", model="flow")
    assert a.protocol == b.protocol


def test_bench_names_the_sweep_size_it_refuses(cli):
    code, _, err = cli("bench", "--backend", "gloo", "--nprocs", "2", "-b", "8", "-e", "26", "-f", "1.5")
    assert code == 2 and "sweep size" in err and "18 B" in err


@pytest.mark.parametrize("env,var", [("NCCL_ALGO=", "NCCL_ALGO"), ("NCCL_ALGO=Ring,NCCL_PROTO=", "NCCL_PROTO")])
def test_an_nccl_variable_set_to_nothing_is_named(cli, env, var):
    # "NCCL_ALGO=" used to run as if it were not given, and echoed "with NCCL_ALGO=" in the header
    code, out, err = cli("simulate", "--nccl-env", env, "-b", "1M", "-e", "1M")
    assert code != 0 and f"{var} is set to nothing" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("spec,need", [("dgx-h100:nodes=4,nvls_sharp=1", "needs sharp=1"),
                                       ("dgx-a100:nodes=2,nvls_sharp=1", "needs sharp=1"),
                                       ("dgx-h100:nodes=4,sharp=1,nvls=0,nvls_sharp=1", "needs NVLS")])
def test_nvls_sharp_without_what_it_joins_is_refused(cli, spec, need):
    code, out, err = cli("simulate", "-t", spec, "-b", "1G", "-e", "1G")
    assert code != 0 and need in err
    assert load_topology("dgx-h100:nodes=4,sharp=1,nvls_sharp=1").hardware.nvls_sharp is True


def test_root_of_a_collective_without_one_is_said_to_be_ignored(cli):
    code, out, err = cli("simulate", "--root", "3", "-b", "1M", "-e", "1M")
    assert code == 0 and "ignoring --root 3: all_reduce has no root" in err
    code, out, err = cli("simulate", "--root", "3", "-c", "broadcast", "-b", "1M", "-e", "1M")
    assert code == 0 and "ignoring --root" not in err
