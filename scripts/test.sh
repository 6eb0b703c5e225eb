#!/usr/bin/env bash
# Builds evotune and runs its tests. GPU tests run where there is a CUDA
# device and are reported as skipped (with the reason) where there is none.
# They run first, so that the last summary CTest prints is the unit suite's.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
cd build
set +e
ctest -V -L gpu "$@" >gpu_tests.log 2>&1
gpu_rc=$?
set -e
grep -E "GPU tests|test cases:|assertions:|FAILED" gpu_tests.log || true
if [ $gpu_rc -ne 0 ]; then
  cat gpu_tests.log
fi
ctest --output-on-failure -LE gpu "$@"
exit $gpu_rc
