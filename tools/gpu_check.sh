#!/usr/bin/env bash
# Checks a build on a GPU host, step by step: what the GPU and evotune see,
# the GPU tests by tag, the example kernel, a short tuning run. Useful on a
# machine that got a copied build (the binaries link their dependencies
# statically, so the driver and NVRTC are all the host needs).
#
# Needs:  a CUDA GPU. A build folder: $EVOTUNE_BUILD, default build/
#         (scripts/bootstrap.sh builds it), holding evotune and
#         tests/evotune_gpu_tests (or both side by side, as in a copied build).
#         The GPU tests read kernel and test files from this checkout.
# Run:    tools/gpu_check.sh STEP...
#           info              nvidia-smi's name, driver and clocks; `evotune kernels`
#           faults|timing|templates|sanitizer|gpu
#                             the GPU tests tagged [faults], [timing], ... ([gpu]: all of them)
#           transpose         the example kernel, every config (26 trials)
#           tune:ARGS         `evotune run ARGS`, with '+' for spaces, e.g.
#                             tune:--kernel+sdpa_fwd+--shape+2,8,512,64+--budget+32
#           tools/gpu_check.sh info templates transpose
#         OUT (default /tmp/evotune-gpu-check) holds the database of the runs.
# Prints: each step under a "=== STEP" line, with the tail of its output; the
#         exit status is the first failing step's.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath -m "${EVOTUNE_BUILD:-$root/build}")
GPU_TESTS=$BUILD/tests/evotune_gpu_tests
[ -x "$GPU_TESTS" ] || GPU_TESTS=$BUILD/evotune_gpu_tests
for b in "$BUILD/evotune" "$GPU_TESTS"; do
  if [ ! -x "$b" ]; then
    echo "gpu_check.sh: no $b (build with scripts/bootstrap.sh, or set EVOTUNE_BUILD=/path/to/build)" >&2
    exit 2
  fi
done
[ $# -gt 0 ] || { sed -n '/^# Run:/,/^# Prints:/p' "$0" >&2; exit 2; }
cd "$root" || exit 2
# The GPU tests find the binary and the sources through these when the build
# folder was copied from elsewhere.
export EVOTUNE_BINARY=$BUILD/evotune EVOTUNE_SOURCE_DIR=$root
OUT=${OUT:-/tmp/evotune-gpu-check}
mkdir -p "$OUT"
rc=0
for step in "$@"; do
  echo "=== $step"
  case "$step" in
    info)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      "$BUILD/evotune" kernels ;;
    faults | timing | templates | sanitizer | gpu)
      "$GPU_TESTS" "[$step]" >"$OUT/gpu_$step.log" 2>&1
      r=$?
      tail -40 "$OUT/gpu_$step.log"
      [ "$r" = 0 ] || { [ "$rc" != 0 ] || rc=$r; } ;;
    transpose)
      "$BUILD/evotune" --db "$OUT/check.db" run --kernel examples/transpose/spec.toml --shape 8192,8192 \
        --strategy exhaustive --budget 26 2>&1 | tail -16
      r=${PIPESTATUS[0]}
      [ "$r" = 0 ] || { [ "$rc" != 0 ] || rc=$r; } ;;
    tune:*)
      args=${step#tune:}
      # shellcheck disable=SC2086  # the arguments split at the '+'s turned into spaces
      "$BUILD/evotune" --db "$OUT/check.db" run ${args//+/ } 2>&1 | tail -40
      r=${PIPESTATUS[0]}
      [ "$r" = 0 ] || { [ "$rc" != 0 ] || rc=$r; } ;;
    *)
      echo "unknown step $step"
      [ "$rc" != 0 ] || rc=2 ;;
  esac
done
exit "$rc"
