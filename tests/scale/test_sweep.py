"""Parallel sweeps return what serial ones do, in the same order."""
import json

import pytest

from sim.errors import CollsimError
from sim.prediction import sweep


def test_parallel_equals_serial_in_order():
    tasks = [sweep.Task("all_reduce", s, t, "ring", "ideal") for t in ("ring:n=8", "switch:n=6") for s in (1 << 10, 1 << 24)]
    serial = sweep.run(tasks, jobs=1, progress=False)
    parallel = sweep.run(tasks, jobs=2, progress=False)
    assert [(r.topology, r.nbytes, r.time_us) for r in serial] == [(r.topology, r.nbytes, r.time_us) for r in parallel]
    assert [r.nranks for r in parallel] == [8, 8, 6, 6]


def test_sweep_grid_is_topologies_then_sizes():
    out = sweep.sweep("all_gather", [1 << 12, 1 << 20], ["ring:n=4", "ring:n=5"], "ring", "ideal", jobs=2, progress=False)
    assert [(r.nranks, r.nbytes) for r in out] == [(4, 1 << 12), (4, 1 << 20), (5, 1 << 12), (5, 1 << 20)]
    assert [r.steps for r in out] == [3, 3, 4, 4]


def test_jobs():
    assert sweep.jobs_for(None, 10) == 1 and sweep.jobs_for(1, 10) == 1
    assert sweep.jobs_for(8, 3) == 3            # never more workers than tasks
    assert sweep.jobs_for(0, 1000) >= 1         # every core
    with pytest.raises(CollsimError, match="jobs"):
        sweep.jobs_for(-2, 4)


def test_errors_in_workers_reach_the_caller():
    with pytest.raises(CollsimError, match="unknown topology preset"):
        sweep.run([sweep.Task("all_reduce", 1024, "nosuch:n=4", "ring", "ideal")] * 2, jobs=2, progress=False)


def test_cli_jobs_prints_the_same_json(cli):
    args = ("simulate", "-t", "switch:n=16", "-a", "all", "-p", "ideal", "-b", "1K", "-e", "16M", "-f", "16", "--format", "json")
    code1, out1, _ = cli(*args)
    code2, out2, _ = cli(*args, "--jobs", "2")
    assert code1 == code2 == 0
    serial, parallel = json.loads(out1), json.loads(out2)
    # "stats" says what each run cost (its seconds differ; forked workers reuse the runs made before):
    # every prediction must be the same
    serial.pop("stats"), parallel.pop("stats")
    assert serial == parallel
    assert len(parallel["results"]) >= 3
