"""compare/calibrate warn in one line when the measurement's backend or device does not match the topology."""
import json
import subprocess
import sys

import pytest

from real.compare.measured import Measurement
from real.compare.mismatch import mismatch, mixed
from sim.presets import load_topology


def _m(backend, env=None, source="x.json"):
    return Measurement(source, "collsim-json", "all_reduce", 2, (), backend, "", env or {})


@pytest.mark.parametrize("backend, env, spec, warns", [
    ("gloo", {"cuda_available": False, "gpus": []}, "dgx-h100:gpus_per_node=2", True),   # CPU gloo vs a GPU preset
    ("gloo", {"cuda_available": True, "gpus": ["NVIDIA H100"]}, "dgx-h100:gpus_per_node=2", True),  # gloo, not NCCL
    ("nccl", {}, "dgx-h100:gpus_per_node=2", False),                                    # NCCL on GPUs: a match
    ("gloo", {"cuda_available": False}, "ring:n=2", False),                              # a textbook topology: no claim
    (None, {}, "dgx-h100:gpus_per_node=2", False),                                       # unknown backend: no claim
])
def test_mismatch(backend, env, spec, warns):
    w = mismatch(_m(backend, env), load_topology(spec))
    assert (w is not None) == warns
    if w:
        assert "\n" not in w and backend in w and "different systems" in w


def test_mixed_backends_in_one_calibration():
    assert mixed([_m("gloo", {"cuda_available": False}), _m("nccl")]) is not None
    assert mixed([_m("gloo", {"cuda_available": False}), _m("gloo", {"cuda_available": False})]) is None


def test_compare_cli_warns_on_stderr(tmp_path):
    doc = {"topology": "local:gloo:2", "collective": "all_reduce", "nranks": 2, "backend": "gloo",
           "env": {"cuda_available": False, "gpus": []},
           "results": [{"nbytes": 4096, "count": 1024, "type": "float", "time_us": 100.0, "algbw_GBps": 0.04,
                        "busbw_GBps": 0.04, "wrong": 0}]}
    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(doc))
    p = subprocess.run([sys.executable, "-m", "sim", "compare", "--measured", str(path), "--topology", "dgx-h100:gpus_per_node=2"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stderr.splitlines() if "gloo" in l]
    assert len(lines) == 1 and lines[0].startswith("warning:")
