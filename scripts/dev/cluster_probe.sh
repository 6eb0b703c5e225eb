#!/usr/bin/env bash
# Developer script for a lent GPU host: gemm_sm90 cluster (TMA multicast)
# configs against the same configs without a cluster.
#   1. interleaved timing (exhaustive run of the listed configs, re-timed);
#   2. Nsight Compute on each config (launch statistics, occupancy, speed of
#      light), one report per config in $OUT/ncu-*.txt.
# Needs prebuilt binaries in .device-build/. NCU=0 skips step 2.
source "$(dirname "$0")/env.sh"
S1=${S1:-8192,1024,8192}
S2=${S2:-16384,128,4096}
C1=(${C1:-BLOCK_N=256,PRODUCER=1,STAGES=4,SWIZZLE=4
        BLOCK_N=256,PRODUCER=1,STAGES=4,SWIZZLE=4,CLUSTER_N=2
        BLOCK_M=256,BLOCK_N=128,PRODUCER=1,STAGES=4,SWIZZLE=4
        BLOCK_M=256,BLOCK_N=128,PRODUCER=1,STAGES=4,SWIZZLE=4,CLUSTER_N=2})
C2=(${C2:-BLOCK_N=128,PRODUCER=1,STAGES=6,SWIZZLE=4
        BLOCK_N=128,PRODUCER=1,STAGES=6,SWIZZLE=4,CLUSTER_M=2})
run_set() {  # shape, configs...
  local shape=$1; shift
  local args=()
  for c in "$@"; do args+=(--config "$c"); done
  timeout 200 "$B/evotune" --db "$OUT/probe.db" run -q --kernel gemm_sm90 --shape "$shape" --dtype bf16 \
    --strategy exhaustive --budget $# --elites $# --retime 5 "${args[@]}"
  "$B/evotune" --db "$OUT/probe.db" top last 2>&1 | head -$(($# + 4))
}
echo "=== timing $S1"; run_set "$S1" "${C1[@]}"
echo "=== timing $S2"; run_set "$S2" "${C2[@]}"
[ "${NCU:-1}" = 0 ] && exit 0
i=0
for pair in "${C2[@]/#/$S2:}" "${C1[@]/#/$S1:}"; do
  shape=${pair%%:*}; cfg=${pair#*:}; i=$((i + 1))
  echo "=== ncu $i $shape $cfg"
  timeout 150 ncu --clock-control none --target-processes all -k regex:'^gemm_sm90$' -c 12 \
    --section SpeedOfLight --section LaunchStats --section Occupancy \
    --metrics sm__cycles_active.avg,sm__cycles_elapsed.max,dram__bytes_read.sum,lts__t_bytes.sum \
    "$B/evotune" --db "$OUT/ncu.db" run -q --kernel gemm_sm90 --shape "$shape" --dtype bf16 --strategy exhaustive \
    --budget 1 --config "$cfg" --samples 3 --warmup-ms 0 --busy-warmup-ms 0 --timeout 300 --retime 0 \
    >"$OUT/ncu-$i.txt" 2>&1
  echo "rc=$? $(grep -c 'gemm_sm90' "$OUT/ncu-$i.txt") kernel lines"
done
