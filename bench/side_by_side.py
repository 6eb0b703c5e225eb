#!/usr/bin/env python3
"""evotune's tuned kernels against the vendors', side by side in one process.

For each shape it takes the winner of a finished evotune run from the database
(or tunes one with `evotune run`), loads its cubin through the CUDA driver
into PyTorch's context, feeds it the same input tensors as PyTorch, checks its
output against PyTorch, and times both with triton's do_bench (median, L2
flushed between repetitions). Baselines: cuBLAS (torch.matmul) for GEMM;
PyTorch's flash, efficient, cuDNN and math attention backends for sdpa_fwd.

    bench/side_by_side.py --evotune build/evotune --db bench.db --anchors --tune-budget 96
    bench/side_by_side.py --evotune build/evotune --db bench.db --gemm 4096,4096,4096 --kernel gemm_sm90
"""
import argparse
import base64
import ctypes
import json
import math
import sqlite3
import subprocess
import sys

import torch
import torch.nn.functional as F
import triton.testing as tt
from torch.nn.attention import SDPBackend, sdpa_kernel

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
          "u32": torch.int32, "i32": torch.int32, "u8": torch.uint8}
# The shapes of ../shared/ANCHORS.md.
ANCHOR_GEMM = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 1024, 8192), (1000, 3000, 500), (16384, 128, 4096)]
ANCHOR_SDPA = [("fp16", s) for s in [(1, 8, 512, 64), (2, 8, 512, 64), (2, 8, 2048, 64), (8, 16, 2048, 64),
                                     (4, 16, 4096, 64), (4, 16, 4096, 128), (2, 16, 8192, 128), (16, 32, 512, 64)]] + \
              [("bf16", s) for s in [(2, 8, 512, 64), (4, 16, 4096, 128), (2, 16, 8192, 128)]]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}

cuda = ctypes.CDLL("libcuda.so.1")


def check(result, what):
    if result != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else result}")


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad, 64-byte value
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


TMAP_DTYPE = {"f16": 6, "bf16": 9, "f32": 7}
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
L2 = {0: 0, 64: 1, 128: 2, 256: 3}


class TunedKernel:
    """One problem of an `evotune export --format launch` document, bound to tensors."""

    def __init__(self, doc, problem, tensors):
        self.doc, self.p = doc, problem
        cubin = base64.b64decode(doc["cubins"][problem["cubin"]])
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        check(cuda.cuModuleLoadData(ctypes.byref(self.module), cubin), "cuModuleLoadData")
        check(cuda.cuModuleGetFunction(ctypes.byref(self.fn), self.module, doc["entry"].encode()), "cuModuleGetFunction")
        if problem["smem"] > 0:
            check(cuda.cuFuncSetAttribute(self.fn, 8, problem["smem"]), "cuFuncSetAttribute")
        self.keep, slots = [], []
        for a in problem["args"]:
            if a["kind"] in ("buffer", "scratch"):
                t = tensors[a["name"]]
                slots.append(ctypes.c_void_p(t.data_ptr()))
            elif a["kind"] == "scalar":
                slots.append(ctypes.c_float(a["value"]) if a["type"] == "f32" else
                             ctypes.c_int64(a["value"]) if a["type"] == "i64" else ctypes.c_int32(a["value"]))
            else:  # a TMA tensor map, 128 bytes
                m = (ctypes.c_uint64 * 16)()
                if a["enabled"]:
                    rank = len(a["dims"])
                    check(cuda.cuTensorMapEncodeTiled(
                        m, TMAP_DTYPE[a["elem"]], rank, ctypes.c_void_p(tensors[a["tensor"]].data_ptr()),
                        (ctypes.c_uint64 * rank)(*a["dims"]), (ctypes.c_uint64 * max(rank - 1, 1))(*a["strides_bytes"]),
                        (ctypes.c_uint32 * rank)(*a["box"]), (ctypes.c_uint32 * rank)(*([1] * rank)), 0,
                        SWIZZLE[a["swizzle"]], L2[a["l2_promotion"]], 1 if a["oob_nan"] else 0), "cuTensorMapEncodeTiled")
                slots.append(m)
        self.keep = slots
        self.params = (ctypes.c_void_p * len(slots))(*[ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in slots])
        self.attr = LaunchAttribute(id=4, x=problem["cluster"][0], y=problem["cluster"][1], z=problem["cluster"][2])
        clustered = problem["cluster"] != [1, 1, 1]
        self.cfg = LaunchConfig((ctypes.c_uint * 3)(*problem["grid"]), (ctypes.c_uint * 3)(*problem["block"]),
                                problem["smem"], None, ctypes.pointer(self.attr) if clustered else None,
                                1 if clustered else 0)

    def __call__(self):
        self.cfg.stream = torch.cuda.current_stream().cuda_stream
        check(cuda.cuLaunchKernelEx(ctypes.byref(self.cfg), self.fn, self.params, None), "cuLaunchKernelEx")


def make_tensors(problem, override):
    """Torch tensors for every buffer argument (inputs drawn like evotune draws them)."""
    out = {}
    for a in problem["args"]:
        if a["kind"] not in ("buffer", "scratch"):
            continue
        if a["name"] in override:
            out[a["name"]] = override[a["name"]]
            continue
        dt = DTYPES[a["elem"]]
        n = max(a["count"], 1)
        if a["kind"] == "scratch" or a["init"] == "zero":
            out[a["name"]] = torch.zeros(n, dtype=dt, device="cuda")
        elif a["init"] == "uniform":
            out[a["name"]] = ((torch.rand(n, device="cuda") * 2 - 1) * a["scale"]).to(dt)
        else:
            out[a["name"]] = (torch.randn(n, device="cuda") * a["scale"]).to(dt)
    return out


def evotune(args, *cmd):
    r = subprocess.run([args.evotune, "--db", args.db, *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"evotune {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def winner(args, kernel, shape_text, dtype):
    """The newest finished run of kernel on exactly this problem, tuned now if there is none."""
    want = f"{shape_text}"
    def find():
        try:
            db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
            rows = db.execute("SELECT run_id, shapes FROM v_runs WHERE kernel = ? AND dtype = ? AND status = 'done' "
                              "AND best_trial_id IS NOT NULL ORDER BY run_id DESC", (kernel, dtype)).fetchall()
        except sqlite3.Error:
            return None
        for run_id, shapes in rows:
            if shapes.split(",CAUSAL=0")[0] == want:
                return run_id
        return None
    run = find()
    if run is None:
        if args.tune_budget <= 0:
            raise SystemExit(f"no tuned {kernel} run for {want} {dtype} in {args.db} (use --tune-budget)")
        print(f"# tuning {kernel} {want} {dtype} ({args.tune_budget} trials)...", file=sys.stderr, flush=True)
        evotune(args, "run", "-q", "--kernel", kernel, "--problem", want, "--dtype", dtype, "--budget", str(args.tune_budget))
        run = find()
    return run, json.loads(evotune(args, "export", str(run), "--format", "launch"))


def bench(fns):
    """Median latency (us) of each function, timed interleaved: --rounds rounds,
    each timing every function for rep/rounds ms, in rotated order, so that
    clock and power drift (big GEMMs run at the power limit) reach all of them
    alike. Returns the median over rounds and each round's ratio to fns[0]."""
    rounds = max(1, args.rounds)
    per = {i: [] for i in range(len(fns))}
    for r in range(rounds):
        order = list(range(len(fns)))
        order = order[r % len(fns):] + order[:r % len(fns)]
        for i in order:
            per[i].append(tt.do_bench(fns[i], warmup=10, rep=max(10, args.rep // rounds), return_mode="median") * 1e3)
    med = [sorted(v)[len(v) // 2] for v in per.values()]
    ratios = [[per[i][r] / per[0][r] for r in range(rounds)] for i in range(len(fns))]
    return med, ratios


def spread(ratios):
    return f"{min(ratios):.2f}-{max(ratios):.2f}"


def gemm_case(args, M, N, K, dtype):
    run, doc = winner(args, args.kernel, f"M={M},N={N},K={K}", dtype)
    p = doc["problems"][0]
    t = make_tensors(p, {})
    A, B, C = t["A"].view(M, K), t["B"].view(K, N), t["C"].view(M, N)
    ours = TunedKernel(doc, p, t)
    ours()
    torch.cuda.synchronize()
    ref = A.float() @ B.float()
    err = ((C.float() - ref).norm() / ref.norm()).item()
    (us, cublas), (_, rounds) = bench([ours, lambda: A @ B])
    fl = 2 * M * N * K
    return {"op": "gemm", "shape": [M, N, K], "dtype": dtype, "run": run, "config": doc["config"], "ours_us": us,
            "ours_tflops": fl / us / 1e6, "rel_err": err, "cublas_us": cublas, "cublas_tflops": fl / cublas / 1e6,
            "vs_cublas": cublas / us, "vs_cublas_rounds": rounds}


def sdpa_case(args, dtype, Bn, H, S, D):
    run, doc = winner(args, "sdpa_fwd", f"B={Bn},H={H},S={S},D={D}", dtype)
    p = doc["problems"][0]
    t = make_tensors(p, {})
    q, k, v, o = (t[n].view(Bn, H, S, D) for n in ("Q", "K", "V", "O"))
    ours = TunedKernel(doc, p, t)
    ours()
    torch.cuda.synchronize()
    with sdpa_kernel([SDPBackend.MATH]):
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    err = ((o.float() - ref).norm() / ref.norm()).item()
    row = {"op": "sdpa", "shape": [Bn, H, S, D], "dtype": dtype, "run": run, "config": doc["config"], "rel_err": err}
    names, fns = ["ours"], [ours]
    for name, backend in BACKENDS.items():
        row[name + "_us"] = None
        if name == "math" and Bn * H * S * S * 2 > 2**33:
            continue

        def f(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v)
        try:
            f()
            torch.cuda.synchronize()
        except RuntimeError:
            continue  # the backend does not take this shape or type
        names.append(name)
        fns.append(f)
    med, ratios = bench(fns)
    for name, us, rs in zip(names, med, ratios):
        row[name + "_us"] = us
        if name != "ours":
            row["vs_" + name] = us / med[0]
            row["vs_" + name + "_rounds"] = rs
    fl = 4 * Bn * H * S * S * D
    row["ours_tflops"] = fl / row["ours_us"] / 1e6
    return row


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", default="build/evotune")
    ap.add_argument("--db", default="evotune.db")
    ap.add_argument("--kernel", default="gemm_sm90", help="GEMM template to compare (gemm or gemm_sm90)")
    ap.add_argument("--gemm", action="append", default=[], help="M,N,K (repeatable)")
    ap.add_argument("--sdpa", action="append", default=[], help="B,H,S,D (repeatable)")
    ap.add_argument("--dtype", default="bf16", help="for --gemm/--sdpa")
    ap.add_argument("--anchors", action="store_true", help="every shape of ANCHORS.md (GEMM bf16, attention fp16/bf16)")
    ap.add_argument("--only", choices=["gemm", "sdpa"], help="with --anchors: one kind")
    ap.add_argument("--tune-budget", type=int, default=0, help="tune shapes that have no run yet, with this budget")
    ap.add_argument("--rep", type=int, default=200, help="do_bench repetition time per function, ms (over all rounds)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved rounds: every function timed in each, rotated order (the 'rounds' column: "
                         "the lowest and highest per-round ratio)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    torch.zeros(1, device="cuda")  # PyTorch's context is current: cubins load into it
    gemms = [tuple(map(int, s.split(","))) for s in args.gemm]
    sdpas = [(args.dtype, tuple(map(int, s.split(",")))) for s in args.sdpa]
    if args.anchors:
        gemms += ANCHOR_GEMM if args.only in (None, "gemm") else []
        sdpas += ANCHOR_SDPA if args.only in (None, "sdpa") else []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    rows = []
    if gemms:
        print(f"\n{'GEMM ' + args.kernel:<28} {'ours us':>9} {'TFLOP/s':>8} {'cuBLAS us':>10} {'TFLOP/s':>8} {'vs cuBLAS':>9} "
              f"{'rounds':>10} {'rel err':>8}")
    for (M, N, K) in gemms:
        r = gemm_case(args, M, N, K, "bf16" if args.anchors else args.dtype)
        rows.append(r)
        label = f"{M}x{N}x{K} {r['dtype']}"
        print(f"{label:<28} {r['ours_us']:>9.1f} {r['ours_tflops']:>8.1f} "
              f"{r['cublas_us']:>10.1f} {r['cublas_tflops']:>8.1f} {r['vs_cublas']:>8.3f}x "
              f"{spread(r['vs_cublas_rounds']):>10} {r['rel_err']:>8.1e}", flush=True)
    if sdpas:
        print(f"\n{'attention (non-causal)':<28} {'ours us':>9} {'TFLOP/s':>8} {'flash':>8} {'cuDNN':>8} {'effic.':>8} {'math':>9} "
              f"{'vs flash':>8} {'vs cuDNN':>8} {'rel err':>8}")
    for dtype, (Bn, H, S, D) in sdpas:
        r = sdpa_case(args, dtype, Bn, H, S, D)
        rows.append(r)
        label = f"{dtype} {Bn},{H},{S},{D}"
        print(f"{label:<28} {r['ours_us']:>9.1f} {r['ours_tflops']:>8.1f} {fmt(r.get('flash_us'), '8.1f')} "
              f"{fmt(r.get('cudnn_us'), '8.1f')} {fmt(r.get('efficient_us'), '8.1f')} {fmt(r.get('math_us'), '9.1f')} "
              f"{fmt(r.get('vs_flash'), '7.2f')}x {fmt(r.get('vs_cudnn'), '7.2f')}x {r['rel_err']:>8.1e}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
