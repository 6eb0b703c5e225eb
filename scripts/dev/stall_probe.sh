#!/usr/bin/env bash
# Developer script for a lent GPU host: interleaved timing of a list of
# gemm_sm90 configs on one shape, then Nsight Compute warp-state sampling per
# SASS instruction for the first NCU_N of them ($OUT/src-N.csv: where the
# warps wait), plus the usual speed-of-light numbers ($OUT/ncu-N.txt).
# Needs prebuilt binaries in .device-build/.
#   SHAPE=8192,1024,8192 CONFIGS="cfg1 cfg2 ..." NCU_N=2 scripts/dev/stall_probe.sh
source "$(dirname "$0")/env.sh"
SHAPE=${SHAPE:-8192,1024,8192}
read -r -a CFGS <<<"${CONFIGS:?list of configs}"
NCU_N=${NCU_N:-2}
args=()
for c in "${CFGS[@]}"; do args+=(--config "$c"); done
echo "=== timing $SHAPE"
timeout 300 "$B/evotune" --db "$OUT/probe.db" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 \
  --strategy exhaustive --budget ${#CFGS[@]} --elites ${#CFGS[@]} --retime ${RETIME:-8} "${args[@]}"
"$B/evotune" --db "$OUT/probe.db" top last 2>&1 | head -$((${#CFGS[@]} + 4))
for ((i = 0; i < NCU_N && i < ${#CFGS[@]}; ++i)); do
  cfg=${CFGS[$i]}
  echo "=== ncu $i $cfg"
  timeout 200 ncu --clock-control none --target-processes all -k regex:'^gemm_sm90$' -s 12 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    --metrics sm__cycles_active.avg,lts__t_sectors_op_read.sum,lts__t_bytes.sum,dram__bytes_read.sum \
    -o "/tmp/rep-$i" -f \
    "$B/evotune" --db "/tmp/ncu-$i.db" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 --strategy exhaustive \
    --budget 1 --config "$cfg" --samples 30 --warmup-ms 0 --busy-warmup-ms 0 --timeout 300 --retime 0 >/dev/null 2>&1
  echo "rc=$?"
  ncu -i "/tmp/rep-$i.ncu-rep" --page details >"$OUT/ncu-$i.txt" 2>&1
  ncu -i "/tmp/rep-$i.ncu-rep" --page source --csv --print-source sass >"$OUT/src-$i.csv" 2>"$OUT/src-$i.err" ||
    echo "source page failed: $(head -3 "$OUT/src-$i.err")"
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|lts__t_sectors_op_read|lts__t_bytes|Warp Cycles Per Issued" "$OUT/ncu-$i.txt" | head -12
done
