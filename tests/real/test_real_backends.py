"""What real.measure.backends says about gloo is what torch 2.x's gloo does (if torch changes, this fails first)."""
import pytest
from realutil import spawn_gloo

torch = pytest.importorskip("torch", reason="needs torch (pip install torch==2.13.0)")


def _probe(rank, n):
    import torch.distributed as dist
    out = {}

    def tries(name, fn):
        try:
            fn()
            out[name] = True
        except RuntimeError:
            out[name] = False
    tries("avg_float", lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.AVG))
    tries("avg_int", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.AVG))
    tries("uint32", lambda: dist.all_reduce(torch.ones(4, dtype=torch.uint32)))
    tries("f8e4m3", lambda: dist.all_reduce(torch.ones(4, dtype=torch.float8_e4m3fn)))
    tries("bfloat16", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bfloat16)))
    rs = torch.empty(4)
    tries("reduce_scatter", lambda: dist.reduce_scatter_single(rs, torch.arange(4.0 * n)))
    out["reduce_scatter_value"] = rs.tolist()
    return out


def test_gloo_capabilities_match_the_notes():
    from real.measure.backends import GLOO_UNSUPPORTED
    for rank, got in enumerate(spawn_gloo(_probe, 2)):
        assert got["avg_float"] and not got["avg_int"]
        assert not got["uint32"] and not got["f8e4m3"] and got["bfloat16"]
        assert {"uint32", "f8e4m3"} <= set(GLOO_UNSUPPORTED)
        assert got["reduce_scatter"] and got["reduce_scatter_value"] == [2.0 * (4 * rank + i) for i in range(4)]


def test_notes_say_what_gloo_does_differently():
    from real.measure.backends import notes_for
    text = " ".join(notes_for("gloo", "reduce_scatter", "torch"))
    assert "CPU over TCP" in text and "host-side" in text and "all-reduces the whole input" in text
    assert not any("reduce_scatter" in n for n in notes_for("gloo", "reduce_scatter", "program:ring"))
    assert any("CUDA events" in n for n in notes_for("nccl", "all_reduce", "torch"))
