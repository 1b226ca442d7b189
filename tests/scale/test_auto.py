"""``--model auto``, the memory budget and the predictor table."""
import json

import pytest

import sim
from sim import api
from sim.errors import CollsimError
from sim.prediction.budget import engine_estimate, parse_memory
from sim.presets import load_topology


def test_every_model_is_one_predictor_with_one_signature():
    import inspect
    assert set(api.PREDICTORS) == set(api.MODELS)
    shapes = {tuple(inspect.signature(f).parameters)[:6] for f in api.PREDICTORS.values()}
    assert shapes == {("coll", "nbytes", "topo", "algorithm", "proto", "opts")}


def test_auto_is_the_engine_where_it_fits():
    # a small cluster: auto runs the engine and gives its answer, float for float
    for args in (("all_reduce", 1 << 20, "dgx-h100:nodes=2"), ("all_gather", 1 << 24, "ring:n=16", "ring", "ideal")):
        a, e = sim.simulate(*args), sim.simulate(*args, model="engine")
        assert a.model == "engine" and a.time_us == e.time_us and a.algorithm == e.algorithm
        assert a.explain["model_choice"].startswith("engine")


def test_auto_switches_to_flow_when_the_engine_would_not_fit():
    # 4096-rank ring: 33.5 M ops to build (about 1.5 GB) over a 1 GB budget: the flow model, the same closed form
    r = sim.simulate("all_reduce", 1 << 30, "ring:n=4096,bandwidth_GBps=100,latency_us=1", "ring", "ideal",
                     max_memory="1G")
    n = 4096
    assert r.model == "flow" and "engine would need" in r.explain["model_choice"]
    assert r.time_us == pytest.approx(2 * (n - 1) * (1 + 2**30 / n / 100e3), rel=1e-9)


def test_engine_refuses_over_the_memory_budget_with_the_estimate_and_the_options():
    with pytest.raises(CollsimError, match=r"needs about .* more than --max-memory .*--model flow"):
        sim.simulate("all_reduce", 1 << 30, "ring:n=2048", "ring", "ideal", model="engine", max_memory="100M")


def test_estimate_matches_the_measured_16384_rank_ring():
    # issue 14 measured `collsim simulate -t ring:n=16384 -a ring -p ideal` at 21.5 GB peak (symmetric run)
    topo = load_topology("ring:n=64")   # the estimate only reads nranks and the symmetry flag
    est = engine_estimate("ring", "all_reduce", type("T", (), {"nranks": 16384, "hardware": topo.hardware, "nhosts": 16384})(),
                          1, 1, nccl=False)
    assert est.program_ops == 16384 * 2 * 16383 and est.simulated_ops == 2 * 16383
    assert 0.8 * 21.5e9 < est.bytes < 1.25 * 21.5e9


@pytest.mark.parametrize("text, value", [("2G", 2_000_000_000), ("512M", 512_000_000), ("1.5GB", 1_500_000_000),
                                         ("4GiB", 4_000_000_000), (1000, 1000)])
def test_memory_sizes(text, value):
    assert parse_memory(text) == value


@pytest.mark.parametrize("bad", ["lots", "-1G", "0", "nanG"])
def test_bad_memory_sizes_are_refused(bad):
    with pytest.raises(CollsimError, match="--max-memory"):
        parse_memory(bad)


def test_cli_rows_say_which_model_ran(cli):
    code, out, _ = cli("simulate", "-t", "ring:n=8", "-a", "ring", "-p", "ideal", "-b", "1K", "-e", "1M", "-f", "32",
                       "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert {row["model"] for row in payload["results"]} == {"engine"} and payload["model"] == "auto"
    code, out, _ = cli("simulate", "-t", "ring:n=8", "-a", "ring", "-p", "ideal", "-b", "1M", "-e", "1M")
    assert "# model auto: engine for 1 of 1 run(s)" in out


def test_cli_refuses_a_run_over_the_budget_in_one_line(cli):
    code, _, err = cli("simulate", "-t", "ring:n=2048", "-a", "ring", "-p", "ideal", "-b", "1G", "-e", "1G",
                       "--model", "engine", "--max-memory", "50M")
    assert code == 2 and err.count("\n") <= 1 and "--max-memory" in err and "Traceback" not in err
    code, _, err = cli("simulate", "-t", "ring:n=8", "--max-memory", "plenty")
    assert code == 2 and "--max-memory" in err


def test_verify_refuses_a_huge_world_before_building_it(cli):
    code, _, err = cli("verify", "ring", "-c", "all_reduce", "--ranks", "200000")
    assert code == 2 and "ranks" in err and "Traceback" not in err


@pytest.mark.slow
def test_sixteen_thousand_gpus_default_model_times_what_nccl_picks(cli):
    code, out, _ = cli("simulate", "--topology", "dgx-h100:nodes=2048", "-b", "1G", "-e", "1G", "--format", "json")
    assert code == 0
    row = json.loads(out)["results"][0]
    tuned = sim.simulate("all_reduce", 1 << 30, "dgx-h100:nodes=2048", model="tuner")
    assert row["model"] == "flow" and row["algorithm"] == tuned.algorithm == "nvls_tree"
    # NVLSTree cannot beat NVLink SHARP inside a node: busbw below the tuner's nvls bound of NVLink (450 GB/s)
    assert 150 < row["busbw_GBps"] < 450
