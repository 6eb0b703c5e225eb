#!/usr/bin/env bash
# Builds evotune and runs its tests. GPU tests run where there is a CUDA
# device and are reported as skipped (with the reason) where there is none.
# They run first, so that the last summary CTest prints is the unit suite's.
#
#   scripts/test.sh [--sanitize] [CTEST ARGS...]
#
# --sanitize builds in ./build-asan with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the unit tests there (not the GPU
# tests). AddressSanitizer's reports (leaks included) are written to files,
# so that one from an evotune child whose output a test discards still fails
# the run and is printed; UndefinedBehaviorSanitizer ends the process at its
# first report, on stderr.
#
# The plain build is built with MPI (bootstrap --mpi installs OpenMPI), so
# that the MPI tests run: `mpirun --oversubscribe -np 3` on a replay
# dataset, ranks standing in for GPU hosts. The sanitizer build is built
# without MPI (LeakSanitizer reports OpenMPI's own start-up allocations as
# leaks): it checks the build without MPI, and the MPI tests run in the
# plain build only. EVOTUNE_MPI=0 builds and tests without MPI (a host
# that cannot install OpenMPI).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--sanitize" ]; then
  shift
  ./scripts/bootstrap.sh --sanitize
  cd build-asan
  reports="$PWD/sanitizer-reports"
  rm -rf "$reports"
  mkdir -p "$reports"
  export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:halt_on_error=1:print_stacktrace=1"
  # The templates' compile test builds each template's default config and
  # reference here, and leaves the random configs beside them to the plain
  # build: NVRTC runs in-process under the sanitizers' allocator, where that
  # test took 267 s, and the random configs run no code of ours that the
  # default config does not.
  export EVOTUNE_COMPILE_SAMPLES="${EVOTUNE_COMPILE_SAMPLES:-0}"
  set +e
  ctest --output-on-failure -LE gpu "$@"
  rc=$?
  set -e
  if compgen -G "$reports/*" >/dev/null; then
    echo "sanitizer reports (build-asan/sanitizer-reports):"
    for f in "$reports"/*; do
      echo "== $f"
      cat "$f"
    done
    rc=1
  fi
  exit $rc
fi

if [ "${EVOTUNE_MPI:-1}" = "0" ]; then
  ./scripts/bootstrap.sh
else
  ./scripts/bootstrap.sh --mpi
fi

# The SASS unit tests read the templates' machine code with cuobjdump (and
# the nvdisasm it runs; no GPU needed). Where the CUDA toolkit has neither,
# NVIDIA's wheels of the two are fetched with pip into build/cuda-tools;
# without them those tests warn and check less.
if ! command -v cuobjdump >/dev/null || ! command -v nvdisasm >/dev/null; then
  cuda_bin=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
  tools=$PWD/build/cuda-tools
  if [ -x "$cuda_bin/cuobjdump" ] && [ -x "$cuda_bin/nvdisasm" ]; then
    export PATH="$cuda_bin:$PATH"
  else
    if [ -z "$(find "$tools" -name nvdisasm -type f 2>/dev/null)" ]; then
      python3 -m pip download --no-deps --quiet -d "$tools" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >/dev/null 2>&1 &&
        for w in "$tools"/nvidia_cuda_*.whl; do python3 -m zipfile -e "$w" "$tools"; done || true
    fi
    obj=$(find "$tools" -name cuobjdump -type f 2>/dev/null | head -1 || true)
    dis=$(find "$tools" -name nvdisasm -type f 2>/dev/null | head -1 || true)
    if [ -n "$obj" ] && [ -n "$dis" ]; then
      chmod +x "$obj" "$dis"
      export PATH="$(dirname "$obj"):$(dirname "$dis"):$PATH"
    else
      echo "cuobjdump and nvdisasm not found and not fetched (pip): the SASS tests check less"
    fi
  fi
fi
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
