#!/usr/bin/env bash
# Installs what evotune needs to build on Debian/Ubuntu (the CUDA toolkit must
# already be installed), then configures and builds it in ./build.
# With --sanitize: builds the program and its unit tests with AddressSanitizer
# and UndefinedBehaviorSanitizer in ./build-asan instead.
# With --mpi: installs OpenMPI too and builds with it (CMake EVOTUNE_MPI=ON),
# for runs over the ranks of an MPI job (mpirun, srun); without it, the
# build has no MPI.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=0
mpi=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    --mpi) mpi=1 ;;
    *) echo "bootstrap: unknown option $arg (expected --sanitize, --mpi)" >&2; exit 2 ;;
  esac
done

if [ -d /usr/local/cuda/bin ] && ! command -v nvcc >/dev/null; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if ! command -v nvcc >/dev/null; then
  echo "bootstrap: the CUDA toolkit (nvcc, NVRTC) is required: https://developer.nvidia.com/cuda-downloads" >&2
  exit 1
fi

packages=(cmake g++ make libsqlite3-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev catch2
          libtomlplusplus-dev)
if [ $mpi -eq 1 ]; then
  packages+=(openmpi-bin libopenmpi-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mpi_option=-DEVOTUNE_MPI=$([ $mpi -eq 1 ] && echo ON || echo OFF)
if [ $sanitize -eq 1 ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVOTUNE_SANITIZE=ON -DEVOTUNE_BUILD_EXAMPLES=OFF \
    "$mpi_option" ${EVOTUNE_CMAKE_ARGS:-} >/dev/null
  cmake --build build-asan -j "$(nproc)" --target evotune evotune_tests
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$mpi_option" ${EVOTUNE_CMAKE_ARGS:-} >/dev/null
  cmake --build build -j "$(nproc)"
fi
