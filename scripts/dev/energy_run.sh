#!/usr/bin/env bash
# Developer script for a lent GPU host: one single-config evotune run per
# config (SHAPE, CONFIGS), then scripts/dev/energy_probe.py on their winners
# against cuBLAS, then Nsight Compute (L2/DRAM bytes, instructions) on the
# first NCU_N configs. Needs prebuilt binaries in .device-build/.
source "$(dirname "$0")/env.sh"
SHAPE=${SHAPE:-8192,1024,8192}
DB=$OUT/energy.db
read -r -a CFGS <<<"${CONFIGS:?list of configs}"
runs=()
for c in "${CFGS[@]}"; do
  timeout 120 "$B/evotune" --db "$DB" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 --strategy exhaustive \
    --budget 1 --config "$c" || echo "run failed: $c"
  runs+=("$("$B/evotune" --db "$DB" runs 2>/dev/null | awk 'NR==2{print $1}')")
done
python3 scripts/dev/energy_probe.py --evotune "$B/evotune" --db "$DB" --shape "$SHAPE" \
  --runs "$(IFS=,; echo "${runs[*]}")" --seconds "${SECONDS_PER:-1}" --rounds "${ROUNDS:-3}"
for ((i = 0; i < ${NCU_N:-0} && i < ${#CFGS[@]}; ++i)); do
  timeout 150 ncu --clock-control none --target-processes all -k regex:'^gemm_sm90$' -s 12 -c 1 --section SpeedOfLight \
    --metrics lts__t_bytes.sum,dram__bytes_read.sum,smsp__inst_executed.sum,sm__cycles_active.avg \
    "$B/evotune" --db "/tmp/ncu-$i.db" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 --strategy exhaustive \
    --budget 1 --config "${CFGS[$i]}" --samples 30 --warmup-ms 0 --busy-warmup-ms 0 --timeout 300 --retime 0 \
    >"$OUT/ncu-$i.txt" 2>&1
  echo "=== ncu ${CFGS[$i]}"
  grep -E "Duration|SM Frequency|lts__t_bytes|dram__bytes_read|smsp__inst_executed|Compute \(SM\)" "$OUT/ncu-$i.txt"
done
