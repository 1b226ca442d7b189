"""The simulated flight recorder: exact times, PyTorch's record fields, hangs, timeouts, faults."""
import pytest

from sim.errors import CollsimError
from sim.flight.cost import AlphaBeta
from sim.flight.faults import LinkFault, apply_rank_faults, parse_faults
from sim.flight.rank_workload import ddp_step, from_dict, tp_dp_step
from sim.flight.replay import run

AB = AlphaBeta(alpha_us=5.0, bandwidth_GBps=100.0)
FIELDS = {"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
          "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state", "retired", "timeout_ms",
          "time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns", "duration_ms", "is_p2p"}


def faulty(w, raw, **kw):
    f = parse_faults(raw, w.world_size)
    return run(apply_rank_faults(w, f), AB, [x for x in f if isinstance(x, LinkFault)], f, **kw)


def test_healthy_ddp_time_is_the_closed_form():
    # forward 10 ms, two backward slices of 10 ms each followed by an async 1 MiB all_reduce, optimizer 2 ms
    w = ddp_step(world_size=4, buckets=2, bucket_nbytes="1M", steps=1)
    ar = 2 * 3 * 5.0 + 2 * 3 / 4 * (1 << 20) / 1e5
    r = run(w, AB)
    assert r.finished and r.hang_at_us is None and r.timeout is None
    assert r.end_us == pytest.approx(30_000 + ar + 2_000)
    assert [(i.start_us, i.end_us) for i in r.instances] == [(20_000, 20_000 + ar), (30_000, 30_000 + ar)]


def test_records_have_pytorch_fields_and_states():
    r = run(ddp_step(world_size=3, buckets=2, bucket_nbytes="1M", steps=2), AB)
    d = r.dumps()
    assert set(d) == {0, 1, 2}
    assert set(d[0]) >= {"version", "pg_config", "pg_status", "entries"}
    assert d[0]["pg_config"]["0"]["ranks"] == "[0, 1, 2]"  # a string, as PyTorch writes it
    e = d[1]["entries"]
    assert [x["collective_seq_id"] for x in e] == [1, 2, 3, 4] and [x["record_id"] for x in e] == [0, 1, 2, 3]
    assert all(FIELDS <= set(x) for x in e)
    assert {x["state"] for x in e} == {"completed"} and e[0]["profiling_name"] == "nccl:all_reduce"
    assert e[0]["input_sizes"] == [[1 << 18]] and e[0]["input_dtypes"] == ["Float"]
    assert e[0]["time_created_ns"] <= e[0]["time_discovered_started_ns"] <= e[0]["time_discovered_completed_ns"]
    assert d[1]["pg_status"]["0"] == {"last_enqueued_collective": 4, "last_started_collective": 4,
                                      "last_completed_collective": 4}


def test_skip_hangs_then_times_out_from_creation_time():
    w = ddp_step(world_size=4, buckets=3, bucket_nbytes="4M", steps=2)
    r = faulty(w, [{"kind": "skip", "rank": 2, "call": 1}], timeout_ms=1_000)
    assert not r.finished and r.hang_at_us is not None
    pending = [e for e in r.entries[0] if e["state"] != "completed"]
    assert [e["collective_seq_id"] for e in pending] == [6]
    assert r.timeout["seq"] == 6 and r.timeout["at_us"] == pytest.approx(pending[0]["time_created_ns"] / 1e3 + 1e6)
    assert len(r.entries[2]) == 5 and all(e["state"] == "completed" for e in r.entries[2])


def test_straggler_delays_the_step_by_its_delay():
    w = ddp_step(world_size=4, buckets=2, bucket_nbytes="1M", steps=1)
    base = run(w, AB).end_us
    r = faulty(w, [{"kind": "straggler", "rank": 1, "call": 1, "delay_us": 5_000}])
    assert r.finished and r.end_us == pytest.approx(base + 5_000)


def test_crash_leaves_no_dump_and_others_hang():
    r = faulty(ddp_step(world_size=4, buckets=2, bucket_nbytes="1M", steps=2), [{"kind": "crash", "rank": 3, "at_us": 25_000}])
    assert r.crashed == {3: 25_000} and 3 not in r.dumps() and r.hang_at_us is not None


def test_dtype_with_equal_bytes_completes_but_differing_bytes_hang():
    w = ddp_step(world_size=3, buckets=2, bucket_nbytes="1M", steps=1)
    assert faulty(w, [{"kind": "dtype", "rank": 0, "call": 0, "dtype": "int32"}]).finished
    assert not faulty(w, [{"kind": "dtype", "rank": 0, "call": 0, "dtype": "bfloat16"}]).finished


def test_degraded_link_stretches_only_the_bandwidth_term_of_groups_using_it():
    w = tp_dp_step(world_size=4, tp=2, layers=1, activation_nbytes="8M", steps=1)
    r = faulty(w, [{"kind": "degraded_link", "ranks": [2, 3], "bandwidth_fraction": 0.25}])
    dur = {(i.pg, i.seq): i.end_us - i.start_us for i in r.instances}
    lat, full = AB("all_reduce", 0, 2), AB("all_reduce", 8 << 20, 2)
    assert dur[("1", 1)] == pytest.approx(full)  # tp group {0, 1}
    assert dur[("2", 1)] == pytest.approx(lat + 4 * (full - lat))  # tp group {2, 3} crosses the link


def test_link_down_hangs_without_route_and_slows_with_one():
    w = tp_dp_step(world_size=4, tp=2, layers=2, steps=1)
    down = faulty(w, [{"kind": "link_down", "ranks": [2, 3], "at_us": 0}])
    assert not down.finished and any("down with no other route" in i.stuck for i in down.instances)
    rer = faulty(w, [{"kind": "link_down", "ranks": [2, 3], "reroute": True, "reroute_bandwidth_fraction": 0.5}])
    assert rer.finished and rer.end_us > run(w, AB).end_us


def test_link_change_mid_collective_keeps_the_work_done():
    w = from_dict({"world_size": 2, "program": [{"all_reduce": "100M"}, "wait"]})
    full = AB("all_reduce", 100 << 20, 2)
    r = faulty(w, [{"kind": "degraded_link", "ranks": [0, 1], "bandwidth_fraction": 0.5, "at_us": full / 2}])
    lat = AB("all_reduce", 0, 2)
    # half the (uniformly spread) work at full speed, the other half with the bandwidth part doubled
    assert r.end_us == pytest.approx(full / 2 + (lat + 2 * (full - lat)) / 2)


def test_bad_input_is_a_clear_error():
    with pytest.raises(CollsimError, match="split over 3 ranks"):
        run(from_dict({"world_size": 3, "program": [{"all_gather": 1024, "dtype": "float32"}]}))
    with pytest.raises(CollsimError, match="call must be in"):
        apply_rank_faults(ddp_step(world_size=2, steps=1), parse_faults([{"kind": "skip", "rank": 0, "call": 9}]))
    with pytest.raises(CollsimError, match="ranks are 0..1"):
        parse_faults([{"kind": "crash", "rank": 5, "at_us": 1}], world_size=2)
    with pytest.raises(CollsimError, match="unknown collective"):
        from_dict({"world_size": 2, "program": [{"collective": "allreduce", "nbytes": 8}]})
