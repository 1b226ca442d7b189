"""What the issue pins: DDP all_reduces exactly the gradients, its bucket times are `collsim simulate`'s,
and ZeRO-3/FSDP moves 3 (n-1)/n of the parameter bytes per rank against DDP's 2 (n-1)/n."""
import json

import pytest

from sim.planning import plan_step

H100 = "dgx-h100"
P = 1_000_000_000  # 1e9 bf16 parameters: 2e9 gradient bytes


def workload(strategy="ddp", layers=24, **par):
    return {"model": {"params": P, "layers": layers, "dtype": "bfloat16"},
            "parallelism": {"strategy": strategy, **par}, "compute": {"layer_forward_ms": 5}}


def test_ddp_all_reduces_exactly_the_gradients():
    p = plan_step(workload(bucket_mb=25), H100)
    assert p.layout.world == 8
    assert p.nbytes_by_op == {"all_reduce": 2_000_000_000}
    sizes = [t.nbytes for t in p.collectives]
    # 25 MiB buckets: 76 full ones and the 7,705,600-byte rest
    assert sizes.count(25 << 20) == 76 and len(sizes) == 77 and sizes[-1] == 2_000_000_000 - 76 * (25 << 20)
    assert all(t.ranks == tuple(range(8)) and t.lane == "dp" for t in p.collectives)


def test_ddp_bucket_time_matches_collsim_simulate(cli):
    p = plan_step(workload(bucket_mb=25), H100)
    bucket = next(t for t in p.collectives if t.nbytes == 25 << 20)
    code, out, _ = cli("simulate", "--topology", H100, "--collective", "all_reduce", "-b", str(25 << 20),
                       "-e", str(25 << 20), "--format", "json")
    assert code == 0
    row = json.loads(out)["results"][0]
    assert bucket.duration_us == pytest.approx(row["time_us"], rel=1e-12)
    assert (bucket.cost.algorithm, bucket.cost.protocol) == (row["algorithm"], row["protocol"])
    rest = next(t for t in p.collectives if t.nbytes != 25 << 20)
    code, out, _ = cli("simulate", "-t", H100, "-c", "all_reduce", "-b", str(rest.nbytes), "-e", str(rest.nbytes),
                       "-d", "bfloat16", "--format", "json")
    assert json.loads(out)["results"][0]["time_us"] == pytest.approx(rest.duration_us, rel=1e-12)


def test_torch_default_first_bucket_is_one_mib():
    p = plan_step(workload(), H100)  # no bucket_mb: torch's 1 MiB first bucket, then 25 MiB
    sizes = [t.nbytes for t in p.collectives]
    assert sizes[0] == 1 << 20 and sizes[1] == 25 << 20 and sum(sizes) == 2 * P


@pytest.mark.parametrize("strategy,factor", [("ddp", 2), ("zero1", 2), ("zero2", 2), ("zero3", 3)])
def test_ring_equivalent_volume_per_rank(strategy, factor):
    # 20 layers of 5e7 parameters: 1e8 bytes per layer, a multiple of 8 ranks x 2 bytes, so no padding
    p = plan_step(workload(strategy, layers=20, bucket_mb=25), H100)
    n = 8
    assert p.bus_bytes_per_rank == pytest.approx(factor * (n - 1) / n * 2 * P, rel=1e-12)


def test_fsdp_gathers_twice_and_reduce_scatters_once():
    p = plan_step(workload("fsdp", layers=20), H100)
    assert p.nbytes_by_op == {"all_gather": 4 * P, "reduce_scatter": 2 * P}
    phases = [(t.phase, t.op) for t in p.collectives]
    assert phases.count(("forward", "all_gather")) == 20
    assert phases.count(("backward", "all_gather")) == 20
    assert phases.count(("backward", "reduce_scatter")) == 20
    ddp = plan_step(workload("ddp", layers=20, bucket_mb=25), H100)
    assert p.bus_bytes_per_rank / ddp.bus_bytes_per_rank == pytest.approx(1.5, rel=1e-12)


def test_hsdp_volume_splits_into_shard_and_replica_groups():
    # shard over the 8 GPUs of a server, 4 replicas across servers
    p = plan_step(workload("zero3", layers=20, shard_group=8), "dgx-h100:nodes=4")
    fam = p.bus_bytes_by_family()
    assert fam["shard"] == pytest.approx(3 * 7 / 8 * 2 * P, rel=1e-12)
    assert fam["replicate"] == pytest.approx(2 * 3 / 4 * 2 * P / 8, rel=1e-12)
    assert {t.ranks for t in p.collectives if t.lane == "shard"} == {tuple(range(8))}
    assert {t.ranks for t in p.collectives if t.lane == "replicate"} == {(0, 8, 16, 24)}
    # the shard group stays on NVLink; only the replicas cross the NICs
    assert all(set(t.cost.tier_bytes) == {"nvlink"} for t in p.collectives if t.lane == "shard")
    assert all("nic" in t.cost.tier_bytes and "nvlink" not in t.cost.tier_bytes
               for t in p.collectives if t.lane == "replicate")


def test_model_state_memory_matches_the_zero_paper():
    # ZeRO paper: 2 + 2 + 12 bytes per parameter; stage 3 divides all of it by the shard count
    assert plan_step(workload("ddp", bucket_mb=25), H100).memory_GB["total"] == pytest.approx(16.0)
    assert plan_step(workload("zero1"), H100).memory_GB["total"] == pytest.approx(2 + 2 + 12 / 8)
    assert plan_step(workload("zero2"), H100).memory_GB["total"] == pytest.approx(2 + 2 / 8 + 12 / 8)
    assert plan_step(workload("zero3"), H100).memory_GB["total"] == pytest.approx(16 / 8)
