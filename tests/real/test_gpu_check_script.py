"""scripts/gpu_check.sh runs on the CPU as BACKEND=gloo NGPUS=1: every step, one folder, a summary line."""
import json
import os
import subprocess

import pytest

pytest.importorskip("torch", reason="gpu_check.sh runs collsim bench, which needs torch")
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.mark.slow
def test_gpu_check_on_the_cpu(tmp_path):
    out = tmp_path / "gc"
    env = dict(os.environ, BACKEND="gloo", NGPUS="1", OUT_DIR=str(out), SIZES="-b 1K -e 8K -f 8", ITERS="2",
               GPU_CHECK_PORT="29547")
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_check.sh")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    last = p.stdout.strip().splitlines()[-1]
    # 6 benches + env + the gloo flight dump pass; the CUDA-only steps (and --topology-out) say skipped, never a number
    assert last.startswith("gpu_check: OK: 8 step(s) passed, 0 failed, 3 skipped")
    assert "dump part was skipped: no GPU" in (out / "topology_out.txt").read_text()
    assert (out / "summary.txt").read_text().strip() == last
    for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"):
        rows = json.loads((out / f"bench_{c}.json").read_text())["results"]
        assert [r["nbytes"] for r in rows][:1] == [1024] and all(r["wrong"] == 0 for r in rows)
    assert "skipped (no CUDA GPU" in (out / "nccl_allreduce.txt").read_text()
    assert "GB/s" not in (out / "copy_bw.txt").read_text()
    flight = (out / "flight.txt").read_text()
    assert (out / "flight" / "rank_0").exists() and "ranks read: [0]" in flight
