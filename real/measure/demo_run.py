"""The real half of ``collsim demo``: measure on this machine, then set the prediction beside it.

* With two or more GPUs: bench NCCL all_gather and all_reduce on them (``collsim bench``), compare both
  with the simulator's prediction for the matching preset (an A100 box is ``dgx-a100``, an H100
  ``dgx-h100``...; anything else ``pcie``), calibrate on all_gather and predict all_reduce.
* Otherwise: bench gloo with ``nprocs`` local processes (4 KiB..16 MiB), calibrate a topology on
  all_gather and predict all_reduce with it (held out: the fit never sees an all_reduce).

Either way it prints the comparison tables and writes the Markdown + HTML report (to ``report``, or a
fresh temporary directory). The benches run ``collsim bench`` as a subprocess (``python -m sim bench``)
and store its JSON next to the report (with an nccl-tests table beside it for reading); the JSON is what
:func:`real.compare.measured.read_measurement` reads back, so comparisons and the fit use each size's
median iteration, not the mean a few stalled iterations move.

On a 2-core machine the CPU path takes about 15 s (two 7-size sweeps, the fit, three figures).

Example::

    from real.measure.demo_run import run_real_demo
    run_real_demo(nprocs=2, report="demo-report")    # returns the exit status
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from sim.errors import CollsimError
from sim.io.safe_io import write_output

CPU_SWEEP = ("-b", "4K", "-e", "16M", "-f", "4", "-n", "20", "-w", "2")
GPU_SWEEP = ("-b", "8", "-e", "1G", "-f", "4", "-n", "20", "-w", "5")
BENCH_TIMEOUT_S = 300
PRESET_BY_GPU = (("GB200", "gb200-nvl72"), ("B200", "dgx-b200"), ("H200", "dgx-h200"), ("H100", "dgx-h100"),
                 ("A100", "dgx-a100"))


def gpu_topology(gpu_name: str, ngpus: int) -> str:
    """A preset spec for ``ngpus`` GPUs named ``gpu_name`` (``"NVIDIA H100 80GB HBM3"`` -> ``dgx-h100:...``).

    >>> gpu_topology("NVIDIA A100-SXM4-80GB", 4)
    'dgx-a100:gpus_per_node=4'
    >>> gpu_topology("Tesla T4", 2)
    'pcie:gpus=2'
    """
    name = gpu_name.upper()
    for key, preset in PRESET_BY_GPU:
        if key in name and "PCIE" not in name:
            return f"{preset}:gpus_per_node={ngpus}"
    return f"pcie:gpus={ngpus}"


def bench(collective: str, sweep: tuple, out_path: str, *, backend: str, nprocs: int):
    """Run ``collsim bench`` for one collective; store its JSON (every iteration's median and minimum,
    beside the mean) next to ``out_path`` and an nccl-tests table at ``out_path``; read back the JSON.

    The comparison uses the median of each size's iterations (:data:`real.compare.measured.DEFAULT_STATISTIC`):
    a table only has the mean, which a few stalled iterations on a busy machine move by tens of percent
    (the held-out error swung between 24% and 59% from run to run when the demo compared means)."""
    import json

    from tqdm import tqdm

    from ..compare.measured import read_measurement
    from . import bench_report as report
    nsizes = _sweep_len(sweep)
    cmd = [sys.executable, "-m", "sim", "bench", "--backend", backend, "--nprocs", str(nprocs),
           "--collective", collective, *sweep, "--timeout", str(BENCH_TIMEOUT_S), "--format", "json"]
    with tqdm(total=nsizes, desc=f"bench {collective} ({backend}, {nprocs} ranks)", unit="size", leave=True,
              file=sys.stderr) as bar:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=2 * BENCH_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise CollsimError(f"`{' '.join(cmd[2:])}` gave no answer in {2 * BENCH_TIMEOUT_S} s") from e
        bar.update(nsizes)
    if proc.returncode != 0:
        tail = "; ".join(proc.stderr.strip().splitlines()[-3:])
        raise CollsimError(f"`{' '.join(cmd[2:])}` failed (exit {proc.returncode}): {tail or 'no message'}")
    json_path = os.path.splitext(out_path)[0] + ".json"
    write_output(json_path, proc.stdout, "--report")
    doc = json.loads(proc.stdout)
    rows = doc.get("results") or []
    title = (f"# collsim bench: {collective} on {doc.get('topology')} (from {os.path.basename(json_path)}, which "
             f"also holds each size's median and minimum)")
    table = [title] + [report.table_row(r) for r in rows] + [report.table_footer(rows)]
    write_output(out_path, "\n".join(table) + "\n", "--report")
    return read_measurement(json_path, collective=collective)


def _sweep_len(sweep: tuple) -> int:
    from sim.units import parse_size, size_sweep
    args = dict(zip(sweep[::2], sweep[1::2]))
    return len(size_sweep(parse_size(args["-b"]), parse_size(args["-e"]), float(args["-f"])))


def _gpus() -> tuple[int, str]:
    try:
        import torch
    except ImportError:
        return 0, ""
    if not torch.cuda.is_available():
        return 0, ""
    return torch.cuda.device_count(), torch.cuda.get_device_name(0)


def run_real_demo(nprocs: int, report: str | None) -> int:
    """Measure, calibrate, compare and report (see the module docstring); returns the exit status."""
    from ..compare.calibrate import calibrate
    from ..compare.markdown_report import text_table, write_report
    from ..compare.score import compare
    if nprocs < 2:
        raise CollsimError(f"--nprocs {nprocs}: a collective needs at least 2 processes")
    outdir = report or tempfile.mkdtemp(prefix="collsim-demo-")
    os.makedirs(outdir, exist_ok=True)
    ngpus, gpu = _gpus()
    on_gpus = ngpus >= 2
    backend, n, sweep = ("nccl", ngpus, GPU_SWEEP) if on_gpus else ("gloo", nprocs, CPU_SWEEP)
    where = f"{ngpus} x {gpu}" if on_gpus else f"{n} local gloo processes on the CPU"
    if ngpus == 1:
        print("\n(one GPU only: a collective needs two, so the real run uses gloo on the CPU)")
    print(f"\n== 2. Measured: all_gather and all_reduce, {where} (collsim bench, {' '.join(sweep)}) ==", flush=True)
    ag = bench("all_gather", sweep, os.path.join(outdir, "all_gather.txt"), backend=backend, nprocs=n)
    ar = bench("all_reduce", sweep, os.path.join(outdir, "all_reduce.txt"), backend=backend, nprocs=n)
    comparisons, commands = [], [f"collsim bench --backend {backend} --nprocs {n} --collective {c} {' '.join(sweep)} "
                                 f"--format json > {c}.json" for c in ("all_gather", "all_reduce")]
    if on_gpus:
        spec = gpu_topology(gpu, n)
        print(f"\n== 3. Predicted for this machine ({spec}) vs measured ==")
        for m in (ag, ar):
            c = compare(m, spec)
            comparisons.append(c)
            print(text_table(c) + "\n")
        commands += [f"collsim compare --measured {c}.json --topology {spec}" for c in ("all_gather", "all_reduce")]
    topo_path = os.path.join(outdir, "calibrated.yaml")
    cal = calibrate([ag], holdout=[ar])
    write_output(topo_path, cal.to_yaml(), "--report")
    held = cal.holdout[0]
    comparisons = [held] + comparisons
    commands += ["collsim calibrate all_gather.json --out calibrated.yaml --holdout all_reduce.json",
                 "collsim compare --measured all_reduce.json --topology calibrated.yaml --report report"]
    step = 4 if on_gpus else 3
    print(f"\n== {step}. Calibrated on all_gather, predicted all_reduce (held out) ==")
    print(f"fit: links {cal.bandwidth_GBps:.3g} GB/s, per-call overhead {cal.launch_us:.0f} us, host model "
          f"{cal.host_model}; fit residual median {cal.fit_median_abs_rel_error:.1%} -> {topo_path}")
    print(text_table(held))
    big = [r for r in held.rows if r.nbytes >= 64 << 10]
    if big:
        import statistics
        med = statistics.median(abs(r.rel_error) for r in big)
        print(f"held-out all_reduce, sizes >= 64 KiB: median |error| {med:.1%} over {len(big)} sizes")
    paths = write_report(outdir, comparisons, calibration=cal, commands=commands,
                         title=f"collsim demo: prediction vs measurement ({where})")
    print(f"\n== {step + 1}. Report ==\n{paths['html']}\n{paths['markdown']}")
    return 0
