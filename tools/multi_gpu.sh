#!/usr/bin/env bash
# Multi-GPU scaling: trials per minute of one GPU-bound run on one GPU and on
# several (`evotune run --gpus`). The compile cache is warmed first and the
# exhaustive strategy makes every run evaluate the same configs, so the runs
# differ only in the GPUs that evaluate them.
#
# Needs:  a host with two or more CUDA GPUs; an evotune binary: $EVOTUNE,
#         default build/evotune (scripts/bootstrap.sh builds it).
# Run:    tools/multi_gpu.sh            # GPU 0, then GPUs 0,1
#         GPUS="0 0,1 0,1,2,3" BUDGET=512 tools/multi_gpu.sh
#         GPUS: the --gpus values to compare (default "0 0,1"); BUDGET
#         (default 256; gemm at 4096^3 bf16, no re-timing).
# Prints: the GPUs; per --gpus value the run's summary, time and search
#         lines (trials/min and GPU busy of the whole run and of the search
#         alone, which is what more GPUs speed up); `evotune runs`; the
#         trials each device evaluated per run.
set -uo pipefail
source "$(dirname "$0")/evotune_path.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export EVOTUNE_CACHE_DIR=${EVOTUNE_CACHE_DIR:-$work/cache}
nvidia-smi --query-gpu=index,name --format=csv,noheader
# shellcheck disable=SC2054  # 4096,4096,4096 is one argument
args=(run --kernel gemm --shape 4096,4096,4096 --dtype bf16 --strategy exhaustive --budget "${BUDGET:-256}" --retime 0
      --sanitize none -q)
"$EVOTUNE" --db "$work/warm.db" "${args[@]}" --gpus 0 >/dev/null 2>&1  # fills the compile cache
for gpus in ${GPUS:-0 0,1}; do
  echo "=== --gpus $gpus"
  "$EVOTUNE" --db "$work/multi.db" "${args[@]}" --gpus "$gpus" 2>&1 | grep -E "^run|^time|^search"
done
"$EVOTUNE" --db "$work/multi.db" runs
python3 -c "import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute('SELECT run_id, device, COUNT(*) FROM trials GROUP BY run_id, device'):
    print('run %s, device %s: %s trials' % row)" "$work/multi.db"
