#!/usr/bin/env bash
# The GEMM side-by-side against cuBLAS, from scratch: gemm_sm90 tuned afresh
# on the five anchor GEMM shapes (bf16), each with its own budget, into a new
# database, then bench/side_by_side.py on them. This is how the GEMM table of
# docs/BENCHMARKS.md was measured (seeds 11 to 17).
#
# Needs:  a Hopper GPU; PyTorch and Triton (for bench/side_by_side.py); an
#         evotune binary: $EVOTUNE, default build/evotune (scripts/bootstrap.sh
#         builds it). About 15-20 minutes on an H200.
# Run:    [SEED=11] [SHAPES="M,N,K:budget ..."] [RUN_ARGS="--retime-ms 300"] [TEMPLATES=1] tools/gemm_anchors.sh
#         SHAPES overrides the shapes and budgets; RUN_ARGS adds `evotune run`
#         options; TEMPLATES=1 runs the [templates] GPU test first (needs
#         tests/evotune_gpu_tests in the binary's build folder); OUT (default
#         /tmp/evotune-gemm, must not hold a bench.db yet) receives the
#         database and gemm_side.json.
# Prints: per shape the run's summary and its best elites, then
#         side_by_side.py's table: kernel time (CUPTI) and TFLOP/s of ours and
#         cuBLAS, the ratio with its per-round range and spread, and event
#         time beside it (--rep 1000 --rounds 10).
set -uo pipefail
source "$(dirname "$0")/evotune_path.sh"
cd "$root" || exit 2
OUT=${OUT:-/tmp/evotune-gemm}
mkdir -p "$OUT"
DB=$OUT/bench.db
if [ -e "$DB" ]; then
  echo "gemm_anchors.sh: $DB exists; side_by_side.py would reuse its runs (remove it, or set OUT)" >&2
  exit 2
fi
if [ -n "${TEMPLATES:-}" ]; then
  tests=$(dirname "$EVOTUNE")/tests/evotune_gpu_tests
  [ -x "$tests" ] || tests=$(dirname "$EVOTUNE")/evotune_gpu_tests
  EVOTUNE_BINARY=$EVOTUNE EVOTUNE_SOURCE_DIR=$root "$tests" "[templates]" 2>&1 | tail -4
fi
for shape in ${SHAPES:-8192,1024,8192:300 16384,128,4096:200 4096,4096,4096:300 1000,3000,500:150 8192,8192,8192:100}; do
  # shellcheck disable=SC2086  # RUN_ARGS is a list of options
  timeout 300 "$EVOTUNE" --db "$DB" run -q --kernel gemm_sm90 --shape "${shape%%:*}" --dtype bf16 \
    --budget "${shape##*:}" --seed "${SEED:-11}" ${RUN_ARGS:-}
  "$EVOTUNE" --db "$DB" top last 2>&1 | sed -n '1p;4,6p' | cut -c1-60,130-330
done
python3 bench/side_by_side.py --evotune "$EVOTUNE" --db "$DB" --anchors --only gemm --rep 1000 --rounds 10 \
  --json "$OUT/gemm_side.json"
