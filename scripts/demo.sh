#!/usr/bin/env bash
# Builds evotune and runs the main job on this machine's GPU: a 128-trial
# tuning run of fused attention on the seeds' mission shape and one of GEMM,
# each with the fastest template this GPU runs (sdpa_fwd_sm90 and gemm_sm90 on
# Hopper, sdpa_fwd and gemm elsewhere), kept in
# ./evotune.db with the vendor baselines measured beside each (cuBLASLt;
# cuDNN and flash through PyTorch where it is installed), the top elites and
# the baselines profiled with Nsight Compute where ncu is installed, each run
# reported in reports/ (Markdown and SVG plots); then
# the winners exported as headers, and those headers compiled into the
# example programs and run.
# EVOTUNE=path/to/evotune uses that binary and skips the build (a GPU host
# without the build's packages: the binary is static).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${EVOTUNE:-}" ]; then
  E=$EVOTUNE
else
  ./scripts/bootstrap.sh
  E=./build/evotune
fi
$E kernels
attn=sdpa_fwd
gemm=gemm
if $E kernels sdpa_fwd_sm90 --json | grep -q '"runs_here": "yes"'; then attn=sdpa_fwd_sm90; fi
if $E kernels gemm_sm90 --json | grep -q '"runs_here": "yes"'; then gemm=gemm_sm90; fi
# Nsight Compute on the top 3 elites and the baselines where ncu is installed
# (evotune profile --baseline).
profile=()
if command -v ncu >/dev/null || [ -x /usr/local/cuda/bin/ncu ]; then profile=(--profile 3); fi
$E run --kernel $attn --shape 2,8,512,64 --dtype fp16 --budget 128 --elites 6 "${profile[@]}"
$E report last -o reports/attention.md
$E export last -o sdpa_best.h
$E run --kernel $gemm --shape 4096,4096,4096 --dtype bf16 --budget 128 --elites 6 "${profile[@]}"
$E report last -o reports/gemm.md
$E export last -o gemm_best.h
$E runs
# The example programs launch the mma.sync templates; the Hopper ones take
# TMA tensor maps, which their headers document (see the README's exports).
if [ "$attn" = sdpa_fwd ] && [ "$gemm" = gemm ]; then
  cmake -S . -B build -DEVOTUNE_SDPA_HEADER="$PWD/sdpa_best.h" -DEVOTUNE_GEMM_HEADER="$PWD/gemm_best.h" >/dev/null
  cmake --build build --target sdpa_tuned gemm_tuned
  ./build/examples/sdpa_tuned && ./build/examples/gemm_tuned
elif [ "$attn" = sdpa_fwd ]; then
  cmake -S . -B build -DEVOTUNE_SDPA_HEADER="$PWD/sdpa_best.h" >/dev/null
  cmake --build build --target sdpa_tuned
  ./build/examples/sdpa_tuned
else
  echo "demo: $attn and $gemm take TMA tensor maps: sdpa_best.h and gemm_best.h document their launch"
fi
