#!/usr/bin/env bash
# Builds evotune and runs its tests. GPU tests run where there is a CUDA
# device and are reported as skipped (with the reason) where there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
cd build
ctest --output-on-failure -LE gpu "$@"
set +e
ctest -V -L gpu "$@" >gpu_tests.log 2>&1
rc=$?
set -e
grep -E "GPU tests|test cases:|assertions:|Skipped|FAILED|tests passed" gpu_tests.log || true
if [ $rc -ne 0 ]; then
  cat gpu_tests.log
  exit $rc
fi
