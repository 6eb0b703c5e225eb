#!/usr/bin/env bash
# Developer script for a lent GPU host: longer gemm_sm90 tuning where the
# first pass was close, then the side-by-side tables (GEMM, then attention).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
export EVOTUNE_CACHE_DIR=/tmp/evc
DB=$OUT/bench.db
cp "$B/bench.db" "$DB" 2>/dev/null
for shape in 4096,4096,4096:400 8192,1024,8192:400 16384,128,4096:200; do
  "$B/evotune" --db "$DB" run -q --kernel gemm_sm90 --shape ${shape%%:*} --dtype bf16 --budget ${shape##*:} --seed 7 | grep -E "^run"
done
python3 bench/side_by_side.py --evotune "$B/evotune" --db "$DB" --anchors --only gemm --rep 500 --json "$OUT/gemm_side.json"
python3 bench/side_by_side.py --evotune "$B/evotune" --db "$DB" --anchors --only sdpa --tune-budget 64 --json "$OUT/sdpa_side.json"
