#!/usr/bin/env bash
# Developer script for a host with two GPUs: trials per minute with one GPU
# and with two, on a GPU-bound run (the compile cache is warmed first, and the
# exhaustive strategy makes every run evaluate the same configs).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
export EVOTUNE_CACHE_DIR=/tmp/evotune-cache
nvidia-smi --query-gpu=index,name --format=csv,noheader
args=(run --kernel gemm --shape 4096,4096,4096 --dtype bf16 --strategy exhaustive --budget ${BUDGET:-256} --retime 0 -q)
"$B/evotune" --db "$OUT/warm.db" "${args[@]}" --gpus 0 >/dev/null 2>&1
for gpus in 0 0,1; do
  "$B/evotune" --db "$OUT/multi.db" "${args[@]}" --gpus $gpus 2>&1 | grep -E "^run|^time"
done
"$B/evotune" --db "$OUT/multi.db" runs
sqlite3 "$OUT/multi.db" "SELECT run_id, device, COUNT(*) FROM trials GROUP BY run_id, device" 2>/dev/null ||
  python3 -c "import sqlite3;print(sqlite3.connect('$OUT/multi.db').execute('SELECT run_id, device, COUNT(*) FROM trials GROUP BY run_id, device').fetchall())"
