#!/usr/bin/env bash
# Developer script for a lent GPU host: gemm_sm90 with stream-K (PERSISTENT=2)
# tuned on the issue-4 shapes it applies to, the side-by-side GEMM table
# against cuBLAS, and the names of the kernels cuBLAS ran (its tile shapes).
# Needs prebuilt binaries in .device-build/ and, optionally, an earlier
# bench.db there (runs of the other shapes).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/.device-build
OUT=${OUT:-/tmp/out}
export EVOTUNE_CACHE_DIR=/tmp/evc
DB=$OUT/bench.db
[ -f "$B/bench.db" ] && cp "$B/bench.db" "$DB" && chmod u+w "$DB"
for shape in ${SHAPES:-8192,1024,8192:400 16384,128,4096:300 4096,4096,4096:300 1000,3000,500:200}; do
  timeout 200 "$B/evotune" --db "$DB" run -q --kernel gemm_sm90 --shape ${shape%%:*} --dtype bf16 --budget ${shape##*:} \
    --seed 11 --config PERSISTENT=2 --config PERSISTENT=2,REG_SPLIT=1 | grep -E "^run|^time|PERSISTENT" | head -8
done
python3 bench/side_by_side.py --evotune "$B/evotune" --db "$DB" --anchors --only gemm --rep 500 --json "$OUT/gemm_side.json"
python3 - <<'PY'
import torch
from torch.profiler import profile, ProfilerActivity
for M, N, K in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 1024, 8192), (1000, 3000, 500), (16384, 128, 4096)]:
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    A @ B
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        A @ B
        torch.cuda.synchronize()
    names = {e.key for e in p.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA}
    print(f"cuBLAS {M}x{N}x{K}: {' | '.join(sorted(names))}")
PY
