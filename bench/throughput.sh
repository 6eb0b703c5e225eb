#!/usr/bin/env bash
# Tuner throughput on a GPU host: the same 128-trial sdpa_fwd run with a cold
# compile cache, a warm one, and a cold one with a single compile thread.
# Prints wall time, trials/minute, the GPU-busy and compile-busy shares and
# the compile-cache hits. The random strategy proposes the same configs for a
# seed whatever the timings (evo follows the measurements, which differ run
# to run), so the warm pass finds every config of the cold pass cached.
#   [STRATEGY=evo] [SKIP_SINGLE=1] bench/throughput.sh [path/to/evotune] [extra run args...]
set -euo pipefail
EVOTUNE=${1:-./build/evotune}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(run --kernel sdpa_fwd --shape 2,8,512,64 --dtype fp16 --budget 128 --seed 1 --strategy "${STRATEGY:-random}" "$@")
printf "%-28s %8s %10s %9s %13s %11s %11s\n" variant "wall s" trials/min "GPU busy" "compile busy" "cache hits" \
  "search/min"
one() {  # name cache-dir extra-args...
  local name=$1 cache=$2
  shift 2
  local log=$work/$name.log
  EVOTUNE_CACHE_DIR=$cache "$EVOTUNE" --db "$work/$name.db" "${args[@]}" "$@" >"$log" 2>&1
  local line wall search
  line=$(grep -E "^time: " "$log")
  wall=$(grep -E "^run [0-9]+ done: " "$log" | grep -oE "[0-9]+ trials in [0-9.]+ s" | grep -oE "[0-9.]+ s" | tr -d ' s')
  search=$(grep -E "^search: " "$log" || true)  # the search alone, without the elites' re-timing after it
  printf "%-28s %8s %10s %9s %13s %11s %11s\n" "$name" "$wall" "$(grep -oE '[0-9.]+ trials/min' <<<"$line" | cut -d' ' -f1)" \
    "$(grep -oE 'GPU busy [0-9]+%' <<<"$line" | cut -d' ' -f3)" "$(grep -oE 'compile pool busy [0-9]+%' <<<"$line" | cut -d' ' -f4)" \
    "$(grep -oE '[0-9]+ cache hits' <<<"$line" | cut -d' ' -f1)" "$(grep -oE '[0-9.]+ trials/min' <<<"$search" | cut -d' ' -f1)"
}
one "cold cache, $(nproc) threads" "$work/cache"
one "warm cache, $(nproc) threads" "$work/cache"
[ -n "${SKIP_SINGLE:-}" ] || one "cold cache, 1 thread" "$work/cache1" -j 1
