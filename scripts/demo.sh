#!/usr/bin/env bash
# Builds evotune and runs the main job on this machine's GPU: a 128-trial
# tuning run of fused attention on the seeds' mission shape and one of GEMM
# with the fastest GEMM template this GPU runs (gemm_sm90 on Hopper), kept in
# ./evotune.db; then the elite populations, the winners exported as headers,
# and those headers compiled into the example programs and run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
E=./build/evotune
$E kernels
$E run --kernel sdpa_fwd --shape 2,8,512,64 --dtype fp16 --budget 128 --elites 6
$E export last -o sdpa_best.h
gemm=gemm
if $E kernels gemm_sm90 --json | grep -q '"runs_here": "yes"'; then gemm=gemm_sm90; fi
$E run --kernel $gemm --shape 4096,4096,4096 --dtype bf16 --budget 128 --elites 6
$E export last -o gemm_best.h
$E runs
$E report last -o gemm_report.md
if [ "$gemm" = gemm ]; then
  cmake -S . -B build -DEVOTUNE_SDPA_HEADER="$PWD/sdpa_best.h" -DEVOTUNE_GEMM_HEADER="$PWD/gemm_best.h" >/dev/null
  cmake --build build --target sdpa_tuned gemm_tuned
  ./build/examples/sdpa_tuned && ./build/examples/gemm_tuned
else
  cmake -S . -B build -DEVOTUNE_SDPA_HEADER="$PWD/sdpa_best.h" >/dev/null
  cmake --build build --target sdpa_tuned
  ./build/examples/sdpa_tuned
fi
