#!/usr/bin/env bash
# Records a replay dataset: every valid config of a kernel at one shape,
# measured on this GPU (an exhaustive run), exported with
# `evotune export --format dataset` for `evotune run --replay`. This is how
# tests/data/sdpa_fwd_h200.json and tests/data/gemm_h200.json were recorded
# (on an H200, with these options).
#
# Needs:  a CUDA GPU; an evotune binary: $EVOTUNE, default build/evotune
#         (scripts/bootstrap.sh builds it). One trial per valid config:
#         4,674 for sdpa_fwd at 2,8,512,64, 5,190 for gemm at 4096^3.
# Run:    tools/record_dataset.sh KERNEL SHAPE DTYPE OUTPUT.json
#           tools/record_dataset.sh sdpa_fwd 2,8,512,64 fp16 sdpa_fwd_h200.json
#           tools/record_dataset.sh gemm 4096,4096,4096 bf16 gemm_h200.json
#         BUDGET (default 6000: above those counts), SAMPLES (timed launches
#         per config, default 30; gemm_h200.json used 20),
#         DB (default: a temporary database, removed afterwards).
# Prints: the run's summary line and wall time, then `evotune runs`; writes
#         OUTPUT.json.
set -uo pipefail
source "$(dirname "$0")/evotune_path.sh"
if [ $# -ne 4 ]; then
  echo "usage: tools/record_dataset.sh KERNEL SHAPE DTYPE OUTPUT.json" >&2
  exit 2
fi
kernel=$1 shape=$2 dtype=$3
out=$(realpath -m "$4")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DB=$(realpath -m "${DB:-$work/sweep.db}")
cd "$root" || exit 2
start=$(date +%s)
"$EVOTUNE" --db "$DB" run -q --kernel "$kernel" --shape "$shape" --dtype "$dtype" --strategy exhaustive \
  --budget "${BUDGET:-6000}" --samples "${SAMPLES:-30}" --warmup-ms 5 --retime 0 --timeout 10 --sanitize none ||
  { echo "record_dataset.sh: the sweep failed" >&2; exit 1; }
echo "sweep wall $(($(date +%s) - start)) s"
"$EVOTUNE" --db "$DB" export last --format dataset -o "$out" || exit 1
"$EVOTUNE" --db "$DB" runs
echo "wrote $out"
