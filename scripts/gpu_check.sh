#!/usr/bin/env bash
# One command for a GPU machine: what is here, the NCCL version, and collsim bench of all six
# collectives on every visible GPU (NCCL backend) with the simulator's prediction beside it; then the
# GPU tests and the harness-overhead check.
#
#   scripts/gpu_check.sh                         # predicts on dgx-h100:gpus_per_node=<visible GPUs>
#   scripts/gpu_check.sh dgx-a100:gpus_per_node=4
#   SIZES="-b 1M -e 1G -f 4" ITERS=50 scripts/gpu_check.sh
#
# Writes everything under ${OUT_DIR:-gpu_check_out}/ (bench_*.json, sim_*.json, env.txt, ...).
# Exit status: 0 when every bench row is correct (#wrong = 0) and the GPU tests pass, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."

# BACKEND=gloo NGPUS=2 runs the same steps on the CPU (to check this script where there is no GPU).
BACKEND=${BACKEND:-nccl}
NGPUS=${NGPUS:-$(python -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0)}
if [ "$NGPUS" -lt 1 ]; then
    echo "gpu_check: no CUDA GPU visible to torch: run this on a GPU machine (collsim env says what is here)" >&2
    collsim env >&2 || true
    exit 1
fi
TOPO=${1:-dgx-h100:gpus_per_node=$NGPUS}
SIZES=${SIZES:--b 1K -e 1G -f 4}
ITERS=${ITERS:-20}
OUT=${OUT_DIR:-gpu_check_out}
mkdir -p "$OUT"
status=0

echo "=== collsim env"
collsim env | tee "$OUT/env.txt"

echo "=== NCCL version"
python - <<'PY' | tee "$OUT/nccl_version.txt"
import torch
from real import nccl
try:
    print("torch's NCCL:", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("torch's NCCL: unknown:", e)
path = nccl.find_library()
if path:
    lib = nccl.Nccl(path)
    print("libnccl.so.2 (real.nccl):", nccl.version_string(lib.version()), "at", path, "- unique id", lib.unique_id()[:8].hex(), "...")
else:
    print("libnccl.so.2: not found (pip install nvidia-nccl-cu12)")
PY

for c in all_reduce all_gather reduce_scatter broadcast reduce all_to_all; do
    echo "=== $c: measured on $NGPUS GPU(s) ($BACKEND) vs predicted on $TOPO"
    # shellcheck disable=SC2086  # SIZES is a list of flags
    if ! collsim bench --backend "$BACKEND" --nprocs "$NGPUS" --collective "$c" $SIZES -n "$ITERS" --format json \
            > "$OUT/bench_$c.json"; then
        echo "bench $c FAILED (see messages above)"; status=1; continue
    fi
    # shellcheck disable=SC2086
    collsim simulate --topology "$TOPO" --collective "$c" $SIZES --format json > "$OUT/sim_$c.json" 2> "$OUT/sim_$c.err" \
        || echo "(collsim simulate failed for $TOPO: $(head -c 300 "$OUT/sim_$c.err"); measured numbers only)"
    python - "$OUT/bench_$c.json" "$OUT/sim_$c.json" <<'PY' || status=1
import json, sys
bench = json.load(open(sys.argv[1]))
try:
    sim = {r["nbytes"]: r for r in json.load(open(sys.argv[2]))["results"]}
except Exception:
    sim = {}
print(f"{'size (B)':>12} {'time (us)':>10} {'busbw':>8} {'#wrong':>6} | {'predicted':>10} {'busbw':>8} {'algo/proto':>14} | {'meas/pred':>9}")
wrong = 0
for r in bench["results"]:
    p = sim.get(r["nbytes"]) or (min(sim.values(), key=lambda s: abs(s["nbytes"] - r["nbytes"])) if sim else None)
    wrong += (r["wrong"] or 0) + (r["inplace_wrong"] or 0)
    pred = f"{p['time_us']:10.1f} {p['busbw_GBps']:8.2f} {p['algorithm'] + '/' + str(p['protocol']):>14} | {r['time_us'] / p['time_us']:9.2f}" if p else f"{'-':>10} {'-':>8} {'-':>14} | {'-':>9}"
    print(f"{r['nbytes']:12d} {r['time_us']:10.1f} {r['busbw_GBps']:8.2f} {r['wrong']!s:>6} | {pred}")
print("notes:", "; ".join(bench["notes"]))
sys.exit(1 if wrong else 0)
PY
done

echo "=== GPU tests (pytest -m gpu)"
python -m pytest -q -m gpu tests/real -rs || status=1

echo "=== harness overhead on $BACKEND"
python benchmarks/bench_harness_overhead.py --backend "$BACKEND" --nprocs "$NGPUS" --sizes "${OVERHEAD_SIZES:-1M,64M,256M}" \
    | tee "$OUT/harness_overhead.txt" || status=1

echo "gpu_check: $([ $status -eq 0 ] && echo OK || echo FAILED) (outputs in $OUT/)"
exit $status
