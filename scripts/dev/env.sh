# Sourced by the GPU-host developer scripts: strict mode, the repository root
# as working directory, the carried binaries (B), the output folder (OUT, the
# device tool's $OUT when set), one compile cache, and what the GPU tests need.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export EVOTUNE_CACHE_DIR=${EVOTUNE_CACHE_DIR:-/tmp/evc} EVOTUNE_BINARY=$B/evotune EVOTUNE_SOURCE_DIR=$PWD
