#!/usr/bin/env bash
# Builds evotune and runs the main job on this machine's GPU: a 128-trial
# tuning run of fused attention on the seeds' mission shape, kept in
# ./evotune.db, then shows the elite population and exports the winner.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
./build/evotune kernels
./build/evotune run --kernel sdpa_fwd --shape 2,8,512,64 --dtype fp16 --budget 128 --elites 6
./build/evotune top last
./build/evotune export last -o sdpa_best.h
./build/evotune report last -o sdpa_report.md
