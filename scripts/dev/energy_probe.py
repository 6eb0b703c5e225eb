#!/usr/bin/env python3
"""Developer probe for a lent GPU host: energy per GEMM, evotune winners against cuBLAS.

Big GEMMs run at the board's power limit, where a kernel's speed is set by the
energy it spends per GEMM rather than by its cycles. For each evotune run given
(its winner, exported as in bench/side_by_side.py) and for cuBLAS on the same
inputs, this launches the kernel back to back for --seconds, in --rounds rotated
rounds, and reads the board's energy counter (NVML) and SM clock around it:
energy per GEMM (mJ), time per GEMM (us), mean power (W) and clock (MHz).

    scripts/dev/energy_probe.py --evotune .device-build/evotune --db b.db --runs 1,2 --shape 8192,1024,8192
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import torch  # noqa: E402
import side_by_side as sbs  # noqa: E402

nvml = ctypes.CDLL("libnvidia-ml.so.1")


def nvml_check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: NVML error {r}")


nvml_check(nvml.nvmlInit_v2(), "nvmlInit")
dev = ctypes.c_void_p()
nvml_check(nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)), "nvmlDeviceGetHandleByIndex")


def energy_mj():
    e = ctypes.c_ulonglong()
    nvml_check(nvml.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(e)), "nvmlDeviceGetTotalEnergyConsumption")
    return e.value


def sm_clock():
    c = ctypes.c_uint()
    nvml_check(nvml.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(c)), "nvmlDeviceGetClockInfo")
    return c.value


def measure(fn, seconds):
    for _ in range(20):  # warm-up
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    est = (time.perf_counter() - t) / 20
    n = max(50, int(seconds / est))
    clocks = []
    torch.cuda.synchronize()
    e0, t0 = energy_mj(), time.perf_counter()
    for i in range(n):
        fn()
        if i % 100 == 99:
            clocks.append(sm_clock())
    torch.cuda.synchronize()
    e1, t1 = energy_mj(), time.perf_counter()
    return {"mj": (e1 - e0) / n, "us": (t1 - t0) / n * 1e6, "w": (e1 - e0) / (t1 - t0) / 1e3,
            "mhz": sum(clocks) / max(1, len(clocks))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", default=".device-build/evotune")
    ap.add_argument("--db", required=True)
    ap.add_argument("--runs", required=True, help="comma-separated run ids whose winners to compare")
    ap.add_argument("--shape", default="8192,1024,8192")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    M, N, K = (int(x) for x in args.shape.split(","))
    fns, names = [], []
    A = B = None
    for run in args.runs.split(","):
        doc = sbs.json.loads(sbs.evotune(args, "export", run, "--format", "launch"))
        p = doc["problems"][0]
        t = sbs.make_tensors(p, {} if A is None else {"A": A, "B": B})
        A, B = t["A"], t["B"]
        fns.append(sbs.TunedKernel(doc, p, t))
        cfg = doc["config"]
        names.append(f"run {run}: " + ",".join(f"{k}={v}" for k, v in sorted(cfg.items())))
    a, b = A.view(M, K), B.view(K, N)
    fns.append(lambda: a @ b)
    names.append("cuBLAS")
    res = {i: [] for i in range(len(fns))}
    for r in range(args.rounds):
        order = list(range(len(fns)))
        order = order[r % len(fns):] + order[:r % len(fns)]
        for i in order:
            res[i].append(measure(fns[i], args.seconds))
    flops = 2 * M * N * K
    print(f"{'':4} {'mJ/GEMM':>8} {'us/GEMM':>8} {'W':>6} {'MHz':>6} {'TFLOP/s':>8} {'pJ/FLOP':>8}  kernel")
    base = None
    for i, name in enumerate(names):
        m = {k: sorted(x[k] for x in res[i])[len(res[i]) // 2] for k in ("mj", "us", "w", "mhz")}
        base = m if base is None else base
        print(f"{i:4} {m['mj']:8.2f} {m['us']:8.1f} {m['w']:6.0f} {m['mhz']:6.0f} {flops / m['us'] / 1e6:8.1f} "
              f"{m['mj'] * 1e9 / flops:8.3f}  {name}")
        per_round = " ".join(format(x["mj"], ".2f") for x in res[i])
        print(f"{'':4} rounds mJ: {per_round}")


if __name__ == "__main__":
    main()
