"""The streams: what overlaps with what, checked against closed forms built from the plan's own
collective times (the stream model is under test here, not the collective model)."""
import pytest

from sim.planning import plan_step
from sim.planning.schedule import Task, buckets, run_streams

FLAT = "switch:n=4,bandwidth_GBps=100,kind=nvlink"
LAYER_PARAMS = 13_107_200  # bf16: exactly 25 MiB of gradients per layer


def plan(strategy="ddp", layers=4, fwd_ms=50.0, bwd_ms=None, topo=FLAT, **par):
    comp = {"layer_forward_ms": fwd_ms}
    if bwd_ms is not None:
        comp["layer_backward_ms"] = bwd_ms
    return plan_step({"model": {"params": LAYER_PARAMS * layers, "layers": layers, "dtype": "bfloat16"},
                      "parallelism": {"strategy": strategy, **par}, "compute": comp}, topo)


def test_streams_wait_for_lane_and_dependencies():
    tasks = [Task(0, "compute", "compute", "a", "forward", 10.0),
             Task(1, "comm", "dp", "x", "backward", 4.0, ((0, "start"),)),
             Task(2, "comm", "dp", "y", "backward", 4.0, ((0, "end"),)),
             Task(3, "compute", "compute", "b", "backward", 1.0, ((1, "end"),))]
    assert run_streams(tasks) == ((0.0, 10.0), (0.0, 4.0), (10.0, 14.0), (10.0, 11.0))


def test_buckets_fill_in_reverse_layer_order():
    assert buckets([10, 10, 10, 10], 15, 15, 1) == [(15, 2), (15, 1), (10, 0)]
    assert sum(n for n, _ in buckets([7] * 9, 4, 10, 1)) == 63


def test_ddp_hides_all_but_the_last_bucket_when_compute_is_long():
    p = plan("ddp", bucket_mb=25)
    t = [c.duration_us for c in p.collectives]
    assert len(t) == 4 and len(set(t)) == 1  # one bucket per layer, ready after each layer's backward
    assert p.compute_us == pytest.approx(4 * (50e3 + 100e3))
    assert p.exposed_comm_us == pytest.approx(t[0], rel=1e-9)
    assert p.step_us == pytest.approx(p.compute_us + t[0], rel=1e-12)


def test_ddp_without_compute_is_all_communication():
    p = plan("ddp", fwd_ms=0.0, bucket_mb=25)
    assert p.step_us == pytest.approx(p.comm_us, rel=1e-12)
    assert p.exposed_comm_us == pytest.approx(p.comm_us, rel=1e-12)


def test_fsdp_prefetch_hides_all_gathers_but_the_first_of_each_pass():
    p = plan("fsdp", prefetch=True)
    ag = next(c.duration_us for c in p.collectives if c.op == "all_gather")
    rs = next(c.duration_us for c in p.collectives if c.op == "reduce_scatter")
    # exposed: the first forward gather, the first backward gather, the last reduce_scatter
    assert p.exposed_comm_us == pytest.approx(2 * ag + rs, rel=1e-9)


def test_fsdp_without_prefetch_waits_for_every_gather():
    p = plan("fsdp", prefetch=False)
    ag = next(c.duration_us for c in p.collectives if c.op == "all_gather")
    rs = next(c.duration_us for c in p.collectives if c.op == "reduce_scatter")
    assert p.exposed_comm_us == pytest.approx(2 * 4 * ag + rs, rel=1e-9)


def test_prefetched_gather_starts_with_the_previous_layer():
    p = plan("fsdp", prefetch=True)
    by_name = {t.name: s for t, (s, _) in zip(p.tasks, p.times)}
    assert by_name["forward all_gather L1 mb0"] == pytest.approx(by_name["forward L0 mb0"])


def test_zero1_all_gather_after_the_optimizer_is_exposed():
    p = plan("zero1", bucket_mb=25)
    ag = sum(c.duration_us for c in p.collectives if c.phase == "after optimizer")
    rs_last = [c.duration_us for c in p.collectives if c.op == "reduce_scatter"][-1]
    assert p.exposed_comm_us == pytest.approx(ag + rs_last, rel=1e-9)


def test_tensor_parallel_all_reduces_block_every_layer():
    w = {"model": {"params": "1B", "layers": 4, "hidden": 2048},
         "parallelism": {"strategy": "ddp", "tp": 4}, "compute": {"layer_forward_ms": 10, "tokens_per_step": 65536}}
    p = plan_step(w, "switch:n=8,bandwidth_GBps=100,kind=nvlink")
    tp = [c for c in p.collectives if c.lane == "tp"]
    assert len(tp) == 4 * 4  # two per layer forward, two per layer backward
    assert {c.ranks for c in tp} == {(0, 1, 2, 3)}
    # activations: 65536 tokens / dp 2 x 2048 hidden x 2 bytes
    assert {c.nbytes for c in tp} == {65536 // 2 * 2048 * 2}
    # nothing overlaps a blocking all_reduce, so all of them are exposed
    assert p.exposed_comm_us >= sum(c.duration_us for c in tp) - 1e-6


def test_pipeline_bubble_is_pp_minus_one_microbatch_slots():
    w = {"model": {"params": "1B", "layers": 8, "hidden": 1024},
         "parallelism": {"strategy": "ddp", "pp": 2, "microbatches": 4},
         "compute": {"layer_forward_ms": 1, "tokens_per_step": 32768}}
    p = plan_step(w, "switch:n=4,bandwidth_GBps=100,kind=nvlink")
    p2p = next(c.duration_us for c in p.collectives if c.lane == "pp")
    # 4 layers per stage, 1 ms forward and 2 ms backward each, per microbatch
    assert p.bubble_us == pytest.approx((2 - 1) * (4 * 1e3 + 4 * 2e3 + 2 * p2p), rel=1e-12)
    assert p.compute_us == pytest.approx(4 * 4 * 3e3)
    assert sum(1 for c in p.collectives if c.lane == "pp") == 2 * 4


def test_compute_from_throughput_is_six_p_t_over_peak_times_mfu():
    w = {"model": {"params": "1B", "layers": 24}, "compute": {"tokens_per_step": 524288, "mfu": 0.4}}
    p = plan_step(w, "dgx-h100")  # meta gpu H100-SXM: 989 dense bf16 TFLOP/s
    assert p.compute_us == pytest.approx(6 * 1e9 * 524288 / 8 / (989e12 * 0.4) * 1e6, rel=1e-9)


def test_gpu_hours_and_comm_share():
    p = plan("ddp", bucket_mb=25)
    g = p.gpu_hours(1000)
    total = 1000 * p.step_us + p.init_broadcast["time_us"]
    assert g["gpu_hours"] == pytest.approx(4 * total / 3.6e9)
    assert g["comm_share"] == pytest.approx((1000 * p.exposed_comm_us + p.init_broadcast["time_us"]) / total)


def test_initial_broadcast_uses_250_mib_buckets():
    p = plan_step({"model": {"params": "1B", "layers": 24}, "compute": {"layer_forward_ms": 1}}, "dgx-h100")
    ib = p.init_broadcast
    assert ib["nbytes"] == 2 * 10 ** 9 and ib["buckets"] == 8  # ceil(2e9 / 262144000)
    import sim
    full = sim.simulate("broadcast", 250 << 20, "dgx-h100")
    rest = sim.simulate("broadcast", 2 * 10 ** 9 - 7 * (250 << 20), "dgx-h100").time_us
    # back to back on one stream: the first bucket is one whole call, the others a period of nccl-tests' loop each
    first = full.explain.get("single_call_us", full.time_us)
    assert first > full.time_us
    assert ib["time_us"] == pytest.approx(first + 6 * full.time_us + rest, rel=1e-12)
