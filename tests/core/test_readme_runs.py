"""The README runs as written: every ``collsim ...`` line of its bash blocks that needs no GPU runs (short
sizes substituted where a sweep would take long), and what its trailing comment promises appears.

Lines that cannot run here are listed in SKIP with the reason; a README line in neither SKIP nor run
fails the inventory test, so a new line is either run or skipped on purpose.
"""
from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import shlex

import pytest

from sim.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]

# README line (after `collsim `, up to its comment) -> why it does not run here
SKIP = {
    "simulate --topology dgx-h100:nodes=16384 -b 1G -e 1G": "builds 131,072 GPUs (~10 s); benchmarks/run.py --targets-only times it",
    "validate --cross-validate": "refits every constant once per case (minutes); tests/model/test_validate.py runs it",
    "validate": "scores all 42 public cases, some at 1,024-2,160 GPUs (about 4 minutes on 2 cores); "
                "tests/model/test_validate.py scores a subset (and `validate --case`)",
    "validate --cross-validate --by system --write-intervals":
        "refits per system over all 42 cases (tens of minutes) and writes sim/data/residuals.json; "
        "tests/model/test_intervals_crossval.py runs it on a subset into a temporary file",
    "validate my_cluster_all_reduce.txt --topology dgx-a100:nodes=4,fabric=roce": "a file of your own",
    "topo --from-nvidia-smi nvidia_smi_topo.txt:gpu=h100": "a file of your own (tests/ecosystem read public ones)",
    "tune --topology dgx-h100:nodes=2 --out nccl_tuner.conf": "times every NCCL pair at every size (~15 s); tests/tune run it",
    "verify my_allgather.py --timeout 60": "a file of your own (tests/core/test_verify.py runs user files)",
    "env --topology-out me.yaml": "needs a GPU machine (nvidia-smi and NCCL's topology dump)",
    "bench --backend gloo --nprocs 2 --collective all_reduce -b 1K -e 1M -f 4 -n 5 -w 2": "a real measurement (tests/real run gloo benches)",
    "bench --nprocs 8 --collective all_gather -b 8 -e 8G -f 2": "needs 8 GPUs",
    "bench --backend gloo --nprocs 3 --impl program:ring": "a real measurement (tests/real/test_real_executor.py)",
    "bench --backend gloo --nprocs 2 -b 4K -e 16M -f 4 -n 20 --repeat 3": "a real measurement (tests/real/test_real_bench_stats.py)",
    "compare --measured ar.json --topology local.yaml --report report/": "needs your measurement files (tests/compare use fixtures)",
    "compare --measured nccl_tests_output.txt --topology dgx-a100": "needs your nccl-tests output (tests/compare use fixtures)",
    "calibrate ag.json --out local.yaml --holdout ar.json": "needs your measurement files (tests/compare/test_calibrate.py)",
    "calibrate ag.json ar.json --out local.yaml": "needs your measurement files (tests/compare/test_calibrate.py)",
    "calibrate ag.json --out local.yaml --statistic min": "needs your measurement files (tests/compare/test_calibrate.py)",
    "tune --measured ring_ll.json ring_simple.json tree_ll.json --out measured.conf": "needs forced NCCL sweeps from GPUs",
    "flight demo": "starts a gloo job that hangs on purpose (tests/flight/test_flight_real_gloo.py)",
    "flight analyze DUMP_DIR --format json": "needs dumps of your own job",
    "grade notebooks/assignments/a1_ring_reduce_scatter.ipynb": "runs a notebook in a sandbox (minutes; tests/grade)",
    "course release notebooks/solutions --out notebooks/assignments": "rewrites the repository's notebooks (tests/grade)",
    "grade submissions/ --assignment a1 --csv grades.csv --feedback fb/": "needs students' submissions",
    "bench --pairs --backend gloo --nprocs 4 -b 64K -e 64K --plot pairs.png":
        "a real measurement that exits 1 when a pair is slow, as a loaded machine makes them (tests/real/test_real_multinode.py)",
    "trace traces/ --topology dgx-h100": "a real job's profiler traces of your own (tests/evidence read recorded and published ones)",
    "trace nccl.log --format html --out r.html": "an NCCL log of your own (tests/evidence read the published logs)",
    "plan --from-trace traces/ --topology dgx-a100 --vs dgx-h100": "a real job's traces of your own (tests/evidence/test_whatif.py)",
    "demo": "measures this machine (tests/compare/test_demo.py runs its CPU path)",
}

# long sweeps shortened: (pattern, replacement) applied to the arguments
SHORTER = [(r"-e (8G|4G)\b", "-e 64M"), (r"-e 1G -f", "-e 64M -f"), (r"-b 8 -e 64M", "-b 1M -e 64M")]

# README line prefix -> what its trailing comment (or the comment above it) promises, as regexes on stdout
PROMISES = {
    "simulate --topology dgx-h100 -b 64M -e 64M --explain": [r"latency_us", r"NCCL channels: \d+ channels"],
    "simulate --topology ring:n=8,bandwidth_GBps=100,latency_us=1 --algorithm ring --protocol ideal -b 1M -e 1G -f 4 --engine":
        [r"model auto: engine \(reference engine\)"],
    # 14 steps x (1 us + S/8 / 100 GB/s) at 1 MiB: 32.35 us
    "simulate --topology ring:n=8,bandwidth_GBps=100,latency_us=1 --algorithm ring --protocol ideal -b 1M -e 1G -f 4":
        [r"1048576 .* ring +ideal +14 +32\.35 "],
    "simulate --topology switch:n=8,sharp=1 --algorithm all": [r"# \* fastest algorithm at that size", r"collnet"],
    "simulate --topology dgx-h100:nodes=4 --model tuner": [r"# model tuner leaves out:"],
    "simulate --topology dgx-h100:nodes=2048 -b 1G -e 1G": [r"nvls_tree", r"16384 ranks"],
    "simulate --topology dgx-h100:nodes=2048 -c all_to_all": [r" p2p ", r"model auto: flow"],
    "simulate --topology dgx-h100:nodes=128 -a all": [r"recursive_hd .* \^", r"# \^ not an NCCL algorithm"],
    "simulate -t dgx-h100:nodes=2 -c all_to_all": [r" p2p "],
    "topo": [r"gpus_per_node=8", r"nic_gbps=400"],
    "topo dgx-h100:nodes=2 --plot topo.png": [r"wrote topo\.png", r"switches"],
    "topo tests/data/nccl_topo/h200-baremetal-dump-excerpt.xml": [r"# read:"],
    "simulate -t dgx-b200:nodes=4 -b 8M -e 8M --explain": [r"faster: \S+ .*NCCL_ALGO="],
    "verify ring --ranks 2-16": [r"ring"],
}
REFUSED = {"simulate --topology ring:n=16384 -a ring -p ideal --model engine --max-memory 4G": r"more than --max-memory"}


def readme_lines() -> list[str]:
    """Every ``collsim ...`` command of the README's bash blocks, without its comment."""
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```bash\n(.*?)\n```", text, re.DOTALL):
        for line in block.splitlines():
            for part in line.split("&&"):
                cmd = part.split("  #")[0].split(" # ")[0].strip()
                if cmd.startswith("collsim "):
                    out.append(cmd[len("collsim "):].strip())
    return out


def _run(args: str, where: pathlib.Path) -> tuple[int, str, str]:
    argv = [a if not a.startswith(("tests/", "examples/", "notebooks/")) else str(ROOT / a) for a in shlex.split(args)]
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(where)   # files the commands write (topo.png, trace.json, step.png) land in a temporary folder
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        os.chdir(here)
    return rc, out.getvalue(), err.getvalue()


def _shorter(args: str) -> str:
    for pattern, repl in SHORTER:
        args = re.sub(pattern, repl, args)
    return args


RUN = [line for line in readme_lines() if line not in SKIP]


def test_every_readme_line_is_run_or_skipped_with_a_reason():
    lines = readme_lines()
    assert len(lines) >= 40
    assert not set(SKIP) - set(lines), f"SKIP names lines the README no longer has: {set(SKIP) - set(lines)}"
    assert all(SKIP.values())
    for prefix in list(PROMISES) + list(REFUSED):
        assert any(line.startswith(prefix) or line == prefix for line in RUN), f"no README line {prefix!r}"


@pytest.mark.parametrize("line", RUN)
def test_readme_line_runs_and_keeps_its_promise(line, tmp_path):
    rc, out, err = _run(_shorter(line), tmp_path)
    refused = next((pat for prefix, pat in REFUSED.items() if line.startswith(prefix)), None)
    if refused:
        assert rc == 2 and re.search(refused, err), err
        assert "Traceback" not in err
        return
    assert rc == 0, err[-400:]
    # the longest matching prefix names the promise (the reference-engine line extends the ring line)
    prefix = max((p for p in PROMISES if line.startswith(p)), key=len, default=None)
    for pattern in PROMISES.get(prefix, []):
        assert re.search(pattern, out), f"{line!r}: promised {pattern!r}, not in:\n{out[-1500:]}"
    assert "=None" not in out   # no preset default shown as None
