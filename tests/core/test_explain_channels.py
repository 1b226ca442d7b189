"""--explain agrees with itself: NCCL's channels as NCCL runs them, and the term behind a difference."""
import re
import subprocess
import sys

import pytest

import sim
from sim.nccl.explain import difference_lines, nccl_runtime_channels
from sim.presets import load_topology


def _explain(*args):
    p = subprocess.run([sys.executable, "-m", "sim", "simulate", *args, "--explain"], capture_output=True, text=True, check=False,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_ring_on_one_dgx_h100_runs_24_channels():
    # H100: 18 NVLinks x 20.6 GB/s (NCCL's SM90 NVLink speed) = 371 GB/s; NCCL's search takes the fastest
    # listed speed that fits one GPU pair, 30 GB/s, so 12 rings; NCCL runs twice its search channels
    # ("execution channels are typically 2x the search channels", NVIDIA/nccl#1041; connect.cc): 24
    out = _explain("-t", "dgx-h100", "-a", "ring", "-b", "64M", "-e", "64M")
    found = [int(a or b) for a, b in re.findall(r"(\d+)\s+channels|channels[:= ]+(\d+)", out)]
    assert max(found) == 24
    assert "aggregates them into 1 flow" in out


def test_nvls_runs_nvls_nchannels():
    # NVLS channels are NVLS_NCHANNELS (16 on Hopper), not 2x the search (NVIDIA/nccl#1041)
    assert nccl_runtime_channels(load_topology("dgx-h100"), "nvls")[0] == 16


def test_textbook_algorithms_have_no_nccl_channels():
    assert nccl_runtime_channels(load_topology("dgx-h100:nodes=2"), "recursive_hd") is None


def test_a_difference_over_15_percent_is_named_with_terms_that_add_up():
    r = sim.simulate("all_reduce", 64 << 20, "dgx-h100", "nvls", "Simple", model="engine")
    lines = difference_lines(r, load_topology("dgx-h100"))
    assert abs(r.time_us / r.explain["tuner_time_us"] - 1) > 0.15 and len(lines) == 1
    terms = {k.strip(): float(v) for k, v in re.findall(r"([a-z ,]+) ([+-][\d.]+) us", lines[0].split("Terms:")[1])}
    assert sum(terms.values()) == pytest.approx(r.time_us - r.explain["tuner_time_us"], abs=0.5)
    assert "mostly pipeline fill and contention" in lines[0]


def test_no_difference_line_when_engine_and_tuner_agree():
    r = sim.simulate("all_reduce", 64 << 20, "dgx-h100", "ring", "Simple", model="engine")
    assert abs(r.time_us / r.explain["tuner_time_us"] - 1) < 0.15
    assert difference_lines(r, load_topology("dgx-h100")) == []
