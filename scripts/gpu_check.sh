#!/usr/bin/env bash
# One command for a GPU machine, useful on a single GPU in under 5 minutes:
#   1. collsim env (torch, CUDA, GPUs, NCCL) and the NCCL version;
#   2. a real ncclAllReduce through the ctypes binding (real.measure.nccl_ctypes), 1 rank on CUDA memory, result checked;
#   3. collsim bench --backend nccl --nprocs <GPUs> of all six collectives (#wrong must be 0), with the
#      simulator's prediction beside it where there are 2+ GPUs;
#   4. a PyTorch flight-recorder dump written by the NCCL backend, read by `collsim flight analyze`;
#   5. device-to-device copy bandwidth beside the preset's NVLink figure;
#   also: this machine written as a topology (collsim env --topology-out, with NCCL's topology dump);
#   6. with 2+ GPUs also the GPU tests and the harness-overhead check (as before).
#
#   scripts/gpu_check.sh                         # predicts on dgx-h100:gpus_per_node=<visible GPUs>
#   scripts/gpu_check.sh dgx-a100:gpus_per_node=4
#   SIZES="-b 1M -e 1G -f 4" ITERS=50 scripts/gpu_check.sh
#   BACKEND=gloo NGPUS=1 scripts/gpu_check.sh   # the same steps on the CPU (GPU-only steps say "skipped")
#
# Everything goes under ${OUT_DIR:-gpu_check_out}/; the last line is the summary:
#   gpu_check: OK|FAILED: N step(s) passed, M failed, K skipped (outputs in DIR/)
# Exit status 0 when no step failed.
set -uo pipefail
cd "$(dirname "$0")/.."

BACKEND=${BACKEND:-nccl}
NGPUS=${NGPUS:-$(python -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0)}
if [ "$NGPUS" -lt 1 ]; then
    echo "gpu_check: no CUDA GPU visible to torch: run this on a GPU machine (collsim env says what is here), or BACKEND=gloo NGPUS=1 to check the script" >&2
    collsim env >&2 || true
    exit 1
fi
TOPO=${1:-dgx-h100:gpus_per_node=$NGPUS}
if [ "$NGPUS" -ge 2 ]; then SIZES=${SIZES:--b 1K -e 1G -f 4}; else SIZES=${SIZES:--b 1K -e 256M -f 8}; fi
ITERS=${ITERS:-20}
OUT=${OUT_DIR:-gpu_check_out}
mkdir -p "$OUT"
passed=0; failed=0; skipped=0
step() {  # step NAME STATUS [LOGFILE]: count a step's outcome (skipped when its log says so)
    if [ "$2" -ne 0 ]; then failed=$((failed + 1)); echo "--- $1: FAILED";
    elif [ -n "${3:-}" ] && grep -q "skipped" "$3"; then skipped=$((skipped + 1)); echo "--- $1: skipped";
    else passed=$((passed + 1)); echo "--- $1: ok"; fi
}

echo "=== collsim env"
collsim env > "$OUT/env.txt" 2>&1; rc=$?; cat "$OUT/env.txt"; step env $rc

echo "=== this machine as a topology (collsim env --topology-out: nvidia-smi topo -m + NCCL_TOPO_DUMP_FILE)"
collsim env --topology-out "$OUT/machine.yaml" > "$OUT/topology_out.txt" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "dump part was skipped: no GPU\|writing a topology was skipped" "$OUT/topology_out.txt"; then
    rc=0   # the CPU run, or one GPU (what NCCL's dump said is in the message)
fi
if grep -q "NCCL topology dump: failed" "$OUT/topology_out.txt"; then rc=1; fi   # a GPU here, but no NCCL dump
sed -n '/^what this means/,$p' "$OUT/topology_out.txt" | tail -n +2 | grep -v "^  - " ; step topology-out $rc "$OUT/topology_out.txt"

echo "=== NCCL version"
python - > "$OUT/nccl_version.txt" 2>&1 <<'PY'
import torch
from real import nccl
try:
    print("torch's NCCL:", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("torch's NCCL: unknown:", e)
path = nccl.find_library()
print(f"libnccl.so.2 (real.measure.nccl_ctypes): {nccl.version_string(nccl.Nccl(path).version())} at {path}" if path
      else "libnccl.so.2: not found (pip install nvidia-nccl-cu12)")
PY
cat "$OUT/nccl_version.txt"

echo "=== ncclAllReduce through real.measure.nccl_ctypes (1 rank, CUDA memory, result checked)"
python scripts/gpu_check_steps.py nccl-allreduce > "$OUT/nccl_allreduce.txt" 2>&1; rc=$?
cat "$OUT/nccl_allreduce.txt"; step nccl-allreduce $rc "$OUT/nccl_allreduce.txt"

for c in all_reduce all_gather reduce_scatter broadcast reduce all_to_all; do
    echo "=== bench $c on $NGPUS GPU(s) ($BACKEND)"
    # shellcheck disable=SC2086  # SIZES is a list of flags
    if ! collsim bench --backend "$BACKEND" --nprocs "$NGPUS" --collective "$c" $SIZES -n "$ITERS" --format json \
            > "$OUT/bench_$c.json" 2> "$OUT/bench_$c.err"; then
        cat "$OUT/bench_$c.err"; step "bench $c" 1; continue
    fi
    if [ "$NGPUS" -ge 2 ]; then
        # shellcheck disable=SC2086
        collsim simulate --topology "$TOPO" --collective "$c" $SIZES --format json > "$OUT/sim_$c.json" 2> "$OUT/sim_$c.err" \
            || echo "(collsim simulate failed for $TOPO: $(head -c 300 "$OUT/sim_$c.err"); measured numbers only)"
    fi
    python - "$OUT/bench_$c.json" "$OUT/sim_$c.json" <<'PY'
import json, sys
bench = json.load(open(sys.argv[1]))
try:
    sim = {r["nbytes"]: r for r in json.load(open(sys.argv[2]))["results"]}
except Exception:
    sim = {}   # one GPU: nothing crosses a link, so there is no prediction to compare
print(f"{'size (B)':>12} {'time (us)':>10} {'median':>10} {'busbw':>8} {'#wrong':>6} | {'predicted':>10} {'algo/proto':>14} | {'meas/pred':>9}")
wrong = 0
for r in bench["results"]:
    p = sim.get(r["nbytes"])
    wrong += (r["wrong"] or 0) + (r["inplace_wrong"] or 0)
    pred = (f"{p['time_us']:10.1f} {p['algorithm'] + '/' + str(p['protocol']):>14} | {r['median_time_us'] / p['time_us']:9.2f}"
            if p else f"{'-':>10} {'-':>14} | {'-':>9}")
    print(f"{r['nbytes']:12d} {r['time_us']:10.1f} {r['median_time_us']:10.1f} {r['busbw_GBps']:8.2f} {r['wrong']!s:>6} | {pred}")
sys.exit(1 if wrong else 0)
PY
    step "bench $c" $?
done

echo "=== flight recorder: a dump written by the $BACKEND backend, read by collsim flight analyze"
rm -rf "$OUT/flight"
python scripts/gpu_check_steps.py flight "$OUT/flight" "$BACKEND" > "$OUT/flight.txt" 2>&1; rc=$?
if [ $rc -eq 0 ] && [ -e "$OUT/flight/rank_0" ]; then
    collsim flight analyze "$OUT/flight" >> "$OUT/flight.txt" 2>&1; rc=$?
fi
cat "$OUT/flight.txt"; step "flight recorder" $rc "$OUT/flight.txt"

echo "=== device-to-device copy bandwidth vs $TOPO"
python scripts/gpu_check_steps.py copy-bw "$TOPO" > "$OUT/copy_bw.txt" 2>&1; rc=$?
cat "$OUT/copy_bw.txt"; step "copy bandwidth" $rc "$OUT/copy_bw.txt"

if [ "$NGPUS" -ge 2 ] && [ "$BACKEND" = nccl ]; then
    echo "=== GPU tests (pytest -m gpu)"
    python -m pytest -q -m gpu tests/real -rs > "$OUT/gpu_tests.txt" 2>&1; rc=$?; tail -5 "$OUT/gpu_tests.txt"; step "gpu tests" $rc
    echo "=== harness overhead on $BACKEND"
    python benchmarks/bench_harness_overhead.py --backend "$BACKEND" --nprocs "$NGPUS" --sizes "${OVERHEAD_SIZES:-1M,64M,256M}" \
        > "$OUT/harness_overhead.txt" 2>&1; rc=$?; cat "$OUT/harness_overhead.txt"; step "harness overhead" $rc
fi

summary="gpu_check: $([ $failed -eq 0 ] && echo OK || echo FAILED): $passed step(s) passed, $failed failed, $skipped skipped (outputs in $OUT/)"
echo "$summary" | tee "$OUT/summary.txt"
[ $failed -eq 0 ]
