"""nccl-tests' size conventions and the flag checks that run before any process starts."""
import pytest

from real.measure.options import BenchOptions, check_sweep, layout, nccl_env, parse_dtypes, parse_impl, parse_ops, sweep_sizes
from sim.errors import CollsimError


@pytest.mark.parametrize("coll,nbytes,elt,n,count,send,recv,size", [
    ("all_reduce", 1024, 4, 3, 256, 256, 256, 1024),
    ("broadcast", 1000, 8, 4, 125, 125, 125, 1000),
    # per-rank shard = size/n rounded down to 16 bytes: 1024/3 floats = 85 -> 84
    ("all_gather", 1024, 4, 3, 84, 84, 252, 1008),
    ("reduce_scatter", 1024, 4, 3, 84, 252, 84, 1008),
    ("all_to_all", 1024, 4, 3, 84, 252, 252, 1008),
    # 1-byte types round to 16 elements, 8-byte types to 2
    ("all_gather", 100, 1, 2, 48, 48, 96, 96),
    ("all_to_all", 1 << 20, 8, 8, 16384, 131072, 131072, 1 << 20),
])
def test_layout_matches_nccl_tests(coll, nbytes, elt, n, count, send, recv, size):
    lay = layout(coll, nbytes, elt, n)
    assert (lay.count, lay.send, lay.recv, lay.nbytes) == (count, send, recv, size)


def test_sweeps_follow_nccl_tests_flags():
    assert sweep_sizes("1K", "1M", 4, "1M") == (1024, 4096, 16384, 65536, 262144, 1 << 20)
    assert sweep_sizes("32M", "32M", 0, "1M") == (32 << 20,)            # the defaults: one size
    assert sweep_sizes("1M", "3M", 0, "1M") == (1 << 20, 2 << 20, 3 << 20)  # -i steps when no -f


def test_types_and_ops():
    assert parse_dtypes("float") == ("float",) and parse_dtypes("fp16") == ("half",)
    assert "bfloat16" in parse_dtypes("all") and len(parse_dtypes("all")) == 12
    assert parse_ops("all") == ("sum", "prod", "max", "min", "avg")
    assert parse_impl("program:ring") == "program:ring"
    with pytest.raises(CollsimError, match="unknown data type"):
        parse_dtypes("float128")
    with pytest.raises(CollsimError, match="unknown reduction"):
        parse_ops("xor")
    with pytest.raises(CollsimError, match="unknown --impl"):
        parse_impl("program:")


def test_nccl_knobs_become_variables():
    env = dict(nccl_env("Ring", "LL128", 4))
    assert env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128", "NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"}
    with pytest.raises(CollsimError, match="NCCL_ALGO"):
        nccl_env("Ring; rm -rf /", None, None)


def _opts(**kw):
    base = dict(sizes=(1024,), minbytes=1024, maxbytes=1024, nprocs=2)
    base.update(kw)
    return BenchOptions(**base)


@pytest.mark.parametrize("kw,message", [
    (dict(sizes=(2,), minbytes=2, maxbytes=2), "below the 4-byte size of one float"),
    (dict(sizes=(6, 8), minbytes=6, maxbytes=8), "not a multiple of the 4-byte float element"),
    (dict(collective="all_gather", sizes=(32,), minbytes=32, maxbytes=32, nprocs=3), "use -b 48 or more"),
    (dict(collective="reduce", root=2), "root 2 is not a rank of a 2-rank job"),
    (dict(iters=0), "-n/--iters 0 is below 1"),
    (dict(average=4), "-a/--average 4"),
    (dict(timeout_s=0), "--timeout 0"),
])
def test_bad_sweeps_are_refused_with_the_fix(kw, message):
    with pytest.raises(CollsimError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_sweep(_opts(**kw))


def test_options_survive_the_trip_to_the_ranks():
    opts = _opts(ops=("sum", "max"), nccl_env=(("NCCL_ALGO", "Tree"),))
    assert BenchOptions.from_json(opts.to_json()) == opts
