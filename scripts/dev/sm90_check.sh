#!/usr/bin/env bash
# Developer script for a lent GPU host: gemm_sm90 on the configs most likely
# to expose bugs, at 4096^3 and an odd shape, plus SASS of the cubins built.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
export EVOTUNE_CACHE_DIR=/tmp/evc
cfgs=(--config "BLOCK_M=128" --config "CONSUMER_WG=1,BLOCK_M=64,BLOCK_N=64,STAGES=4" --config "PRODUCER=1"
  --config "PRODUCER=1,REG_SPLIT=1" --config "PRODUCER=1,CLUSTER_M=2,PERSISTENT=1" --config "PRODUCER=1,CLUSTER_N=2,PERSISTENT=1"
  --config "SCHEDULE=1,BLOCK_M=128,BLOCK_N=128,STAGES=6,PRODUCER=1,PERSISTENT=1"
  --config "SCHEDULE=1,BLOCK_M=64,BLOCK_N=256,STAGES=5,PRODUCER=1,PERSISTENT=1"
  --config "BLOCK_M=256,BLOCK_N=128,PRODUCER=1" --config "EPILOGUE=0" --config "BLOCK_K=128,STAGES=2")
for shape in 4096,4096,4096 ${EXTRA_SHAPES:-}; do
  echo "=== $shape"
  timeout -k 5 ${RUN_LIMIT:-180} "$B/evotune" --db "$OUT/sm90.db" run --kernel gemm_sm90 --shape $shape --dtype bf16 \
    --budget ${BUDGET:-16} --timeout 8 --retime 0 "${cfgs[@]}" >>"$OUT/sm90_runs.log" 2>&1
  echo "rc=$?"
  timeout 20 "$B/evotune" --db "$OUT/sm90.db" trials last >"$OUT/trials_$shape.txt" 2>&1
  cut -c1-250 "$OUT/trials_$shape.txt"
done
echo "=== SASS"
for f in $(ls -S /tmp/evc/*/*.cubin | head -4); do
  echo "$f: $(cuobjdump -sass "$f" | grep -oE 'HGMMA\.[0-9x]+\.F32[^ ]*|UTMALDG\.[0-9A-Z]+|HMMA\.[0-9]+' | sort | uniq -c | tr '\n' ' ')"
done
