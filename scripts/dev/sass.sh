#!/usr/bin/env bash
# Developer script (no GPU needed): SASS of one gemm_sm90 config, compiled by
# evotune's own NVRTC path for sm_90a. Prints cuobjdump -sass of the kernel.
#   scripts/dev/sass.sh 'BLOCK_N=256,PERSISTENT=1' [M,N,K] > k.sass
set -euo pipefail
cd "$(dirname "$0")/../.."
CFG=${1:?config}
SHAPE=${2:-8192,1024,8192}
KERNEL=${KERNEL:-gemm_sm90}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
EVOTUNE_CACHE_DIR=$dir/cache ./build/evotune --db "$dir/s.db" run -q --kernel "$KERNEL" --shape "$SHAPE" \
  --dtype bf16 --compile-only --arch sm_90a --strategy exhaustive --budget 1 --config "$CFG" >/dev/null
for f in $(find "$dir/cache" -name '*.cubin'); do
  if cuobjdump -sass "$f" | grep -q "Function : $KERNEL\$"; then cuobjdump -sass "$f"; fi
done
