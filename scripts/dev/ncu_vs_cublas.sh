#!/usr/bin/env bash
# Developer script for a lent GPU host: Nsight Compute on cuBLAS's kernel and
# on gemm_sm90 configs at one shape, same sections, one report each in
# $OUT/ncu-cublas.txt and $OUT/ncu-<i>.txt. SHAPE=M,N,K; CONFIGS="cfg ...".
source "$(dirname "$0")/env.sh"
SHAPE=${SHAPE:-8192,1024,8192}
IFS=, read -r M N K <<<"$SHAPE"
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section LaunchStats --metrics sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes_read.sum${METRICS:+,$METRICS})
cat >/tmp/mm.py <<PY
import torch
a = torch.randn($M, $K, device="cuda", dtype=torch.bfloat16)
b = torch.randn($K, $N, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
torch.cuda.synchronize()
PY
timeout 120 ncu --clock-control none -k regex:'nvjet|gemm|cutlass' --launch-skip 2 -c 1 "${SECTIONS[@]}" python3 /tmp/mm.py \
  >"$OUT/ncu-cublas.txt" 2>&1
echo "cublas rc=$?"
i=0
for cfg in ${CONFIGS:-BLOCK_N=256,PRODUCER=1,STAGES=4,SWIZZLE=4 BLOCK_N=256,PRODUCER=1,STAGES=4,SWIZZLE=4,CLUSTER_N=2}; do
  i=$((i + 1))
  timeout 150 ncu --clock-control none --target-processes all -k regex:'^gemm_sm90$' -c 1 "${SECTIONS[@]}" \
    "$B/evotune" --db "$OUT/ncu.db" run -q --kernel gemm_sm90 --shape "$SHAPE" --dtype bf16 --strategy exhaustive \
    --budget 1 --config "$cfg" --samples 3 --warmup-ms 0 --busy-warmup-ms 0 --timeout 300 --retime 0 \
    >"$OUT/ncu-$i.txt" 2>&1
  echo "$i rc=$? $cfg"
done
