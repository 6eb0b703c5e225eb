#!/usr/bin/env bash
# Developer script for a lent GPU host (prebuilt binaries in .device-build/):
# the GPU tests, then 128-trial runs of sdpa_fwd and gemm with the PyTorch
# baselines measured in the same session. Logs and the database go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
export EVOTUNE_BINARY=$B/evotune EVOTUNE_SOURCE_DIR=$PWD EVOTUNE_CACHE_DIR=${EVOTUNE_CACHE_DIR:-/tmp/evotune-cache}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in faults timing templates; do
    "$B/evotune_gpu_tests" "[$t]" >"$OUT/gpu_$t.log" 2>&1
    echo "gpu tests [$t]: rc=$? $(grep -E 'test cases|All tests passed' "$OUT/gpu_$t.log" | tail -1)"
  done
fi
DB=$OUT/demo.db
/usr/bin/time -f "sdpa run wall %e s" "$B/evotune" --db "$DB" run --kernel sdpa_fwd --shape 2,8,512,64 --dtype fp16 --budget 128 --elites 6 --seed 1 >"$OUT/sdpa_run.log" 2>&1
tail -25 "$OUT/sdpa_run.log"
python3 bench/torch_baselines.py --sdpa 2,8,512,64 --dtype fp16 >"$OUT/torch_sdpa.jsonl" 2>&1; cat "$OUT/torch_sdpa.jsonl"
python3 bench/torch_baselines.py --gemm 4096,4096,4096 --dtype bf16 >"$OUT/torch_gemm.jsonl" 2>&1; cat "$OUT/torch_gemm.jsonl"
/usr/bin/time -f "gemm run wall %e s" "$B/evotune" --db "$DB" run --kernel gemm --shape 4096,4096,4096 --dtype bf16 --budget 128 --elites 6 --seed 1 >"$OUT/gemm_run.log" 2>&1
tail -25 "$OUT/gemm_run.log"
