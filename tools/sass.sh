#!/usr/bin/env bash
# SASS of one config of a kernel, compiled by evotune's own NVRTC path (the
# same options, defines and headers a tuning run uses), for reading the
# machine code a change produces.
#
# Needs:  no GPU. An evotune binary: $EVOTUNE, default build/evotune
#         (scripts/bootstrap.sh builds it); cuobjdump and nvdisasm on PATH (CUDA
#         toolkit; where it has none, scripts/test.sh leaves NVIDIA's in
#         build/cuda-tools).
# Run:    tools/sass.sh CONFIG [SHAPE] > k.sass
#           tools/sass.sh 'BLOCK_N=256,PERSISTENT=1'                      # gemm_sm90 at 8192,1024,8192
#           KERNEL=sdpa_fwd DTYPE=fp16 tools/sass.sh 'BLOCK_M=128' 2,8,512,64
#         KERNEL: a built-in name or a spec path (default gemm_sm90); ARCH
#         (default sm_90a); DTYPE (default bf16). CONFIG may name only some
#         parameters (the others take their defaults).
# Prints: `cuobjdump -sass` of the kernel's cubins on stdout (one per variant
#         the run compiles, e.g. for a check shape that needs other defines;
#         the reference kernel's are left out), in no fixed order (the order of
#         their cache keys, which change with the source); evotune's output on
#         failure. SASS_HASH=1: one line a cubin instead, sorted, "md5 of its
#         instructions, function, instruction count", to check that a change
#         leaves the machine code as it was.
set -euo pipefail
source "$(dirname "$0")/evotune_path.sh"
command -v cuobjdump >/dev/null && command -v nvdisasm >/dev/null ||
  { echo "sass.sh: cuobjdump and nvdisasm (CUDA toolkit) are not both on PATH" >&2; exit 2; }
CFG=${1:?usage: tools/sass.sh CONFIG [SHAPE]}
SHAPE=${2:-8192,1024,8192}
KERNEL=${KERNEL:-gemm_sm90}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$root" || exit 2  # a spec path in KERNEL is relative to the repository root
if ! EVOTUNE_CACHE_DIR=$dir/cache "$EVOTUNE" --db "$dir/s.db" run -q --kernel "$KERNEL" --shape "$SHAPE" \
  --dtype "${DTYPE:-bf16}" --compile-only --arch "${ARCH:-sm_90a}" --strategy exhaustive --budget 1 --config "$CFG" \
  >"$dir/run.log" 2>&1; then
  cat "$dir/run.log" >&2
  exit 1
fi
found=0
while IFS= read -r f; do
  s=$(cuobjdump -sass "$f")
  if ! grep -qE 'Function : .*_reference$' <<<"$s"; then
    if [ "${SASS_HASH:-0}" = 1 ]; then
      ins=$(grep -E '^\s+/\*[0-9a-f]+\*/' <<<"$s" | sed 's/ *;.*//')
      echo "$(md5sum <<<"$ins" | cut -c1-32) $(grep -oE 'Function : \S+' <<<"$s" | head -1 | cut -d' ' -f3) $(wc -l <<<"$ins")"
    else
      printf '%s\n' "$s"
    fi >>"$dir/out"
    found=1
  fi
done < <(find "$dir/cache" -name '*.cubin')
if [ $found = 0 ]; then
  echo "sass.sh: no cubin was built (the config may be rejected):" >&2
  cat "$dir/run.log" >&2
  exit 1
fi
if [ "${SASS_HASH:-0}" = 1 ]; then sort "$dir/out"; else cat "$dir/out"; fi
