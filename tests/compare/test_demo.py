"""``collsim demo``'s real half: the GPU -> preset guess, and (slow) the whole CPU story end to end."""
import os

import pytest

from real.measure.demo_run import _sweep_len, gpu_topology
from sim.presets import load_topology


@pytest.mark.parametrize("name, n, spec", [
    ("NVIDIA A100-SXM4-80GB", 8, "dgx-a100:gpus_per_node=8"),
    ("NVIDIA H100 80GB HBM3", 4, "dgx-h100:gpus_per_node=4"),
    ("NVIDIA H200", 2, "dgx-h200:gpus_per_node=2"),
    ("NVIDIA B200", 8, "dgx-b200:gpus_per_node=8"),
    ("NVIDIA H100 PCIe", 2, "pcie:gpus=2"),
    ("Tesla T4", 2, "pcie:gpus=2"),
])
def test_gpu_topology(name, n, spec):
    assert gpu_topology(name, n) == spec
    assert load_topology(spec).nranks == n


def test_sweep_length():
    assert _sweep_len(("-b", "4K", "-e", "16M", "-f", "4", "-n", "20", "-w", "2")) == 7


@pytest.mark.slow
def test_cpu_demo_end_to_end(tmp_path, capsys):
    pytest.importorskip("torch", reason="the real run needs torch (pip install torch==2.13.0)")
    from real.measure.demo_run import run_real_demo
    assert run_real_demo(nprocs=2, report=str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "Calibrated on all_gather, predicted all_reduce (held out)" in out
    assert "held-out all_reduce, sizes >= 64 KiB: median |error|" in out
    for name in ("report.html", "report.md", "calibrated.yaml", "all_gather.txt", "all_reduce.txt"):
        assert os.path.isfile(tmp_path / name), name
    assert load_topology(str(tmp_path / "calibrated.yaml")).nranks == 2
    html = (tmp_path / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "Calibration" in html
