"""The nccl-tests text parser: current and older layouts, prefixes, per-iteration columns, N/A."""
import pytest

from sim.errors import CollsimError
from sim.io.nccl_tests_format import KEYS, parse_nccl_tests, parse_nccl_tests_meta

CURRENT = """# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on     node1 device  0 [0x07] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12346 on     node1 device  1 [0x0b] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    41.23    0.00    0.00      0    40.51    0.00    0.00      0
   134217728      33554432     float     sum      -1   1448.3   92.67   92.67      0   1446.9   92.76   92.76      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 46.3
"""

OLDER = """#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144   float     sum    29.80   35.19   61.58  2e-07    29.50   35.54   62.20  0e+00
"""


def test_current_layout_every_key():
    rows = parse_nccl_tests(CURRENT)
    assert len(rows) == 2
    r = rows[1]
    assert set(KEYS) <= set(r)
    assert (r["nbytes"], r["count"], r["dtype"], r["redop"], r["root"]) == (134217728, 33554432, "float", "sum", -1)
    assert (r["time_us"], r["algbw_GBps"], r["busbw_GBps"], r["wrong"]) == (1448.3, 92.67, 92.67, 0)
    assert (r["inplace_time_us"], r["inplace_algbw_GBps"], r["inplace_busbw_GBps"], r["inplace_wrong"]) == (1446.9, 92.76, 92.76, 0)
    assert isinstance(r["wrong"], int)


def test_older_layout_error_column_and_no_root():
    (r,) = parse_nccl_tests(OLDER)
    assert r["root"] is None
    assert r["wrong"] == pytest.approx(2e-7) and r["inplace_wrong"] == 0.0
    assert (r["time_us"], r["busbw_GBps"], r["inplace_busbw_GBps"]) == (29.80, 61.58, 62.20)


def test_mpi_prefix_and_not_available():
    text = "\n".join("[1,0]<stdout>:" + line for line in CURRENT.splitlines()).replace("40.51    0.00    0.00      0", "40.51    0.00    0.00    N/A")
    rows = parse_nccl_tests(text)
    assert [r["nbytes"] for r in rows] == [8, 134217728]
    assert rows[0]["inplace_wrong"] is None and rows[0]["wrong"] == 0


def test_per_iteration_statistics_keep_their_names():
    text = ("#  size count type redop root time algbw busbw #wrong i_min i_max i_p99 i_cv% time algbw busbw #wrong i_min i_max i_p99 i_cv%\n"
            "   1024   256 float  sum  -1  10.0  0.10  0.18    0   9.0  11.0  10.9  1.2  10.1  0.10  0.18    0  9.1 11.2 11.0 1.3\n")
    (r,) = parse_nccl_tests(text)
    assert (r["time_us"], r["i_p99"], r["inplace_time_us"], r["inplace_i_p99"]) == (10.0, 10.9, 10.1, 11.0)


def test_headerless_rows_by_field_count():
    rows = parse_nccl_tests("  1024  256  float sum -1  10.0 0.10 0.18 0 10.1 0.10 0.18 0\n"
                            "  2048  512  float sum  12.0 0.17 0.30 0e+00 12.5 0.16 0.29 0e+00\n")
    assert [(r["nbytes"], r["root"], r["time_us"]) for r in rows] == [(1024, -1, 10.0), (2048, None, 12.0)]


def test_meta_and_no_rows():
    meta = parse_nccl_tests_meta("# Collective test starting: reduce_scatter_perf\n" + CURRENT + "# NCCL version 2.21.5+cuda12.4\n")
    assert meta == {"collective": "reduce_scatter", "nranks": 2, "nccl_version": "2.21.5", "avg_busbw_GBps": 46.3,
                    "gpus_per_process": 1}
    # the launch mode from the banner nccl-tests prints first (-g 8: one thread driving 8 GPUs)
    assert parse_nccl_tests_meta("# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor)\n")["gpus_per_process"] == 8
    with pytest.raises(CollsimError, match="no nccl-tests result rows"):
        parse_nccl_tests("# nothing here\nhello world\n")
