#!/usr/bin/env python3
"""Vendor baselines on this GPU: PyTorch's attention backends (flash,
efficient, cuDNN, math) and cuBLAS matmul. "us" is measured like
../shared/ANCHORS.md, with triton's do_bench (median of CUDA-event times, L2
flushed between repetitions, launch included); "kernel_us" is the median
kernel time from CUPTI, L2 flushed before each call, launch excluded (see
side_by_side.py's timing notes and kernel_time.py).

    bench/torch_baselines.py --sdpa 2,8,512,64 --gemm 4096,4096,4096 --dtype fp16

Prints one JSON object per measurement."""
import argparse
import json
import os
import statistics
import sys

os.environ.setdefault("KINETO_LOG_LEVEL", "4")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton.testing as tt  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_time import KernelTimer  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def shape(text):
    return tuple(int(x) for x in text.split(","))


def kernel_us(timer, fn, event_ms, rep_ms):
    """Median CUPTI kernel time of fn (us) over about rep_ms of GPU time, 10 to 200 calls."""
    calls = max(10, min(200, int(rep_ms / (event_ms + timer.flush_us / 1e3))))
    return statistics.median(c.kernel_us for c in timer.run([fn], calls)[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdpa", type=shape, action="append", default=[], help="B,H,S,D (repeatable)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--gemm", type=shape, action="append", default=[], help="M,N,K (repeatable)")
    ap.add_argument("--dtype", choices=DTYPES, default="fp16")
    ap.add_argument("--rep", type=int, default=200, help="do_bench repetition time, ms")
    a = ap.parse_args()
    dt = DTYPES[a.dtype]
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()}))
    timer = KernelTimer()
    for (B, H, S, D) in a.sdpa:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(3))
        flops = 4 * B * H * S * S * D / (2 if a.causal else 1)
        for name, backend in BACKENDS.items():
            if name == "math" and B * H * S * S * 4 > 2**33:
                continue
            try:
                with sdpa_kernel([backend]):
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
                    f()
                    torch.cuda.synchronize()
                    ms = tt.do_bench(f, warmup=25, rep=a.rep, return_mode="median")
                    ku = kernel_us(timer, f, ms, a.rep)
                print(json.dumps({"op": "sdpa", "backend": name, "shape": [B, H, S, D], "causal": a.causal,
                                  "dtype": a.dtype, "us": round(ms * 1e3, 2),
                                  "tflops": round(flops / (ms * 1e-3) / 1e12, 1), "kernel_us": round(ku, 2),
                                  "kernel_tflops": round(flops / (ku * 1e-6) / 1e12, 1)}))
            except Exception as e:  # a backend that does not support the shape
                print(json.dumps({"op": "sdpa", "backend": name, "shape": [B, H, S, D], "error": str(e)[:100]}))
    for (M, N, K) in a.gemm:
        x = torch.randn(M, K, device="cuda", dtype=dt)
        y = torch.randn(K, N, device="cuda", dtype=dt)
        ms = tt.do_bench(lambda: x @ y, warmup=25, rep=a.rep, return_mode="median")
        ku = kernel_us(timer, lambda: x @ y, ms, a.rep)
        print(json.dumps({"op": "gemm", "backend": "cublas", "shape": [M, N, K], "dtype": a.dtype,
                          "us": round(ms * 1e3, 2), "tflops": round(2 * M * N * K / (ms * 1e-3) / 1e12, 1),
                          "kernel_us": round(ku, 2), "kernel_tflops": round(2 * M * N * K / (ku * 1e-6) / 1e12, 1)}))


if __name__ == "__main__":
    main()
