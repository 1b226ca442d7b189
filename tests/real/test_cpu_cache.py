"""The gloo host model's cache knee: the private cache read from a /sys tree, the knee's closed form,
and a calibration that recovers a knee-shaped machine (closed form written out by hand below)."""
import os

import pytest

from real.compare.calibrate import calibrate
from real.compare.hostmodel import cache_factor
from real.compare.measured import measurement_from_json
from real.compare.score import compare
from real.measure.cpucache import cache_record, parse_cache_size, private_cache_bytes, read_caches

C, K, BW, T0 = 2 << 20, 4.0, 1.5, 200.0
SIZES = tuple(4096 * 4 ** i for i in range(7))     # 4 KiB .. 16 MiB


def sysfs(tmp_path, entries):
    root = tmp_path / "cache"
    for i, fields in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for k, v in fields.items():
            (d / k).write_text(v + "\n")
    return str(root)


def test_private_cache_from_a_sys_tree_and_strict_sizes(tmp_path):
    root = sysfs(tmp_path, [
        {"level": "1", "type": "Data", "size": "48K", "shared_cpu_list": "0"},
        {"level": "1", "type": "Instruction", "size": "32K", "shared_cpu_list": "0"},
        {"level": "2", "type": "Unified", "size": "2048K", "shared_cpu_list": "0"},
        {"level": "3", "type": "Unified", "size": "105M", "shared_cpu_list": "0-1"},
        {"level": "4", "type": "Unified", "size": "9" * 40, "shared_cpu_list": "0"},      # not a size: ignored
    ])
    caches = read_caches(root)
    assert private_cache_bytes(caches) == (2, 2048 * 1024)          # the L2, not the shared L3
    rec = cache_record(root, measure=False)
    assert rec["private_bytes"] == 2 << 20 and rec["llc_bytes"] == 105 << 20
    assert parse_cache_size("1G") == 1 << 30 and parse_cache_size("-2K") is None and parse_cache_size("") is None
    assert cache_record(str(tmp_path / "absent")) is None
    assert private_cache_bytes(read_caches(sysfs(tmp_path / "b", [
        {"level": "3", "type": "Unified", "size": "32M", "shared_cpu_list": "0-63"}]))) is None


def test_cache_factor_closed_form():
    cache = {"private_bytes": C, "copy_speedup": K}
    # all_reduce works in place: a working set of S. Fits at S <= C: all host work at K times the rate.
    assert cache_factor("all_reduce", C // 2, 2, cache) == pytest.approx(1 / K)
    assert cache_factor("all_reduce", C, 2, cache) == pytest.approx(1 / K)
    # 4C: a quarter fits -> 1 - 0.25 (1 - 1/4) = 0.8125
    assert cache_factor("all_reduce", 4 * C, 2, cache) == pytest.approx(0.8125)
    # all_gather on 2 ranks touches 2.5 S: at S = C, 0.4 fits -> 1 - 0.4 * 0.75 = 0.7
    assert cache_factor("all_gather", C, 2, cache) == pytest.approx(0.7)
    assert cache_factor("broadcast", C, 2, cache) == 1.0                   # not modelled
    assert cache_factor("all_reduce", C, 2, None) == 1.0
    assert cache_factor("all_reduce", C, 2, {"private_bytes": C, "copy_speedup": 0.5}) == 1.0   # nonsense: no knee


def knee(share_bytes, s):
    return 1 - min(1.0, C / share_bytes) * (1 - 1 / K)


def true_us(collective, s):
    """2 ranks, ring: all_gather t0 + S/2B + (S/B) g(2.5 S); all_reduce t0 + S/B + 0.375 (S/B) g(S)."""
    b = BW * 1e3
    if collective == "all_gather":
        return T0 + s / 2 / b + s / b * knee(2.5 * s, s)
    return T0 + s / b + 0.375 * s / b * knee(s, s)


def doc(collective, cache=True):
    rows = [{"nbytes": s, "count": s // 4, "dtype": "float", "redop": "sum", "root": -1, "time_us": true_us(collective, s),
             "inplace_time_us": true_us(collective, s), "wrong": 0, "inplace_wrong": 0} for s in SIZES]
    env = {"cpu_cache": {"level": 2, "private_bytes": C, "copy_speedup": K}} if cache else {}
    return {"topology": "local:gloo:2", "collective": collective, "nranks": 2, "backend": "gloo", "env": env,
            "results": rows}


def test_calibration_with_the_measured_cache_recovers_the_machine_and_predicts_the_knee():
    ag, ar = measurement_from_json(doc("all_gather"), "<ag>"), measurement_from_json(doc("all_reduce"), "<ar>")
    cal = calibrate([ag], bootstrap=0, host_model="torch-gloo-cache")
    assert cal.bandwidth_GBps == pytest.approx(BW, rel=0.01)
    assert cal.launch_us == pytest.approx(T0, rel=0.01)
    assert cal.document["meta"]["calibration"]["host_cache"]["private_bytes"] == C
    held = compare(ar, cal.topology)
    assert held.summary["median_abs_rel_error"] < 0.01
    # the same machine measured without the cache record: the knee is missing and the note says so
    plain = calibrate([measurement_from_json(doc("all_gather", cache=False), "<ag>")], bootstrap=0,
                      host_model="torch-gloo-cache")
    assert any("cache knee" in n for n in plain.notes)
    worst = max(abs(r.rel_error) for r in compare(ar, plain.topology).rows)
    assert worst > 0.05
    # auto (the default) picks the knee when the file records the cache; torch-gloo leaves it out
    assert calibrate([ag], bootstrap=0).host_model == "torch-gloo-cache"
    assert calibrate([measurement_from_json(doc("all_gather", cache=False), "<ag>")], bootstrap=0).host_model == "torch-gloo"
    flat = calibrate([ag], bootstrap=0, host_model="torch-gloo")
    assert flat.document["meta"]["calibration"]["host_cache"] is None


def test_bench_env_records_the_cache_where_sys_has_one():
    if not os.path.isdir("/sys/devices/system/cpu/cpu0/cache"):
        pytest.skip("no /sys/devices/system/cpu/cpu0/cache on this machine: nothing to read")
    rec = cache_record()
    if rec is None:
        pytest.skip("this machine's /sys lists no private data cache")
    assert rec["private_bytes"] >= 16 << 10 and 1.0 <= rec["copy_speedup"] <= 8.0


def test_a_file_cannot_smuggle_a_nonsense_cache_into_the_model():
    from real.compare.hostmodel import cpu_cache_of
    for bad in ({"private_bytes": "2M", "copy_speedup": 4.0}, {"private_bytes": 2 << 20, "copy_speedup": 1e9},
                {"private_bytes": True, "copy_speedup": 4.0}, {"private_bytes": -1, "copy_speedup": 4.0}, "L2"):
        d = doc("all_gather")
        d["env"]["cpu_cache"] = bad
        m = measurement_from_json(d, "<ag>")
        assert cpu_cache_of([m]) is None
        assert calibrate([m], bootstrap=0).host_model == "torch-gloo"      # the flat model, not a guess
