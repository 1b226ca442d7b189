"""The flow model's rings while NCCL runs fewer channels than it has (a small message for its channel count).

NCCL drops channels while a message is under channels x threads x THREAD_THRESHOLD bytes, times the ranks
for ring LL (enqueue.cc, tuning.cc ``threadThresholds[RING][LL] *= nRanks``): on 2,048 ranks every LL ring
below 64 MiB runs on fewer than its 8 channels, each channel carrying the same 4 KiB per step. Expected
values come from outside the flow model: the engine where it runs, and a physical law (one call of more
bytes, on channels that each carry no fewer bytes, never takes less time).
"""
import pytest

import sim


@pytest.mark.parametrize("coll", ["broadcast", "reduce"])
def test_one_call_alone_never_gets_shorter_as_the_size_grows(coll):
    # 64 nodes, ring LL: NCCL runs 1, 2, 4, 8 channels from 2 to 16 MiB, each carrying 2 MiB; one call alone
    # (the chain's fill and drain) fell from 47.6 to 8.1 ms as the size grew 8x
    calls = [sim.simulate(coll, s << 20, "dgx-h100:nodes=64", "ring", "LL", model="flow").explain["single_call_us"]
             for s in (1, 2, 4, 8, 16, 32)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(calls, calls[1:])), calls


@pytest.mark.parametrize("coll", ["broadcast", "reduce"])
def test_the_engines_one_call_alone_never_gets_shorter_as_the_size_grows(coll):
    # 16 nodes, ring LL: NCCL runs 1, 2, 4, 8 channels from 512 KiB to 4 MiB. The engine folded the unused
    # channels into a slower rate on all of them, so one call's fill took 1 / share too long: 3,701 us at
    # 512 KiB, 1,156 at 4 MiB
    calls = [sim.simulate(coll, s << 10, "dgx-h100:nodes=16", "ring", "LL", model="engine").explain["single_call_us"]
             for s in (256, 512, 1024, 2048, 4096, 8192)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(calls, calls[1:])), calls
    periods = [sim.simulate(coll, s << 10, "dgx-h100:nodes=16", "ring", "LL", model="engine") for s in (256, 4096)]
    assert all(r.explain["single_call_us"] >= r.time_us for r in periods)


def test_one_call_alone_costs_at_least_the_period():
    for s in (1, 4, 32):
        r = sim.simulate("broadcast", s << 20, "dgx-h100:nodes=64", "ring", "LL", model="flow")
        assert r.explain["single_call_us"] >= r.time_us


@pytest.mark.slow
@pytest.mark.parametrize("coll", ["all_gather", "broadcast"])
def test_the_period_follows_the_engine_while_nccl_adds_channels(coll):
    # 16 nodes, ring LL: 1 to 8 channels from 512 KiB to 4 MiB. The time stays flat there in both models (each
    # channel carries the same bytes); the flow model must be the engine's, size by size
    for size in (512 << 10, 1 << 20, 4 << 20, 8 << 20):
        e, f = (sim.simulate(coll, size, "dgx-h100:nodes=16", "ring", "LL", model=m) for m in ("engine", "flow"))
        assert f.time_us == pytest.approx(e.time_us, rel=1e-6), size
