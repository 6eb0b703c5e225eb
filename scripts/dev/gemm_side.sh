#!/usr/bin/env bash
# Developer script for a lent GPU host: gemm_sm90 tuned afresh on the issue-4
# shapes (evo, no seeded configs), then the side-by-side GEMM table against
# cuBLAS. SHAPES="M,N,K:budget ..." overrides the shapes; TEMPLATES=1 runs
# the [templates] GPU test first; RUN_ARGS adds `evotune run` options. Needs
# prebuilt binaries in .device-build/.
source "$(dirname "$0")/env.sh"
DB=$OUT/bench.db
if [ -n "${TEMPLATES:-}" ]; then
  "$B/evotune_gpu_tests" "[templates]" 2>&1 | tail -4
fi
for shape in ${SHAPES:-8192,1024,8192:300 16384,128,4096:200 4096,4096,4096:300 1000,3000,500:150 8192,8192,8192:100}; do
  timeout 200 "$B/evotune" --db "$DB" run -q --kernel gemm_sm90 --shape ${shape%%:*} --dtype bf16 \
    --budget ${shape##*:} --seed ${SEED:-11} ${RUN_ARGS:-}
  "$B/evotune" --db "$DB" top last 2>&1 | sed -n '1p;4,6p' | cut -c1-60,130-330
done
python3 bench/side_by_side.py --evotune "$B/evotune" --db "$DB" --anchors --only gemm --rep 1000 --rounds 10 --json "$OUT/gemm_side.json"
