#!/usr/bin/env bash
# Developer script for a lent GPU host: the throughput benchmark, then an
# exhaustive gemm sweep (4096^3 bf16) recorded as a replay dataset in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
echo "=== throughput"
bench/throughput.sh "$B/evotune"
echo "=== gemm sweep"
export EVOTUNE_CACHE_DIR=/tmp/evotune-cache
/usr/bin/time -f "sweep wall %e s" "$B/evotune" --db "$OUT/sweep.db" run --kernel gemm --shape 4096,4096,4096 --dtype bf16 \
  --strategy exhaustive --budget 6000 --samples 20 --warmup-ms 5 --retime 0 --timeout 10 -q
"$B/evotune" --db "$OUT/sweep.db" export last --format dataset -o "$OUT/gemm_h200.json"
"$B/evotune" --db "$OUT/sweep.db" runs
