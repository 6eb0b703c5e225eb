#!/usr/bin/env bash
# gemm_sm90 configs under the microscope at one shape: timed against each
# other, then profiled with Nsight Compute, beside cuBLAS's kernel.
#   1. the configs timed interleaved: one exhaustive run of exactly these
#      configs, re-timed over RETIME rounds (its elite table is printed);
#   2. Nsight Compute on cuBLAS's kernel at the shape (torch.matmul; CUBLAS=0
#      skips it): $OUT/ncu-cublas.txt;
#   3. Nsight Compute on each of the first NCU_N configs, one launch after 12
#      timed ones: speed of light, warp states, launch statistics, occupancy,
#      L2/DRAM bytes ($OUT/ncu-N.txt) and the warp-state samples per SASS
#      instruction, i.e. where the warps wait ($OUT/src-N.csv).
#
# Needs:  a Hopper GPU; Nsight Compute (ncu) on PATH, with access to the
#         performance counters; PyTorch for step 2; an evotune binary:
#         $EVOTUNE, default build/evotune (scripts/bootstrap.sh builds it).
# Run:    SHAPE=8192,1024,8192 CONFIGS="BLOCK_N=256,PRODUCER=1,STAGES=4 BLOCK_N=256,PRODUCER=1,STAGES=4,CLUSTER_N=2" \
#           tools/ncu_gemm.sh
#         SHAPE (M,N,K, default 8192,1024,8192), CONFIGS (space-separated,
#         required), NCU_N (default 2), RETIME (default 8), METRICS (extra
#         ncu metrics, comma-separated), OUT (default /tmp/evotune-ncu).
# Prints: the configs' elite table (interleaved re-timing), then per profiled
#         kernel the lines of its report with duration, SM frequency,
#         throughput, L2 and DRAM bytes and warp cycles per issued instruction.
set -uo pipefail
source "$(dirname "$0")/evotune_path.sh"
command -v ncu >/dev/null || { echo "ncu_gemm.sh: Nsight Compute (ncu) is not on PATH" >&2; exit 2; }
read -r -a CFGS <<<"${CONFIGS:?CONFIGS=\"cfg1 cfg2 ...\": the gemm_sm90 configs to compare}"
SHAPE=${SHAPE:-8192,1024,8192}
NCU_N=${NCU_N:-2}
OUT=${OUT:-/tmp/evotune-ncu}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root" || exit 2
SECTIONS=(--section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy
          --metrics "sm__cycles_active.avg,lts__t_sectors_op_read.sum,lts__t_bytes.sum,dram__bytes_read.sum${METRICS:+,$METRICS}")
summary() {  # report.txt
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|lts__t_sectors_op_read|lts__t_bytes|dram__bytes_read|Warp Cycles Per Issued" \
    "$1" | head -12
}

echo "=== timing $SHAPE"
args=()
for c in "${CFGS[@]}"; do args+=(--config "$c"); done
timeout 300 "$EVOTUNE" --db "$OUT/ncu_gemm.db" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 \
  --strategy exhaustive --budget ${#CFGS[@]} --elites ${#CFGS[@]} --retime "${RETIME:-8}" "${args[@]}"
"$EVOTUNE" --db "$OUT/ncu_gemm.db" top last 2>&1 | head -$((${#CFGS[@]} + 4))

if [ "${CUBLAS:-1}" != 0 ]; then
  echo "=== ncu cuBLAS $SHAPE"
  IFS=, read -r M N K <<<"$SHAPE"
  cat >"$work/mm.py" <<PY
import torch
a = torch.randn($M, $K, device="cuda", dtype=torch.bfloat16)
b = torch.randn($K, $N, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
torch.cuda.synchronize()
PY
  timeout 150 ncu --clock-control none -k regex:'nvjet|gemm|cutlass' --launch-skip 2 -c 1 "${SECTIONS[@]}" \
    python3 "$work/mm.py" >"$OUT/ncu-cublas.txt" 2>&1
  echo "rc=$? ($OUT/ncu-cublas.txt)"
  grep -m1 -E "^  [a-zA-Z_].*\(" "$OUT/ncu-cublas.txt"  # the kernel's name
  summary "$OUT/ncu-cublas.txt"
fi

for ((i = 0; i < NCU_N && i < ${#CFGS[@]}; ++i)); do
  cfg=${CFGS[$i]}
  echo "=== ncu $i $cfg"
  timeout 200 ncu --clock-control none --target-processes all -k regex:'^gemm_sm90$' -s 12 -c 1 \
    "${SECTIONS[@]}" --section SourceCounters -o "$work/rep-$i" -f \
    "$EVOTUNE" --db "$work/ncu-$i.db" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 --strategy exhaustive \
    --budget 1 --config "$cfg" --samples 30 --warmup-ms 0 --busy-warmup-ms 0 --timeout 300 --retime 0 \
    --sanitize none >"$work/run-$i.log" 2>&1
  rc=$?
  echo "rc=$rc ($OUT/ncu-$i.txt, $OUT/src-$i.csv)"
  [ $rc = 0 ] || tail -5 "$work/run-$i.log"
  ncu -i "$work/rep-$i.ncu-rep" --page details >"$OUT/ncu-$i.txt" 2>&1
  ncu -i "$work/rep-$i.ncu-rep" --page source --csv --print-source sass >"$OUT/src-$i.csv" 2>"$work/src-$i.err" ||
    echo "source page failed: $(head -3 "$work/src-$i.err")"
  summary "$OUT/ncu-$i.txt"
done
