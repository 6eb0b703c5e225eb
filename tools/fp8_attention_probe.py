#!/usr/bin/env python3
"""What PyTorch offers for FP8 (e4m3) attention on this GPU, and whether its output can be trusted.

Prints the schema of aten::_scaled_dot_product_cudnn_attention (cuDNN's
attention, the op that accepts e4m3 tensors), calls it on e4m3 inputs (B=2,
H=8, S=512, D=64 from N(0,1), causal and not) and compares its output with fp32
attention on the same dequantized inputs: NaN share, largest |output|, largest
error. Also tries scaled_dot_product_attention on the cuDNN backend with e4m3.
Needs PyTorch with CUDA on a GPU host; no evotune binary. Run:
    python3 tools/fp8_attention_probe.py
"""
import math
import sys


def main():
    if "--help" in sys.argv:
        print(__doc__)
        return
    import torch
    print("PyTorch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), torch.cuda.get_device_name())
    print(torch.ops.aten._scaled_dot_product_cudnn_attention.default._schema)
    dev, B, H, S, D = "cuda", 2, 8, 512, 64
    g = torch.Generator(device=dev).manual_seed(1)
    q, k, v = (torch.randn(B, H, S, D, device=dev, generator=g) for _ in range(3))
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    for causal in (False, True):
        sc = q8.float() @ k8.float().transpose(-1, -2) / math.sqrt(D)
        if causal:
            sc = sc.masked_fill(torch.ones(S, S, device=dev, dtype=torch.bool).triu(1), float("-inf"))
        ref = torch.softmax(sc, -1) @ v8.float()
        try:
            o = torch.ops.aten._scaled_dot_product_cudnn_attention(q8, k8, v8, None, False, 0.0, causal, False,
                                                                   scale=1 / math.sqrt(D))[0].float()
            print(f"cudnn op, causal={causal}: output {o.dtype}, NaN share {o.isnan().float().mean().item():.4f}, "
                  f"max |o| {o.nan_to_num().abs().max().item():.4g} (fp32 ref {ref.abs().max().item():.3g}), "
                  f"max error where finite {(o - ref).nan_to_num(0).abs().max().item():.4g}")
        except Exception as e:  # noqa: BLE001
            print(f"cudnn op, causal={causal}: failed: {str(e).splitlines()[0][:300]}")
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            torch.nn.functional.scaled_dot_product_attention(q8, k8, v8)
        print("scaled_dot_product_attention on cuDNN with e4m3: ran")
    except Exception as e:  # noqa: BLE001
        print("scaled_dot_product_attention on cuDNN with e4m3: refused:", str(e).splitlines()[0][:200])


if __name__ == "__main__":
    main()
