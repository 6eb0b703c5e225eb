#!/usr/bin/env bash
# Developer script for a lent GPU host: runs a prebuilt evotune (carried in
# .device-build/) through the GPU tests and short runs. Usage:
#   scripts/dev/gpu_check.sh STEP...   (steps: info faults timing templates transpose tune:ARG+ARG...)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
export EVOTUNE_BINARY=$B/evotune EVOTUNE_SOURCE_DIR=$PWD EVOTUNE_CACHE_DIR=${EVOTUNE_CACHE_DIR:-/tmp/evotune-cache}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for step in "$@"; do
  echo "=== $step"
  case "$step" in
    info)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      "$B/evotune" kernels ;;
    faults) "$B/evotune_gpu_tests" "[faults]" 2>&1 | tail -40 ;;
    timing) "$B/evotune_gpu_tests" "[timing]" 2>&1 | tail -20 ;;
    templates) "$B/evotune_gpu_tests" "[templates]" 2>&1 | tail -120 ;;
    transpose)
      "$B/evotune" --db "$OUT/dev.db" run --kernel examples/transpose/spec.toml --shape 8192,8192 --strategy exhaustive --budget 26 2>&1 | tail -16 ;;
    tune:*)
      args=${step#tune:}
      "$B/evotune" --db "$OUT/dev.db" run ${args//+/ } 2>&1 | tail -40 ;;
    *) echo "unknown step $step" ;;
  esac
done
