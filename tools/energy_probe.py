#!/usr/bin/env python3
"""Energy per GEMM: tuned GEMM kernels against cuBLAS, at the board's power limit.

Big GEMMs run at the board's power limit, where a kernel's speed is set by the
energy it spends per GEMM rather than by its cycles. For the winner of each
evotune run given (loaded from its launch export as bench/side_by_side.py
does) and for cuBLAS (torch.matmul) on the same inputs, this launches the
kernel back to back for --seconds, no L2 flush, in --rounds rotated rounds,
and reads the board's energy counter and SM clock (NVML) around it.

Needs:  a CUDA GPU that runs the kernels, its NVML library (libnvidia-ml.so.1,
        with the driver); PyTorch; an evotune binary (--evotune, else
        $EVOTUNE, else build/evotune); a database (--db) with the runs, or
        --config to make them: each config becomes a one-trial run of --kernel
        at --shape (exhaustive strategy) in --db before the probe.
Run:    tools/energy_probe.py --db bench.db --runs 1,2 --shape 8192,1024,8192
        tools/energy_probe.py --db /tmp/energy.db --shape 8192,1024,8192 \
            --config BLOCK_N=256,PERSISTENT=1 --config BLOCK_N=256,PERSISTENT=1,STAGES=3
Prints: one line per kernel (the runs', then cuBLAS): median over rounds of
        mJ per GEMM, us per GEMM, mean power (W), mean SM clock (MHz), TFLOP/s
        and pJ per FLOP, with the run's config; under it the mJ of each round.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from evotune_path import evotune_binary  # noqa: E402
import torch  # noqa: E402
import side_by_side as sbs  # noqa: E402

nvml = None
dev = ctypes.c_void_p()


def nvml_check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: NVML error {r}")


def nvml_init():
    """NVML's handle of device 0, the one PyTorch and the tuned kernels use (mind CUDA_VISIBLE_DEVICES)."""
    global nvml
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    nvml_check(nvml.nvmlInit_v2(), "nvmlInit")
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


def tune_one(args, cfg):
    """A one-trial run of cfg at --shape in --db; its run id."""
    cmd = [args.evotune, "--db", args.db, "run", "-q", "--kernel", args.kernel, "--shape", args.shape,
           "--dtype", args.dtype, "--strategy", "exhaustive", "--budget", "1", "--config", cfg]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    with sbs.sqlite3.connect(f"file:{args.db}?mode=ro", uri=True) as db:
        return db.execute("SELECT MAX(run_id) FROM v_runs").fetchone()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", help="evotune binary (default: $EVOTUNE, else build/evotune)")
    ap.add_argument("--db", required=True)
    ap.add_argument("--runs", help="comma-separated run ids whose winners to compare")
    ap.add_argument("--config", action="append", default=[],
                    help="a config to run first as a one-trial run of --kernel (repeatable)")
    ap.add_argument("--kernel", default="gemm_sm90", help="with --config: the GEMM template (default gemm_sm90)")
    ap.add_argument("--dtype", default="bf16", help="with --config (default bf16)")
    ap.add_argument("--shape", default="8192,1024,8192", help="M,N,K of the runs")
    ap.add_argument("--seconds", type=float, default=1.0, help="back-to-back launches per kernel per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    args.evotune = evotune_binary(args.evotune)
    runs = args.runs.split(",") if args.runs else []
    runs += [str(tune_one(args, c)) for c in args.config]
    if not runs:
        ap.error("give --runs or --config")
    nvml_init()
    M, N, K = (int(x) for x in args.shape.split(","))
    fns, names = [], []
    A = B = None
    for run in runs:
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
