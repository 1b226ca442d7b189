"""``collsim flight simulate`` from built-ins and YAML files; ``sim`` never imports torch."""
import json
import subprocess
import sys

from sim.cli import main

YAML = """
name: two-groups
workload:
  world_size: 4
  process_groups: {tp: [[0, 1], [2, 3]]}
  program: [{compute_us: 100}, {all_reduce: 1M, pg: tp, wait: true}, {all_reduce: 1M}, wait]
faults: [{kind: straggler, rank: 0, call: 1, delay_us: 20000}]
cost: {model: alpha_beta, alpha_us: 2, bandwidth_GBps: 50}
timeout_ms: 10000
"""


def test_simulate_builtin_text(capsys):
    assert main(["flight", "simulate", "ddp-skip"]) == 0
    out = capsys.readouterr().out
    assert "waiting for rank(s) [2]" in out and "diagnosis: missing_rank; culprit rank(s) [2]" in out
    assert "watchdog timeout at 600080.852 ms" in out


def test_simulate_yaml_json_and_dump(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(YAML)
    assert main(["flight", "simulate", str(f), "--format", "json", "--dump", str(tmp_path / "d")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "finished" and out["end_us"] - out["baseline_end_us"] > 19_000
    assert out["diagnosis"]["error_type"] == "straggler" and out["diagnosis"]["culprits"] == [0]
    assert main(["flight", "analyze", str(tmp_path / "d"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["culprits"] == [0]


def test_recovery_scenario(capsys):
    assert main(["flight", "simulate", "shrink-vs-reinit"]) == 0
    out = capsys.readouterr().out
    assert "| 4096 | 1 |" in out and "reload checkpoint" in out


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    assert main(["flight", "simulate", "no-such-scenario"]) == 2
    assert main(["flight", "analyze", str(tmp_path)]) == 2
    f = tmp_path / "bad.yaml"
    f.write_text("workload: {world_size: 2, program: [{all_reduce: 1M}]}\nfaults: [{kind: explode}]\n")
    assert main(["flight", "simulate", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("collsim: error:") for line in err)


def test_sim_never_imports_torch():
    code = ("import sys, sim.commands.flight_command, sim.flight.scenarios, sim.flight.analyze, sim.cli;"
            "sim.cli.main(['flight', 'simulate', 'ddp-crash']);"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_collsim_cost_model_when_the_core_simulator_exists(tmp_path, capsys):
    import pytest

    import sim
    if not hasattr(sim, "simulate"):
        pytest.skip("sim.simulate is not built yet")
    from sim.flight.cost import CollsimCost
    c = CollsimCost("switch:bandwidth_GBps=100,latency_us=1")
    assert 0 < c("all_reduce", 1 << 20, 4) < c("all_reduce", 16 << 20, 4)
    f = tmp_path / "s.yaml"
    f.write_text("workload: {builtin: ddp_step, world_size: 4, buckets: 2, bucket_nbytes: 4M, steps: 1}\n"
                 "cost: {model: collsim, topology: 'switch:bandwidth_GBps=100'}\n"
                 "faults: [{kind: size, rank: 1, call: 1, factor: 2}]\n")
    assert main(["flight", "simulate", str(f), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)["diagnosis"]
    assert d["error_type"] == "size_mismatch" and d["culprits"] == [1]
