#!/usr/bin/env bash
# Developer script for a lent GPU host: gemm_sm90 with stream-K (PERSISTENT=2).
#   1. data-parallel winners against the same configs with stream-K, timed
#      interleaved (a 5-config run re-timed over 5 rounds) per shape;
#   2. gemm_sm90 tuned on the issue-4 shapes, then the side-by-side GEMM table
#      against cuBLAS, and the names of the kernels cuBLAS ran.
# Needs prebuilt binaries in .device-build/.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
export EVOTUNE_CACHE_DIR=/tmp/evc
DB=$OUT/bench.db
DP1=PRODUCER=1,REG_SPLIT=1,STAGES=4,SWIZZLE=16
DP2=PRODUCER=1,STAGES=4,SWIZZLE=1
if [ -z "${SKIP_PAIRS:-}" ]; then
  for shape in 8192,1024,8192 16384,128,4096 4096,4096,4096; do
    bn=256; [ $shape = 16384,128,4096 ] && bn=128
    timeout 120 "$B/evotune" --db "$OUT/pairs.db" run -q --kernel gemm_sm90 --shape $shape --dtype bf16 --strategy exhaustive \
      --budget 5 --elites 5 --retime 5 --config PERSISTENT=1,BLOCK_N=$bn,$DP1 --config PERSISTENT=2,BLOCK_N=$bn,$DP1 \
      --config PERSISTENT=1,BLOCK_N=$bn,$DP2 --config PERSISTENT=2,BLOCK_N=$bn,$DP2 --config PERSISTENT=2,BLOCK_N=$bn,PRODUCER=1,STAGES=4 \
      | sed -n '/^elite population/,/^default/p'
  done
fi
for shape in ${SHAPES:-8192,1024,8192:300 16384,128,4096:200 4096,4096,4096:300 1000,3000,500:200 8192,8192,8192:120}; do
  timeout 200 "$B/evotune" --db "$DB" run -q --kernel gemm_sm90 --shape ${shape%%:*} --dtype bf16 --budget ${shape##*:} \
    --seed 11 --config PERSISTENT=2,PRODUCER=1,STAGES=4 | grep -E "^run|^time|^1 "
done
python3 bench/side_by_side.py --evotune "$B/evotune" --db "$DB" --anchors --only gemm --rep 500 --json "$OUT/gemm_side.json"
