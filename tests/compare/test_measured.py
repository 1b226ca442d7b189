"""Reading measurements: raw nccl-tests text (current and older layouts) and collsim bench JSON."""
import pytest
from compareutil import bench_doc, fixture, write_doc

from real.compare.measured import read_measurement, read_measurement_text
from sim.errors import CollsimError


def _a1():
    """Public case A1 (8x A100 all_reduce): the numbers the fixtures were rendered from, inlined so the
    test does not depend on files outside the repository."""
    sizes = [32768 << i for i in range(20)]
    times = [43.83, 46.8, 51.76, 61.38, 80.4, 101.9, 101.4, 101.5, 133.5, 276.6, 424.0, 684.6, 1327.6, 2420.6,
             4218.4, 8203.9, 16240.0, 32136.0, 64074.0, 127997.0]
    busbw = [1.31, 2.45, 4.43, 7.47, 11.41, 18.0, 36.18, 72.33, 109.93, 106.16, 138.49, 171.54, 176.92, 194.07,
             222.72, 229.04, 231.41, 233.88, 234.61, 234.89]
    return sizes, times, busbw


@pytest.mark.parametrize("name", ["a1_dgx_a100_all_reduce.txt", "a1_dgx_a100_all_reduce_old.txt"])
def test_nccl_tests_text_every_row(name):
    m = read_measurement(fixture(name), collective="all_reduce")
    sizes, times, _ = _a1()
    assert m.kind == "nccl-tests" and m.collective == "all_reduce" and m.nranks == 8 and m.backend == "nccl"
    assert [r.nbytes for r in m.rows] == sizes
    assert [r.time_us for r in m.rows] == times
    assert [r.inplace_time_us for r in m.rows] == times
    assert [r.count for r in m.rows] == [s // 4 for s in sizes]
    assert {r.dtype for r in m.rows} == {"float"} and {r.redop for r in m.rows} == {"sum"}
    assert "A100-SXM4-80GB" in m.label


def test_current_layout_names_its_collective_and_old_one_needs_the_flag():
    assert read_measurement(fixture("a1_dgx_a100_all_reduce.txt")).collective == "all_reduce"
    # the old layout names none: its columns do (busbw/algbw = 2(n-1)/n on every row), as validate and trace read them
    assert read_measurement(fixture("a1_dgx_a100_all_reduce_old.txt")).collective == "all_reduce"
    gather = """#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
     8388608        262144     float    none      -1    100.0   83.89   73.40      0    100.0   83.89   73.40      0
"""   # busbw/algbw = 7/8: all_gather, reduce_scatter or all_to_all; the columns do not say which
    with pytest.raises(CollsimError, match="--collective"):
        read_measurement_text(gather)
    with pytest.raises(CollsimError, match="measures all_reduce, not all_gather"):
        read_measurement(fixture("a1_dgx_a100_all_reduce.txt"), collective="all_gather")


def test_rank_count_from_the_bus_factor_when_no_rank_lines():
    text = """# Collective test starting: all_gather_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
     8388608        262144     float    none      -1    100.0   83.89   73.40      0    100.0   83.89   73.40      0
"""
    assert read_measurement_text(text).nranks == 8          # busbw/algbw = 7/8
    assert read_measurement_text(text, nranks=16).nranks == 16


def test_bench_json(tmp_path):
    times = {4096: 150.0, 65536: 180.0}
    path = write_doc(tmp_path, "ag.json", bench_doc("all_gather", times, {4096: 140.0, 65536: 190.0}))
    m = read_measurement(path)
    assert (m.kind, m.collective, m.nranks, m.backend, m.label) == ("collsim-json", "all_gather", 2, "gloo", "local:gloo:2")
    assert [r.time("best") for r in m.rows] == [140.0, 180.0]
    assert [r.time("out-of-place") for r in m.rows] == [150.0, 180.0]
    assert [r.time("in-place") for r in m.rows] == [140.0, 190.0]


def test_collsim_bench_table_reads_back():
    # the table `collsim bench` prints (nccl-tests' layout) is what the demo saves and reads
    text = """# collsim bench: all_reduce on local:gloo:2, impl torch, timer host, -a 1
# minBytes 4096 maxBytes 16384 step: 4(factor) warmup iters: 2 iters: 5 agg iters: 1 validation: 1
#
# Rank   0 Pid   11 on         host device cpu
# Rank   1 Pid   12 on         host device cpu
#
#                                                   out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)              (us)  (GB/s)  (GB/s)
        4096          1024     float     sum      -1   150.00    0.03    0.03       0   140.00    0.03    0.03       0
       16384          4096     float     sum      -1   160.00    0.10    0.10       0   170.00    0.10    0.10       0
# Out of bounds values : 0 OK
"""
    m = read_measurement_text(text)
    assert (m.collective, m.nranks, m.backend, m.label) == ("all_reduce", 2, "gloo", "local:gloo:2")
    assert [r.time("best") for r in m.rows] == [140.0, 160.0]


@pytest.mark.parametrize("content, match", [
    ("{not json", "not valid JSON"),
    ('{"rows": []}', "needs a 'results' list"),
    ("hello\nworld\n", "no nccl-tests result rows"),
])
def test_bad_files_say_what_is_wrong(tmp_path, content, match):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(CollsimError, match=match):
        read_measurement(str(path))


def test_missing_file():
    with pytest.raises(CollsimError, match="does not exist"):
        read_measurement("/nonexistent/ar.json")


def test_json_rank_count_must_agree(tmp_path):
    path = write_doc(tmp_path, "ar.json", bench_doc("all_reduce", {4096: 100.0}))
    with pytest.raises(CollsimError, match="measured on 2 ranks, not 4"):
        read_measurement(path, nranks=4)
