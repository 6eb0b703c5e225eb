#!/usr/bin/env bash
# Developer script for a lent GPU host: exports of the demo runs compiled into
# the example programs, the throughput benchmark, the fault-injection run, and
# an exhaustive sdpa_fwd sweep recorded as a dataset. Needs $DEMO_DB (a copy of
# the demo database) and prebuilt binaries in .device-build/.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
export EVOTUNE_CACHE_DIR=/tmp/evotune-cache
OUT=${OUT:-/tmp/out}
echo "=== exports into the example programs"
"$B/evotune" --db "$DEMO_DB" export 1 -o "$OUT/sdpa_best.h" && "$B/evotune" --db "$DEMO_DB" export 2 -o "$OUT/gemm_best.h"
cmake -S examples -B /tmp/ex -DEVOTUNE_SDPA_HEADER="$OUT/sdpa_best.h" -DEVOTUNE_GEMM_HEADER="$OUT/gemm_best.h" >/dev/null &&
  cmake --build /tmp/ex -j 16 2>&1 | grep -E "error|warning" ; /tmp/ex/sdpa_tuned; /tmp/ex/sdpa_tuned 1 3 777; /tmp/ex/gemm_tuned; /tmp/ex/gemm_tuned 1000 3000 500
echo "=== throughput"
bench/throughput.sh "$B/evotune"
echo "=== fault injection"
"$B/evotune" --db "$OUT/faults.db" run --kernel tests/data/faulty/spec.toml --strategy exhaustive --budget 33 --timeout 5 -q
"$B/evotune" --db "$OUT/faults.db" trials last | cut -c1-170
echo "=== sdpa sweep"
/usr/bin/time -f "sweep wall %e s" "$B/evotune" --db "$OUT/sweep.db" run --kernel sdpa_fwd --shape 2,8,512,64 --dtype fp16 \
  --strategy exhaustive --budget ${SWEEP:-6000} --samples 30 --warmup-ms 5 --retime 0 --timeout 10 -q
"$B/evotune" --db "$OUT/sweep.db" export last --format dataset -o "$OUT/sdpa_fwd_h200.json"
"$B/evotune" --db "$OUT/sweep.db" runs
