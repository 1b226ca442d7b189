"""The #wrong check: test data reduce exactly, and a wrong element is counted as exactly one."""
import pytest

torch = pytest.importorskip("torch", reason="the real/ package needs torch (pip install torch==2.13.0)")

from real.measure import torch_collectives as C  # noqa: E402
from real.measure.options import DTYPES, layout  # noqa: E402


def _inputs(coll, lay, op, dname, n, root):
    """Each rank's send buffer after fill_inputs (out of place)."""
    out = []
    for r in range(n):
        send = torch.zeros(max(lay.send, lay.recv), dtype=C.torch_dtype(dname))
        recv = torch.zeros_like(send)
        C.fill_inputs(coll, lay, send, recv, op, dname, root, r, n, inplace=False)
        out.append(recv[:lay.send].clone() if coll in C.IN_PLACE_ONLY else send[:lay.send].clone())
    return out


REDUCE = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "max": torch.maximum, "min": torch.minimum}


@pytest.mark.parametrize("dname", ["int8", "uint8", "int32", "int64", "half", "float", "double", "bfloat16", "f8e4m3"])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_reductions_are_exact_in_every_type(dname, op, n):
    """Reducing the test data in the element type itself, in any order, gives the exact answer."""
    lay = layout("all_reduce", 4096, DTYPES[dname].nbytes, n)
    ins = _inputs("all_reduce", lay, op, dname, n, 0)
    fwd, bwd = ins[0].clone(), ins[-1].clone()
    for i in range(1, n):
        if dname == "f8e4m3":  # torch has no float8 arithmetic; float32 holds float8 values exactly
            fwd = REDUCE[op](fwd.float(), ins[i].float()).to(fwd.dtype)
            bwd = REDUCE[op](bwd.float(), ins[n - 1 - i].float()).to(bwd.dtype)
        else:
            fwd, bwd = REDUCE[op](fwd, ins[i]), REDUCE[op](bwd, ins[n - 1 - i])
    assert C.count_wrong("all_reduce", lay, fwd, op, dname, 0, 0, n) == 0
    assert C.count_wrong("all_reduce", lay, bwd, op, dname, 0, 0, n) == 0
    fwd[7] = 0  # test values are never 0
    assert C.count_wrong("all_reduce", lay, fwd, op, dname, 0, 0, n) == 1


def test_avg_tolerates_rounding_but_not_errors():
    n, lay = 3, layout("all_reduce", 4096, 4, 3)
    ins = _inputs("all_reduce", lay, "avg", "float", n, 0)
    premul = sum(x * (1.0 / n) for x in ins)  # NCCL's way: scale each input, then sum
    assert C.count_wrong("all_reduce", lay, premul, "avg", "float", 0, 0, n) == 0
    premul[3] += 1.0
    assert C.count_wrong("all_reduce", lay, premul, "avg", "float", 0, 0, n) == 1


@pytest.mark.parametrize("coll", ["all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce"])
def test_every_collective_has_a_computable_answer(coll):
    """Build each rank's correct output by hand from the inputs; the check must accept it."""
    n, root, dname = 3, 1, "float"
    lay = layout(coll, 1024, 4, n)
    ins, k = _inputs(coll, lay, "sum", dname, n, root), lay.count
    for r in range(n):
        if coll == "all_gather":
            want = torch.cat(ins)
        elif coll == "reduce_scatter":
            want = sum(ins)[r * k:(r + 1) * k]
        elif coll == "all_to_all":
            want = torch.cat([ins[s][r * k:(r + 1) * k] for s in range(n)])
        elif coll == "broadcast":
            want = ins[root]
        else:
            want = sum(ins) if r == root else torch.zeros(k)
        assert C.count_wrong(coll, lay, want, "sum", dname, root, r, n) == 0, (coll, r)
        if coll != "reduce" or r == root:
            bad = want.clone()
            bad[-1] += 1
            assert C.count_wrong(coll, lay, bad, "sum", dname, root, r, n) == 1
