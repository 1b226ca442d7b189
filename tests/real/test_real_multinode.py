"""collsim bench as one rank of a torchrun, mpirun or srun job; the rendezvous' address and token; --pairs.

Everything runs on this machine over 127.0.0.1: two torchrun agents (--nnodes 2), a real Open MPI
mpirun, and srun *emulated* (two processes started with the variables srun sets for a 2-task step).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from realutil import bench_cmd, free_port, new_env, processes_with

from real.measure import launchers, pairs, pairs_report
from sim.errors import CollsimError

SMALL = ["--backend", "gloo", "-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-w", "1", "--format", "json"]
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "COLLSIM_TOKEN")


def clean_env(**extra) -> dict:
    env = {k: v for k, v in new_env().items() if k not in LAUNCH_VARS and not k.startswith(("SLURM_", "OMPI_", "PMI_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def srun_env(rank: int, port: int, ntasks: int = 2, **extra) -> dict:
    """The variables srun sets for task ``rank`` of a one-node step of ``ntasks`` tasks (emulated)."""
    return clean_env(SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_PROCID=rank, SLURM_NTASKS=ntasks,
                     SLURM_STEP_NUM_TASKS=ntasks, SLURM_LOCALID=rank, SLURM_NODEID=0, SLURM_STEP_NODELIST="vm01",
                     SLURM_NNODES=1, MASTER_PORT=port, **extra)


# ---- launcher variables (no processes) ----------------------------------------------------------------------

@pytest.mark.parametrize("text,hosts", [
    ("node[01-04],gpu7", ["node01", "node02", "node03", "node04", "gpu7"]),
    ("a[8-10,3]", ["a8", "a9", "a10", "a3"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("solo", ["solo"]),
])
def test_slurm_hostlists_expand(text, hosts):
    assert launchers.expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["node[01-", "node[4-2]", "node[a-b]", "x[1-99999999]"])
def test_bad_hostlists_are_refused(text):
    with pytest.raises(CollsimError, match="Slurm node list"):
        launchers.expand_hostlist(text)


def test_srun_variables_name_the_rank_and_the_first_host():
    env = {"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
           "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_STEP_ID": "3", "SLURM_JOB_ID": "100"}
    job = launchers.detect(env)
    assert (job.launcher, job.rank, job.world, job.local_rank, job.nnodes) == ("slurm", 9, 16, 1, 2)
    assert job.master_addr == "gpu07" and job.master_port == 20000 + (100 * 16 + 3) % 40000
    assert launchers.detect({**env, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"}).master_addr == "10.0.0.1"


def test_a_batch_scripts_shell_is_not_a_step():
    """sbatch's shell has SLURM_PROCID=0 but no step: collsim starts its own ranks there."""
    assert launchers.detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "1"}) is None


def test_mpi_families_and_precedence():
    mpich = launchers.detect({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
                              "MASTER_ADDR": "n0"})
    assert (mpich.launcher, mpich.rank, mpich.world, mpich.local_rank) == ("mpi", 3, 4, 1)
    ompi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "1",
            "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "n0"}
    job = launchers.detect(ompi)   # mpirun inside an allocation: MPI's variables win over the step's
    assert (job.launcher, job.rank, job.master_addr) == ("mpi", 1, "127.0.0.1")  # one host: loopback


@pytest.mark.parametrize("env,message", [
    ({"OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE not"),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, "stale"),
    ({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}, "MASTER_ADDR"),
    ({"SLURM_PROCID": "0", "SLURM_STEP_ID": "1"}, "SLURM_NTASKS"),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
      "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_ID": "0"}, "do not describe a job"),
    ({"RANK": "5", "WORLD_SIZE": "2"}, "torchrun variables"),
])
def test_stale_or_partial_launcher_variables_are_refused(env, message):
    with pytest.raises(CollsimError, match=message):
        launchers.detect(env)


# ---- where the store listens (sockets only, no torch) --------------------------------------------------------

def test_the_store_socket_binds_the_one_address_asked_for():
    from real.measure import rendezvous
    s = rendezvous.listener("127.0.0.1", 0, spans_hosts=False)
    try:
        assert s.getsockname()[0] == "127.0.0.1"
        with pytest.raises(CollsimError, match="already in use"):
            rendezvous.listener("127.0.0.1", s.getsockname()[1], spans_hosts=False)
    finally:
        s.close()
    with pytest.raises(CollsimError, match="does not have the rendezvous address"):
        rendezvous.listener("192.0.2.77", 0, spans_hosts=True)          # TEST-NET-1: not this host's
    with pytest.raises(CollsimError, match="other hosts cannot reach"):
        rendezvous.listener("localhost", 0, spans_hosts=True)            # e.g. Debian's 127.0.1.1 host name


# ---- the verdict (no processes): expected values from the construction of the rows -------------------------

def _rows(world, slow):
    return [{"ranks": [i, j], "measured_GBps": 2.0 if slow(i, j) else 9.0, "predicted_GBps": 10.0}
            for i in range(world) for j in range(i + 1, world)]


def test_verdict_names_the_node_every_pair_of_which_is_slow():
    hosts = [h for h in ("n0", "n1", "n2", "n3") for _ in range(2)]            # 4 nodes x 2 ranks
    v = pairs_report.verdict(_rows(8, lambda i, j: "n2" in (hosts[i], hosts[j])), hosts, 0.8)
    assert v["slow_nodes"] == ["n2"] and v["slow_ranks"] == [4, 5] and v["slow_links"] == []
    assert v["node_matrix"][0][1] == pytest.approx(0.9) and v["node_matrix"][2][3] == pytest.approx(0.2)


@pytest.mark.parametrize("healthy", [1.2, 1.4, 1.6])
def test_one_bad_rank_of_four_on_a_node_names_the_rank_not_the_node(healthy):
    # rank 2's three pairs at 0.12, the other three at `healthy`: half the node's pairs are slow, so the
    # node is not named whatever the healthy pairs read (a median of six averaged 0.12 and 1.2-1.4 below 0.8)
    rows = [{"ranks": [i, j], "measured_GBps": 0.12 if 2 in (i, j) else healthy, "predicted_GBps": 1.0}
            for i in range(4) for j in range(i + 1, 4)]
    v = pairs_report.verdict(rows, ["vm"] * 4, 0.8)
    assert v["slow_ranks"] == [2] and v["slow_nodes"] == [] and v["slow_links"] == []


def test_verdict_names_a_link_when_no_end_is_bad():
    hosts = ["n0", "n1", "n2", "n3"]
    v = pairs_report.verdict(_rows(4, lambda i, j: (i, j) == (1, 3)), hosts, 0.8)
    assert v["slow_pairs"] == [[1, 3]] and v["slow_nodes"] == [] and v["slow_ranks"] == []
    assert v["slow_links"] == [{"ranks": [1, 3], "hosts": ["n1", "n3"]}]


def test_prediction_on_a_topology_is_the_routes_closed_form():
    # switch preset: every path is two links of 50 GB/s and latency_us / 2 each: S / (1 us + S / 50 GB/s)
    predict, how = pairs.predictor("switch:n=4,bandwidth_GBps=50,latency_us=1", ["h"] * 4, [0, 1, 2, 3], 1 << 20,
                                   None, None, None)
    want = (1 << 20) / (1.0 + (1 << 20) / 50e3) / 1e3
    assert predict(0, 3) == pytest.approx(want) and "switch" in how


# ---- real launches ------------------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="collsim bench needs torch (pip install torch==2.13.0)")


def _check_doc(doc, world, launcher):
    assert doc["world_size"] == world and doc["launcher"] == launcher
    assert [r["rank"] for r in doc["ranks"]] == list(range(world))
    assert all(r["host"] and "local_rank" in r and r["device"] == "cpu" for r in doc["ranks"])
    assert all(r["wrong"] == 0 and r["inplace_wrong"] == 0 for r in doc["results"])


def test_two_torchrun_agents_on_loopback():
    env, port = clean_env(), free_port()
    agents = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                                "--node-rank", str(i), "--master-addr", "127.0.0.1", "--master-port", str(port),
                                "-m", "sim", "bench", *SMALL], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for i in (0, 1)]
    outs = [a.communicate(timeout=180) for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outs[0][1][-500:] + outs[1][1][-500:]
    _check_doc(json.loads(outs[0][0]), 2, "torchrun")
    assert outs[1][0].strip() == ""            # only rank 0 prints
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (apt-get install openmpi-bin)")
def test_mpirun_two_ranks_like_nccl_tests_mpi_build():
    env = clean_env()
    p = subprocess.run(["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe", "-x", "MASTER_ADDR=127.0.0.1",
                        "-x", f"MASTER_PORT={free_port()}", *bench_cmd(*SMALL)],   # local ranks inherit the rest
                       env=env, capture_output=True, text=True, timeout=180, check=False)
    assert p.returncode == 0, p.stderr[-800:]
    _check_doc(json.loads(p.stdout), 2, "mpi")   # one JSON document: the other rank printed nothing on stdout


def _srun_pair(port, tokens, *args):
    procs = [subprocess.Popen(bench_cmd(*SMALL, *args), env=srun_env(r, port, COLLSIM_TOKEN=tokens[r]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    return [(p, *p.communicate(timeout=180)) for p in procs]


def test_emulated_srun_step_runs_and_reports_every_rank():
    (p0, out0, err0), (p1, out1, _) = _srun_pair(free_port(), ["s3cret", "s3cret"])
    assert p0.returncode == 0 and p1.returncode == 0, err0[-800:]
    _check_doc(json.loads(out0), 2, "slurm")
    assert out1 == ""


def test_a_wrong_token_is_refused_before_any_collective():
    (p0, out0, err0), (p1, out1, err1) = _srun_pair(free_port(), ["right", "wrong"])
    assert p0.returncode == 2 and p1.returncode == 2 and out0 == out1 == ""
    assert "refused rank(s) 1" in err0 and "token differs" in err0 and "Traceback" not in err0
    assert "rank 1 was refused by rank 0" in err1


def test_a_network_rendezvous_without_a_token_is_refused(cli, monkeypatch):
    for k, v in {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                 "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "MASTER_ADDR": "10.255.255.1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("COLLSIM_TOKEN", raising=False)
    code, out, err = cli("bench", "--backend", "gloo")
    assert code == 2 and out == "" and err.count("\n") == 1 and "no token is set" in err


def test_a_token_file_others_can_read_is_refused(cli, tmp_path):
    f = tmp_path / "token"
    f.write_text("abc\n")
    f.chmod(0o644)
    code, _, err = cli("bench", "--backend", "gloo", "--token-file", str(f))
    assert code == 2 and "chmod 600" in err


def _listening(pids):
    ss = subprocess.run(["ss", "-ltnpH"], check=False, capture_output=True, text=True).stdout.splitlines()
    return [line for line in ss if any(f"pid={p}," in line for p in pids)]


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to list listening sockets")
def test_an_srun_step_on_one_host_listens_on_loopback_only():
    """Nothing listens on a non-loopback address unless asked: the store and gloo's sockets."""
    port = free_port()
    procs = [subprocess.Popen(bench_cmd("--backend", "gloo", "-b", "1K", "-e", "1K", "-n", "100000000", "--timeout", "60"),
                              env=srun_env(r, port, COLLSIM_TOKEN="t"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True) for r in (0, 1)]
    try:
        deadline, mine = time.monotonic() + 60, []
        while time.monotonic() < deadline and len(mine) < 3:   # the store, and both ranks' gloo sockets
            time.sleep(1)
            mine = _listening([p.pid for p in procs])
        assert len(mine) >= 3, mine
        assert all(re.search(r"\s127\.0\.0\.1:\d+\s", line) for line in mine), mine
        assert any(f"127.0.0.1:{port} " in line for line in mine)   # rank 0's store, on MASTER_PORT
    finally:
        for p in procs:
            os.killpg(p.pid, 9)
            p.wait()


def test_pairs_on_four_local_ranks(tmp_path):
    env = clean_env()
    plot = tmp_path / "pairs.png"
    p = subprocess.run(bench_cmd("--pairs", "--backend", "gloo", "--nprocs", "4", "-b", "64K", "-e", "64K", "-n", "3",
                                 "-w", "1", "--format", "json", "--plot", plot), env=env, capture_output=True, text=True,
                       timeout=240, check=False)
    assert p.returncode in (0, 1), p.stderr[-800:]   # 1: some pair below the threshold on this shared machine
    doc = json.loads(p.stdout)
    assert sorted(tuple(q["ranks"]) for q in doc["pairs"]) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for q in doc["pairs"]:
        assert q["measured_GBps"] > 0 and q["predicted_GBps"] > 0
        assert q["ratio"] == pytest.approx(q["measured_GBps"] / q["predicted_GBps"])
        assert q["measured_GBps"] == pytest.approx(65536 / q["median_time_us"] / 1e3)
        assert q["slow"] == (q["ratio"] < 0.8)
    assert (p.returncode == 1) == bool(doc["slow_pairs"])
    assert doc["world_size"] == 4 and len(doc["ranks"]) == 4 and isinstance(doc["slow_nodes"], list)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert processes_with(env["COLLSIM_TEST_TOKEN"]) == []


def _network_address():
    import socket
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))   # no packet is sent: the kernel picks the route and this host's address
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


@pytest.mark.skipif(shutil.which("ss") is None or _network_address() is None,
                    reason="needs ss and a non-loopback IPv4 address on this machine")
def test_listen_asks_for_one_network_address_and_gets_only_that():
    ip, env = _network_address(), clean_env()
    p = subprocess.Popen(bench_cmd("--backend", "gloo", "--nprocs", "2", "--listen", ip, "-b", "1K", "-e", "1K",
                                   "-n", "100000000", "--timeout", "60"), env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline, mine = time.monotonic() + 60, []
        while time.monotonic() < deadline and len(mine) < 3:
            time.sleep(1)
            mine = _listening(processes_with(env["COLLSIM_TEST_TOKEN"]))
        assert len(mine) >= 3, mine
        assert all(re.search(rf"\s{re.escape(ip)}:\d+\s", line) for line in mine), mine   # not 0.0.0.0, not *
    finally:
        os.killpg(p.pid, 9)
        p.wait()


def test_a_rank_that_cannot_reach_rank_0_says_so_in_one_line():
    t0 = time.monotonic()
    p = subprocess.run(bench_cmd("--backend", "gloo", "-b", "1K", "-e", "1K", "--timeout", "3"),
                       env=srun_env(1, free_port(), COLLSIM_TOKEN="t"), capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 1 and p.stdout == "" and time.monotonic() - t0 < 40
    assert p.stderr.strip().count("\n") == 0 and "rank 1:" in p.stderr and "MASTER_ADDR/MASTER_PORT" in p.stderr


def test_pairs_name_the_slow_rank_and_no_node_or_link():
    """Rank 2 waits 50 ms in every round (a test hook standing in for a bad NIC). The reference topology's
    link (0.01 GB/s, 50 us: a 64 KiB round of 6.6 ms) is far below what loopback gives (well under 1 ms
    a round, and a healthy pair is named only past 8.2 ms), so healthy pairs read above 1 and only the
    pairs with rank 2 (~0.12) fall below 0.8: rank 2 is named, the host is not (3 of its 6 pairs are fine)."""
    env = clean_env(COLLSIM_TEST_SLOW_RANK=2, COLLSIM_TEST_SLOW_MS=50)
    p = subprocess.run(bench_cmd("--pairs", "--backend", "gloo", "--nprocs", "4", "-b", "64K", "-e", "64K", "-n", "3",
                                 "-w", "1", "--format", "json", "--topology", "switch:n=4,bandwidth_GBps=0.01,latency_us=50"),
                       env=env, capture_output=True, text=True, timeout=240, check=False)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and "slow ranks" in p.stderr
    assert sorted(doc["slow_pairs"]) == [[0, 2], [1, 2], [2, 3]]
    assert doc["slow_ranks"] == [2] and doc["slow_nodes"] == [] and doc["slow_links"] == []
