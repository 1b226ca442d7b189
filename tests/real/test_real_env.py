"""``collsim env`` and the CLI's promise that only bench/env import torch."""
import json
import subprocess
import sys

import pytest


def test_commands_module_does_not_import_torch():
    code = ("import sys, real, real.measure_cli, real.measure.options, real.measure.bench_report, real.measure.launch, real.measure.nccl_ctypes; "
            "from sim.cli import build_parser; build_parser(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_env_text_and_json(cli):
    pytest.importorskip("torch", reason="collsim env reports torch's view of the machine")
    import torch
    code, out, _ = cli("env")
    assert code == 0 and out.startswith("python") and "gloo" in out and "what this means:" in out
    if not torch.cuda.is_available():
        assert "no GPU: collsim bench will use gloo on CPU" in out
    code, out, _ = cli("env", "--format", "json")
    rec = json.loads(out)
    assert rec["torch"] == torch.__version__ and rec["cuda_available"] == torch.cuda.is_available()
    assert "gloo has no version API" in rec["gloo"] and isinstance(rec["nccl_env"], dict)
    assert rec["cpu_count"] >= 1 and rec["hostname"]


def test_gloo_bench_checks_arguments_without_importing_torch():
    """The launcher only validates and starts ranks; importing torch there would cost ~1 s per run."""
    code = ("import sys; from sim.cli import build_parser; from real.measure_cli import build_options; "
            "build_options(build_parser().parse_args(['bench', '--backend', 'gloo', '--impl', 'program:ring'])); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
