#!/usr/bin/env python3
"""evotune's tuned kernels against the vendors', side by side in one process.

For each shape it takes the winner of a finished evotune run from the database
(or tunes one with `evotune run`), loads its cubin through the CUDA driver
into PyTorch's context, feeds it the same input tensors as PyTorch, checks its
output against PyTorch, and times it and the baselines on those inputs:
cuBLAS (torch.matmul) for GEMM; PyTorch's flash, efficient, cuDNN and math
attention backends for the attention templates (sdpa_fwd_sm90 on Hopper,
sdpa_fwd elsewhere; --sdpa-kernel picks one).

    bench/side_by_side.py --evotune build/evotune --db bench.db --anchors --only sdpa --tune-budget 64 --json sbs.json
    bench/side_by_side.py --evotune build/evotune --db bench.db --gemm 4096,4096,4096 --kernel gemm_sm90
    bench/side_by_side.py --evotune build/evotune --db bench.db --odd --tune-budget 96
    bench/side_by_side.py --evotune build/evotune --db bench.db --gemm 16,50257,4096,T --tune-budget 64   # x @ W.T
    bench/side_by_side.py --sdpa B=1,H=32,HKV=8,S=16,SKV=8192,D=128 --sdpa 2,8,2048,64 --tune-budget 64
    bench/side_by_side.py --fp8 B=2,H=8,S=512,D=64 --fp8 B=4,H=16,S=4096,D=128 --tune-budget 64

Attention problems are the templates' own: Q and O [B,H,S,D], K and V
[B,HKV,SKV,D] (HKV and SKV default to H and S), CAUSAL=1 aligned bottom-right.
PyTorch gets the same tensors: enable_gqa=True where HKV < H, is_causal=True
where S == SKV, and torch.nn.attention.bias.causal_lower_right(S, SKV) as the
mask where S != SKV (backends that refuse a case are listed as skipped). The
output is checked against the math backend in fp32 with the same mask.
--anchors adds, beside ANCHORS.md's shapes, their causal variants and rows
for grouped-query attention, a prefill against a longer cache and decode.

FP8 attention (--fp8, --fp8-anchors): our FP8 template (`sdpa_fp8_sm90`, wgmma,
on Hopper, with the mma.sync `sdpa_fp8` timed beside it as "mma8"; `sdpa_fp8`
elsewhere) on e4m3 Q, K, V drawn as evotune draws them (per-tensor descales
from its spec; DESCALE=1 adds per-head factors), O in bf16, against (each
where it runs on this PyTorch, and only if its output matches): cuDNN's FP8 attention (per-tensor descales:
`_scaled_dot_product_attention_quantized` with PER_TENSOR where PyTorch has
it, else the cuDNN frontend's `sdpa_fp8` where `import cudnn` works (the
nvidia-cudnn-frontend wheel; on Hopper its O is e4m3, dequantized after the
timed call); without either the row says so, not `_scaled_dot_product_cudnn_attention`,
which returns NaN on e4m3 tensors), FlashAttention-3's FP8 path (PER_HEAD, where FA3 can be activated),
and in bf16 on the dequantized inputs: our best 16-bit template tuned on the
same problem, PyTorch's flash (FA3 once an FP8 row has activated it for that
row: the JSON's "flash_impl") and cuDNN. Every output is compared with the
math backend in fp32 on the dequantized inputs; a contender whose relative
error passes --fp8-max-err is listed as wrong and not timed.

Timing method
-------------
Kernel time, the figure the tables and the ratios use: the device time of the
kernels a call launches, read from CUPTI's activity records (torch.profiler,
CUDA activity only; bench/kernel_time.py). The L2 is flushed (a 256 MB write)
before every call, and the contenders are interleaved call by call: flush, A,
flush, B, ... A call's kernel time is the time its kernels, memsets and copies
cover on the device, so the launch, host work (Python, the dispatcher, the
`sdpa_kernel` context, cuDNN's plan cache) and the gaps between a call's
kernels do not count; what the GPU spends computing the answer does, for one
kernel or several. Per round each contender gets the median of its calls
(`--calls` at most, fewer for slow rows: about `--rep` ms of GPU time per
contender over all rounds, never under 10 calls); its figure is the median
over rounds.

Why not CUDA graphs: the flush has to stay between calls to keep L2 cold, and
subtracting a ~70 us flush, which varies by a few percent, from a 10 us kernel
leaves noise of the kernel's own size; without the flush, the 1 MB inputs of
the small attention shapes stay in L2. Graph capture also depends on every
backend supporting it. CUPTI's durations need neither, and serve 5 us
attention kernels and 1.6 ms GEMMs alike.

Event time, kept beside it: triton's do_bench (median, L2 flushed, CUDA
events around each call), as this script measured before. It includes the
launch and, whenever the host takes longer to issue a call than the GPU takes
to run the flush and the previous call, host time too (one pass read 59 us
for cuDNN at B=2,H=8,S=512,D=64, where ANCHORS.md has 12.6 us). It is stored
for comparison with earlier passes and is used for no ratio in the tables
and for no flag.

Rounds: `--rounds` rounds in rotated order, each timing every contender by
events and then by kernel time, so that clock and power drift (big GEMMs run
at the power limit) reach all of them alike. A row is flagged unstable
(`!` in the table, "unstable": true in the JSON, with the series named in
"unstable_because") when over its rounds any contender's kernel time, or any
baseline's kernel-time ratio to ours, has max/min above 1 + `--unstable`
(default 0.10). Do not quote a flagged row; rerun it. One round cannot be
judged (`?`).

A row that fails (tuning, export, a launch) keeps the others and shows its
error in the table; SIDE_BY_SIDE_TRACE=1 prints where it failed on stderr.
"""
import argparse
import base64
import ctypes
import json
import math
import os
import sqlite3
import statistics
import subprocess
import traceback
import sys

os.environ.setdefault("KINETO_LOG_LEVEL", "4")  # the profiler's per-session stage lines would bury the table
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.testing as tt  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_time import KernelTimer  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
          "u32": torch.int32, "i32": torch.int32, "u8": torch.uint8, "e4m3": torch.float8_e4m3fn,
          "e5m2": torch.float8_e5m2}
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
# The shapes of ../shared/ANCHORS.md.
ANCHOR_GEMM = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 1024, 8192), (1000, 3000, 500), (16384, 128, 4096)]
ANCHOR_SDPA = [("fp16", s) for s in [(1, 8, 512, 64), (2, 8, 512, 64), (2, 8, 2048, 64), (8, 16, 2048, 64),
                                     (4, 16, 4096, 64), (4, 16, 4096, 128), (2, 16, 8192, 128), (16, 32, 512, 64)]] + \
              [("bf16", s) for s in [(2, 8, 512, 64), (4, 16, 4096, 128), (2, 16, 8192, 128)]]
# Shapes vendors tune least (--odd, bf16): row strides that are not a multiple
# of 16 bytes (odd K or N), vocabulary-sized N, decode batches of 1-16 rows,
# and short K.
# The same as x @ W.T sees them (torch.nn.Linear's weight is N x K): B stored
# transposed, its rows of K aligned where K is (the vocabulary projections).
ODD_GEMM_WT = [(16, 50257, 4096), (2048, 32001, 4096), (128, 128256, 4096), (1, 4096, 4096), (777, 1333, 2049)]
ODD_GEMM = [(777, 1333, 2049), (4095, 4097, 64), (8, 8192, 8192), (8192, 8192, 128), (16, 50257, 4096),
            (2048, 32001, 4096), (128, 128256, 4096), (1, 4096, 4096), (4096, 4096, 4095), (2049, 2049, 2049),
            (3000, 1000, 777), (512, 11008, 4095)]
# Beside them (--anchors): each anchor causal, and what real models run that
# the anchors do not have: grouped-query attention, a query block prefilled
# against a longer cache (causal, bottom-right), and decode (a few queries
# against a long cache).
ANCHOR_SDPA_EXTRA = [("fp16", "B=2,H=32,HKV=8,S=4096,D=128"), ("bf16", "B=2,H=32,HKV=8,S=4096,D=128,CAUSAL=1"),
                     ("fp16", "B=2,H=16,S=1024,SKV=8192,D=128,CAUSAL=1"), ("bf16", "B=8,H=32,HKV=8,S=1,SKV=8192,D=128"),
                     ("fp16", "B=4,H=32,HKV=8,S=16,SKV=4096,D=128"), ("fp16", "B=1,H=16,S=1,SKV=32768,D=128")]
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


TMAP_DTYPE = {"f16": 6, "bf16": 9, "f32": 7, "i32": 3, "u32": 2, "u8": 0, "e4m3": 0, "e5m2": 0}  # CUtensorMapDataType
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
            continue
        if a["init"] == "uniform":
            x = a.get("offset", 0.0) + (torch.rand(n, device="cuda") * 2 - 1) * a["scale"]
        else:
            x = a.get("offset", 0.0) + torch.randn(n, device="cuda") * a["scale"]
        if dt in FP8_MAX:  # saturated, as evotune's generator rounds (a plain cast would give NaN)
            x = x.clamp(-FP8_MAX[dt], FP8_MAX[dt])
        out[a["name"]] = x.to(dt)
    return out


def evotune(args, *cmd):
    r = subprocess.run([args.evotune, "--db", args.db, *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"evotune {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


ZERO_DEFAULTS = {"CAUSAL", "HKV", "SKV", "TB", "TA", "ZEROS", "DESCALE", "VT", "SPREAD"}  # dimensions whose default is 0


def same_problem(a, b):
    """Two problem texts name the same problem (dimensions left at 0, their default, count as absent)."""
    def norm(t):
        return {k: v for k, v in (part.split("=") for part in t.split(",")) if not (k in ZERO_DEFAULTS and v == "0")}
    try:
        return norm(a) == norm(b)
    except ValueError:  # several problems in one run
        return False


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
            if same_problem(shapes, want):
                return run_id
        return None
    run = find()
    if run is None:
        if args.tune_budget <= 0:
            raise SystemExit(f"no tuned {kernel} run for {want} {dtype} in {args.db} (use --tune-budget)")
        print(f"# tuning {kernel} {want} {dtype} ({args.tune_budget} trials)...", file=sys.stderr, flush=True)
        evotune(args, "run", "-q", "--kernel", kernel, "--problem", want, "--dtype", dtype, "--budget", str(args.tune_budget),
                *args.tune_args.split())
        run = find()
    return run, json.loads(evotune(args, "export", str(run), "--format", "launch"))


def rotated(n, r):
    order = list(range(n))
    return order[r % n:] + order[:r % n]


def spread(values):
    """max/min - 1 of a series (None for fewer than two values)."""
    if len(values) < 2:
        return None
    lo, hi = min(values), max(values)
    return math.inf if lo <= 0 else hi / lo - 1


def stability(kernel_rounds, ratio_rounds, threshold):
    """The flag rule. kernel_rounds: contender -> per-round kernel time;
    ratio_rounds: baseline -> per-round ratio (baseline / ours). Returns
    (spreads, unstable, because): unstable is None when there is one round."""
    spreads = {name: spread(v) for name, v in kernel_rounds.items()}
    spreads.update({"vs_" + name: spread(v) for name, v in ratio_rounds.items()})
    if any(s is None for s in spreads.values()):
        return spreads, None, []
    because = [name for name, s in spreads.items() if s > threshold]
    return spreads, bool(because), because


def calls_for(args, event_us, flush_us):
    """Calls per contender per round for kernel time: about args.rep ms of GPU
    time per contender over all rounds, from round 0's event times."""
    per_call_ms = (sum(event_us) + len(event_us) * flush_us) / 1e3
    budget_ms = args.rep / max(1, args.rounds) * len(event_us)
    return max(10, min(args.calls, int(budget_ms / per_call_ms)))


def measure(args, timer, names, fns, flops):
    """Event and kernel time of every contender over args.rounds rotated rounds;
    the contenders part of a row, the ratios and the flag."""
    rounds = max(1, args.rounds)
    ev = {n: [] for n in names}
    kt = {n: [] for n in names}
    lead = {n: [] for n in names}
    first = {}
    calls = None
    for r in range(rounds):
        order = rotated(len(fns), r)
        for i in order:
            ev[names[i]].append(tt.do_bench(fns[i], warmup=10, rep=max(10, args.rep // rounds),
                                            return_mode="median") * 1e3)
        if calls is None:
            calls = calls_for(args, [ev[n][0] for n in names], timer.flush_us)
        for i, cs in zip(order, timer.run([fns[i] for i in order], calls)):
            kt[names[i]].append(statistics.median(c.kernel_us for c in cs))
            lead[names[i]].append(statistics.median(c.lead_us for c in cs))
            first.setdefault(names[i], cs)
    return summarize(names, ev, kt, lead, first, flops, calls, args.unstable)


def summarize(names, ev, kt, lead, first, flops, calls, threshold):
    """Pure: per-round figures in, the row's timing fields out."""
    med = statistics.median
    out = {"rounds": len(kt[names[0]]), "calls_per_round": calls, "contenders": {}, "vs": {}}
    for n in names:
        counts = sorted({len(c.names) for c in first[n]})
        out["contenders"][n] = {
            "kernel_us": med(kt[n]), "kernel_us_rounds": kt[n], "kernel_tflops": flops / med(kt[n]) / 1e6,
            "event_us": med(ev[n]), "event_us_rounds": ev[n], "event_tflops": flops / med(ev[n]) / 1e6,
            "lead_us": med(lead[n]), "kernels_per_call": counts,
            "kernels": [k[:160] for k in dict.fromkeys(first[n][0].names)]}
    ours = names[0]
    ratio_rounds = {}
    for n in names[1:]:
        ratio_rounds[n] = [a / b for a, b in zip(kt[n], kt[ours])]
        out["vs"][n] = {"kernel": med(kt[n]) / med(kt[ours]), "kernel_rounds": ratio_rounds[n],
                        "event": med(ev[n]) / med(ev[ours]),
                        "event_rounds": [a / b for a, b in zip(ev[n], ev[ours])]}
    spreads, unstable, because = stability({n: kt[n] for n in names}, ratio_rounds, threshold)
    out["spread"] = spreads
    out["max_spread"] = max((s for s in spreads.values() if s is not None), default=None)
    out["unstable"] = unstable
    out["unstable_because"] = because
    return out


# A GEMM's layout: bit 0 B stored transposed (TB=1), bit 1 A stored transposed (TA=1).
def gemm_text(M, N, K, layout):
    return f"M={M},N={N},K={K}" + (",TB=1" if layout & 1 else "") + (",TA=1" if layout & 2 else "")


def gemm_case(args, timer, M, N, K, layout, dtype):
    """TB=1: B is stored transposed (N x K), as a weight W of x @ W.T; cuBLAS gets W.t(), as torch.matmul does.
    TA=1: A is stored transposed (K x M, a column-major A); cuBLAS gets its .t() too."""
    run, doc = winner(args, args.kernel, gemm_text(M, N, K, layout), dtype)
    p = doc["problems"][0]
    t = make_tensors(p, {})
    C = t["C"].view(M, N)
    A = t["A"].view(K, M).t() if layout & 2 else t["A"].view(M, K)  # the M x K operand either way
    B = t["B"].view(N, K).t() if layout & 1 else t["B"].view(K, N)  # the K x N operand either way
    ours = TunedKernel(doc, p, t)
    ours()
    torch.cuda.synchronize()
    ref = A.float() @ B.float()
    err = ((C.float() - ref).norm() / ref.norm()).item()
    fl = 2 * M * N * K
    row = {"op": "gemm", "shape": [M, N, K], "tb": layout & 1, "ta": layout >> 1, "dtype": dtype, "kernel": args.kernel, "run": run,
           "config": doc["config"], "rel_err": err, "flops": fl, "skipped": {}}
    row.update(measure(args, timer, ["ours", "cublas"], [ours, lambda: A @ B], fl))
    return row


ATTN_DEFAULTS = {"CAUSAL": 0, "HKV": 0, "SKV": 0}


GEMM_LAYOUTS = {"T": 1, "1": 1, "TB": 1, "TA": 2, "TATB": 3}


def gemm_shape(text):
    """'M,N,K' or 'M,N,K,L', L one of T or TB (B stored transposed, x @ W.T), TA (A stored transposed),
    TATB (both) -> (M, N, K, layout)."""
    parts = text.split(",")
    if len(parts) == 4 and parts[3] in GEMM_LAYOUTS:
        return tuple(map(int, parts[:3])) + (GEMM_LAYOUTS[parts[3]],)
    if len(parts) != 3:
        raise SystemExit(f"--gemm {text}: expected M,N,K or M,N,K,L with L one of {', '.join(GEMM_LAYOUTS)}")
    return tuple(map(int, parts)) + (0,)


def attn_problem(text):
    """'B,H,S,D' or 'B=..,H=..,S=..,D=..[,CAUSAL=..][,HKV=..][,SKV=..]' -> dict with every key."""
    if "=" not in text:
        b, h, sq, d = map(int, text.split(","))
        p = {"B": b, "H": h, "S": sq, "D": d}
    else:
        p = {k.strip(): int(v) for k, v in (part.split("=") for part in text.split(","))}
    return {**ATTN_DEFAULTS, **p}


def attn_text(p):
    """The problem as evotune takes it."""
    keys = ["B", "H", "S", "D"] + [k for k in ("CAUSAL", "HKV", "SKV") if p[k] != 0]
    return ",".join(f"{k}={p[k]}" for k in keys)


def attn_flops(p):
    """Multiply-adds of the visible (query, key) pairs, x4 (Q·Kᵀ and P·V)."""
    sq, skv = p["S"], p["SKV"] or p["S"]
    if p["CAUSAL"]:  # query i sees keys j <= i + skv - sq
        pairs = sum(max(0, min(skv, i + skv - sq + 1)) for i in range(sq))
    else:
        pairs = sq * skv
    return 4 * p["B"] * p["H"] * pairs * p["D"]


def attn_kwargs(p, S, skv, hkv, H):
    """PyTorch's arguments for the template's mask: GQA, causal aligned bottom-right."""
    kw = {"enable_gqa": hkv != H}
    if p["CAUSAL"] and S == skv:
        kw["is_causal"] = True
    elif p["CAUSAL"]:
        from torch.nn.attention.bias import causal_lower_right
        kw["attn_mask"] = causal_lower_right(S, skv)
    return kw


def rel_err(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


def sdpa_case(args, timer, dtype, p):
    kernel = args.sdpa_kernel
    text = attn_text(p)
    run, doc = winner(args, kernel, text, dtype)
    pr = doc["problems"][0]
    t = make_tensors(pr, {})
    Bn, H, S, D = p["B"], p["H"], p["S"], p["D"]
    hkv, skv = p["HKV"] or H, p["SKV"] or S
    q, o = (t[n].view(Bn, H, S, D) for n in ("Q", "O"))
    k, v = (t[n].view(Bn, hkv, skv, D) for n in ("K", "V"))
    ours = TunedKernel(doc, pr, t)
    ours()
    torch.cuda.synchronize()
    kw = attn_kwargs(p, S, skv, hkv, H)
    with sdpa_kernel([SDPBackend.MATH]):
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)
    ref = torch.nan_to_num(ref)  # rows that see no key: PyTorch NaN, ours 0
    err = rel_err(o, ref)
    fl = attn_flops(p)
    row = {"op": "sdpa", "shape": [Bn, H, S, D], "problem": text, "dtype": dtype, "kernel": kernel, "run": run,
           "config": doc["config"], "rel_err": err, "flops": fl, "skipped": {}}
    names, fns = ["ours"], [ours]
    for name, backend in BACKENDS.items():
        if name == "math" and Bn * H * S * skv * 2 > 2**33:
            row["skipped"][name] = "too large for the math backend here"
            continue

        def f(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, **kw)
        try:
            f()
            torch.cuda.synchronize()
        except RuntimeError as e:  # the backend does not take this shape, type or mask
            row["skipped"][name] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            continue
        names.append(name)
        fns.append(f)
    row.update(measure(args, timer, names, fns, fl))
    best = min((n for n in names[1:] if n != "math"), key=lambda n: kus(row, n), default=None)
    row["best_torch"] = best
    return row


def cudnn_frontend_fp8(q8, k8, v8, qd, kd, vd, causal, scale):
    """cuDNN's FP8 attention through the cuDNN frontend's Python graph API
    (`import cudnn`, the nvidia-cudnn-frontend wheel; 1.14 needs nothing
    else), on the cuDNN library PyTorch loaded. On Hopper cuDNN writes O in
    e4m3 too: O_fp8 = O * scale_o, with scale_o mapping the largest
    dequantized |V| (a bound on |O|) to e4m3's 448; P is quantized as
    P * 448 (P <= 1). Returns the timed call, O from its result, and how."""
    import cudnn
    e4m3, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    graph = cudnn.pygraph(io_data_type=e4m3, intermediate_data_type=f32, compute_data_type=f32, handle=handle)

    def fp8(name, x):
        return graph.tensor(name=name, dim=list(x.shape), stride=list(x.stride()), data_type=e4m3)
    tq, tk, tv = fp8("q", q8), fp8("k", k8), fp8("v", v8)
    scale_o = 448.0 / max(float(v8.float().abs().max()) * vd, 1e-30)
    values = {"descale_q": qd, "descale_k": kd, "descale_v": vd, "descale_s": 1.0 / 448.0, "scale_s": 448.0,
              "scale_o": scale_o}
    scalars = {n: graph.tensor(name=n, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f32) for n in values}
    o, _, amax_s, amax_o = graph.sdpa_fp8(q=tq, k=tk, v=tv, **scalars, is_inference=True, attn_scale=scale,
                                          use_causal_mask=causal, name="sdpa_fp8")
    out = torch.empty(q8.shape, dtype=torch.float8_e4m3fn, device="cuda")
    o.set_output(True).set_dim(list(out.shape)).set_stride(list(out.stride())).set_data_type(e4m3)
    amaxes = [torch.empty((1, 1, 1, 1), dtype=torch.float32, device="cuda") for _ in range(2)]
    for t in (amax_s, amax_o):
        t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f32)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    pack = {tq: q8, tk: k8, tv: v8, o: out, amax_s: amaxes[0], amax_o: amaxes[1],
            **{scalars[n]: torch.full((1, 1, 1, 1), x, dtype=torch.float32, device="cuda") for n, x in values.items()}}

    def call():
        graph.execute(pack, workspace, handle=handle)
        return out
    return call, lambda x: x.float() / scale_o, f"cuDNN frontend {cudnn.__version__} sdpa_fp8 (O in e4m3, scale_o {scale_o:.4g})"


def cudnn_fp8(q8, k8, v8, qd, kd, vd, causal, scale):
    """cuDNN's FP8 attention with per-tensor descales: a callable for the timed
    call, a function from its result to O, and how it was reached."""
    try:
        from torch.nn.attention.experimental._scaled_dot_product_attention_quantized import (
            DescaleType, _scaled_dot_product_attention_quantized)
        if hasattr(DescaleType, "PER_TENSOR"):
            ds = [torch.full((1, 1, 1, 1), x, dtype=torch.float32, device="cuda") for x in (qd, kd, vd)]
            t = DescaleType.PER_TENSOR
            return (lambda: _scaled_dot_product_attention_quantized(
                q8, k8, v8, is_causal=causal, scale=scale, q_descale=ds[0], k_descale=ds[1], v_descale=ds[2],
                q_descale_type=t, k_descale_type=t, v_descale_type=t),
                lambda o: o, "_scaled_dot_product_attention_quantized PER_TENSOR")
    except ImportError:
        pass
    try:
        return cudnn_frontend_fp8(q8, k8, v8, qd, kd, vd, causal, scale)
    except ImportError:  # no cuDNN frontend here
        # Not aten's _scaled_dot_product_cudnn_attention on e4m3 tensors: it
        # returns NaN, and at 4,16,4096,128 with V transposed back it faulted
        # (an illegal address), which ends every later launch in the process.
        raise RuntimeError("no cuDNN frontend: pip install nvidia-cudnn-frontend==1.14.1") from None


def fa3_fp8(q8, k8, v8, qds, kds, vds, causal, scale):
    """FlashAttention-3's FP8 path (per-head descales, [B, HKV]), where FA3 can be activated."""
    from torch.nn.attention import activate_flash_attention_impl
    from torch.nn.attention.experimental._scaled_dot_product_attention_quantized import (
        DescaleType, _scaled_dot_product_attention_quantized)
    activate_flash_attention_impl("FA3")
    t = DescaleType.PER_HEAD
    return lambda: _scaled_dot_product_attention_quantized(
        q8, k8, v8, is_causal=causal, scale=scale, q_descale=qds, k_descale=kds, v_descale=vds,
        q_descale_type=t, k_descale_type=t, v_descale_type=t)


def fp8_case(args, timer, p):
    """Our FP8 attention against cuDNN's and FA3's FP8 and the 16-bit kernels on
    the dequantized inputs; see the module's docstring."""
    text = attn_text(p) + (",DESCALE=1" if p.get("DESCALE") else "")
    vt = p.get("VT", 0) == 1  # ours reads V stored transposed ([B, HKV, D, SKV]); the others its transpose back
    run, doc = winner(args, args.fp8_kernel, text + (",VT=1" if vt else ""), "bf16")
    pr = doc["problems"][0]
    t = make_tensors(pr, {})
    scalars = {a["name"]: a["value"] for a in pr["args"] if a["kind"] == "scalar"}
    Bn, H, S, D = p["B"], p["H"], p["S"], p["D"]
    hkv, skv = p["HKV"] or H, p["SKV"] or S
    q8, o = t["Q"].view(Bn, H, S, D), t["O"].view(Bn, H, S, D)
    k8 = t["K"].view(Bn, hkv, skv, D)
    v8 = t["V"].view(Bn, hkv, D, skv).transpose(-1, -2).contiguous() if vt else t["V"].view(Bn, hkv, skv, D)
    qd, kd, vd, scale = (scalars[n] for n in ("q_descale", "k_descale", "v_descale", "scale"))
    ours = TunedKernel(doc, pr, t)
    ours()
    torch.cuda.synchronize()
    # Per-head factors ([B, HKV]; ones without DESCALE=1) times the per-tensor descales.
    per_head = p.get("DESCALE", 0) == 1
    fac = {n: (t[n + "_descales"].view(Bn, hkv) if per_head else torch.ones(Bn, hkv, device="cuda"))
           for n in ("q", "k", "v")}
    group = H // hkv
    qf = q8.float() * (qd * fac["q"]).repeat_interleave(group, dim=1)[..., None, None]
    kf = k8.float() * (kd * fac["k"])[..., None, None]
    vf = v8.float() * (vd * fac["v"])[..., None, None]
    kw = attn_kwargs(p, S, skv, hkv, H)
    with sdpa_kernel([SDPBackend.MATH]):
        ref = torch.nan_to_num(F.scaled_dot_product_attention(qf, kf, vf, scale=scale, **kw))
    fl = attn_flops(p)
    row = {"op": "fp8", "shape": [Bn, H, S, D], "problem": text + (",VT=1" if vt else ""), "dtype": "e4m3->bf16",
           "kernel": args.fp8_kernel,
           "run": run, "config": doc["config"], "rel_err": rel_err(o, ref), "errors": {}, "via": {}, "flops": fl,
           "skipped": {}}
    names, fns = ["ours"], [ours]

    def add(name, make, to_o=lambda x: x):
        try:
            fn = make()
            out = to_o(fn())
            torch.cuda.synchronize()
        except Exception as e:  # this PyTorch lacks it, or it refuses the shape, type or mask
            row["skipped"][name] = (str(e).splitlines()[0][:200] if str(e) else type(e).__name__)
            return
        err = rel_err(out.reshape(ref.shape), ref)
        row["errors"][name] = err
        if not err <= args.fp8_max_err:
            row["skipped"][name] = f"wrong: relative error {err:.3g} against the fp32 reference"
            return
        names.append(name)
        fns.append(fn)

    causal_top = bool(p["CAUSAL"]) and S == skv  # the FP8 entry points take is_causal only (top-left = bottom-right here)
    if p["CAUSAL"] and not causal_top:
        row["skipped"]["cudnn_fp8"] = row["skipped"]["fa3_fp8"] = "causal with S != SKV: no bottom-right mask here"
    else:
        if per_head:
            row["skipped"]["cudnn_fp8"] = "per-tensor descales only (DESCALE=1 problem)"
        else:
            made = {}

            def make_cudnn():
                made["fn"], made["to_o"], row["via"]["cudnn_fp8"] = cudnn_fp8(q8, k8, v8, qd, kd, vd, causal_top, scale)
                return made["fn"]
            add("cudnn_fp8", make_cudnn, lambda x: made["to_o"](x))
        fa3_ds = [(d * fac[n]).float().contiguous() for n, d in (("q", qd), ("k", kd), ("v", vd))]
        add("fa3_fp8", lambda: fa3_fp8(q8, k8, v8, *fa3_ds, causal_top, scale))
    if args.fp8_other:  # the other FP8 template on the same e4m3 inputs
        try:
            run8, doc8 = winner(args, args.fp8_other, text, "bf16")
            pr8 = doc8["problems"][0]
            t8 = make_tensors(pr8, {**{n: t[n] for n in ("Q", "K", "q_descales", "k_descales", "v_descales") if n in t},
                                    "V": v8.reshape(-1)})
            mma8 = TunedKernel(doc8, pr8, t8)
        except (Exception, SystemExit) as e:
            row["skipped"]["mma8"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        else:
            row["run_mma8"], row["config_mma8"] = run8, doc8["config"]
            add("mma8", lambda: mma8, lambda _: t8["O"])
    # 16 bits on the dequantized inputs: our best template, tuned on this problem, and PyTorch's.
    qb, kb, vb = (x.to(torch.bfloat16) for x in (qf, kf, vf))
    try:
        run16, doc16 = winner(args, args.sdpa_kernel, attn_text(p), "bf16")
        pr16 = doc16["problems"][0]
        t16 = make_tensors(pr16, {"Q": qb.reshape(-1), "K": kb.reshape(-1), "V": vb.reshape(-1)})
        ours16 = TunedKernel(doc16, pr16, t16)
    except (Exception, SystemExit) as e:  # no tuned run and no budget, or the template refuses the problem
        row["skipped"]["ours_bf16"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    else:
        row["run_bf16"], row["config_bf16"] = run16, doc16["config"]
        add("ours_bf16", lambda: ours16, lambda _: t16["O"])
    for name in ("flash", "cudnn"):
        def f(backend=BACKENDS[name]):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qb, kb, vb, scale=scale, **kw)
        add(name + "_bf16", lambda f=f: f)
    try:
        from torch.nn.attention import current_flash_attention_impl
        row["flash_impl"] = current_flash_attention_impl()
    except ImportError:
        pass
    row.update(measure(args, timer, names, fns, fl))
    return row


def restore_flash():
    """Back to PyTorch's default flash implementation (an FP8 row may have activated FA3)."""
    try:
        from torch.nn.attention import restore_flash_attention_impl
        restore_flash_attention_impl()
    except Exception:  # an older PyTorch, or nothing activated
        pass


def fmt(x, spec):
    return format("-", ">" + spec.split(".")[0]) if x is None else format(x, spec)


def flag(r):
    return "?" if r.get("unstable") is None else "!" if r["unstable"] else ""


def pct(x):
    return "-" if x is None else "inf" if x == math.inf else f"{100 * x:.1f}%"


def label(r):
    s = r["shape"]
    if r["op"] == "gemm":
        return f"{s[0]}x{s[1]}x{s[2]}{' Aᵀ' if r.get('ta') else ''}{' W.T' if r.get('tb') else ''} {r['dtype']}"
    return f"{'fp8' if r['op'] == 'fp8' else r['dtype']} {r.get('problem', ','.join(map(str, s)))}"


def kus(r, name, what="kernel_us"):
    c = r.get("contenders", {}).get(name)
    return None if c is None else c[what]


def vs(r, name, what="kernel"):
    x = r.get("vs", {}).get(name)
    return None if x is None else x[what]


GEMM_HEAD = (f"{'GEMM':<22} {'ours us':>9} {'TFLOP/s':>8} {'cuBLAS us':>10} {'TFLOP/s':>8} {'vs cuBLAS':>9} "
             f"{'rounds':>11} {'spread':>7} ! {'rel err':>8} | {'ev ours':>8} {'ev cuBLAS':>9} {'ev vs':>6}")
SDPA_HEAD = (f"{'attention':<44} {'ours us':>8} {'TFLOP/s':>7} {'flash':>8} {'cuDNN':>8} {'effic.':>8} "
             f"{'math':>9} {'vs flash':>8} {'vs cuDNN':>8} {'vs best':>8} {'spread':>7} ! {'rel err':>8} | {'ev ours':>8} "
             f"{'ev flash':>8} {'ev cuDNN':>8}")


FP8_HEAD = (f"{'FP8 attention (O bf16)':<44} {'ours us':>8} {'TFLOP/s':>7} {'mma8':>8} {'cuDNN8':>8} {'FA3 fp8':>8} "
            f"{'ours16':>8} {'flash16':>8} {'cuDNN16':>8} {'vs cuDNN8':>9} {'vs FA3':>7} {'vs ours16':>9} "
            f"{'spread':>7} ! {'rel err':>8} {'cuDNN8 err':>10}")


def fp8_line(r):
    if "error" in r:
        return f"{label(r):<44} error: {r['error'][:150]}"
    return (f"{label(r):<44} {kus(r, 'ours'):>8.1f} {r['contenders']['ours']['kernel_tflops']:>7.1f} "
            f"{fmt(kus(r, 'mma8'), '8.1f')} "
            f"{fmt(kus(r, 'cudnn_fp8'), '8.1f')} {fmt(kus(r, 'fa3_fp8'), '8.1f')} {fmt(kus(r, 'ours_bf16'), '8.1f')} "
            f"{fmt(kus(r, 'flash_bf16'), '8.1f')} {fmt(kus(r, 'cudnn_bf16'), '8.1f')} "
            f"{fmt(vs(r, 'cudnn_fp8'), '8.3f')}x {fmt(vs(r, 'fa3_fp8'), '6.3f')}x {fmt(vs(r, 'ours_bf16'), '8.3f')}x "
            f"{pct(r['max_spread']):>7} {flag(r):1} {r['rel_err']:>8.1e} {fmt(r['errors'].get('cudnn_fp8'), '10.1e')}")


def gemm_line(r):
    if "error" in r:
        return f"{label(r):<22} error: {r['error'][:150]}"
    rs = vs(r, "cublas", "kernel_rounds")
    return (f"{label(r):<22} {kus(r, 'ours'):>9.1f} {r['contenders']['ours']['kernel_tflops']:>8.1f} "
            f"{kus(r, 'cublas'):>10.1f} {r['contenders']['cublas']['kernel_tflops']:>8.1f} {vs(r, 'cublas'):>8.3f}x "
            f"{min(rs):>5.3f}-{max(rs):<5.3f} {pct(r['max_spread']):>7} {flag(r):1} {r['rel_err']:>8.1e} | "
            f"{kus(r, 'ours', 'event_us'):>8.1f} {kus(r, 'cublas', 'event_us'):>9.1f} {vs(r, 'cublas', 'event'):>5.3f}x")


def sdpa_line(r):
    if "error" in r:
        return f"{label(r):<44} error: {r['error'][:150]}"
    best = r.get("best_torch")
    return (f"{label(r):<44} {kus(r, 'ours'):>8.1f} {r['contenders']['ours']['kernel_tflops']:>7.1f} "
            f"{fmt(kus(r, 'flash'), '8.1f')} {fmt(kus(r, 'cudnn'), '8.1f')} {fmt(kus(r, 'efficient'), '8.1f')} "
            f"{fmt(kus(r, 'math'), '9.1f')} {fmt(vs(r, 'flash'), '7.3f')}x {fmt(vs(r, 'cudnn'), '7.3f')}x "
            f"{fmt(vs(r, best) if best else None, '7.3f')}x "
            f"{pct(r['max_spread']):>7} {flag(r):1} {r['rel_err']:>8.1e} | {kus(r, 'ours', 'event_us'):>8.1f} "
            f"{fmt(kus(r, 'flash', 'event_us'), '8.1f')} {fmt(kus(r, 'cudnn', 'event_us'), '8.1f')}")


HEADS = {"gemm": GEMM_HEAD, "sdpa": SDPA_HEAD, "fp8": FP8_HEAD}
LINES = {"gemm": gemm_line, "sdpa": sdpa_line, "fp8": fp8_line}
LEGEND = ("# us: kernel time (CUPTI, L2 flushed, launch excluded), median over rounds; vs X: X's kernel time over "
          "ours (>1: ours faster);\n# rounds: lowest-highest per-round ratio; spread: the largest max/min-1 over "
          "rounds of any contender's kernel time or ratio;\n# !: spread over {thr:.0%} (do not quote), ?: one round; "
          "ev: event time (triton do_bench, launch and host gaps included).")


def table(rows, threshold):
    out = [LEGEND.format(thr=threshold)]
    for op in ("gemm", "sdpa", "fp8"):
        mine = [r for r in rows if r["op"] == op]
        if mine:
            out += ["", HEADS[op]] + [LINES[op](r) for r in mine]
    return "\n".join(out)


def document(args, timer, rows):
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "triton": triton.__version__, "argv": sys.argv[1:],
            "timing": {"primary": "kernel_us: CUPTI kernel time (torch.profiler), L2 flushed before every call, "
                                  "contenders interleaved call by call; median of calls per round, median over rounds",
                       "secondary": "event_us: triton do_bench median (CUDA events, L2 flushed), launch included",
                       "flush_bytes": timer.cache.numel() * timer.cache.element_size(),
                       "flush_kernels": sorted(n[:160] for n in timer.flush_names),
                       "flush_us": timer.flush_us, "rounds": args.rounds, "rep_ms": args.rep,
                       "max_calls": args.calls, "unstable_threshold": args.unstable},
            "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", default="build/evotune")
    ap.add_argument("--db", default="evotune.db")
    ap.add_argument("--kernel", default="gemm_sm90", help="GEMM template to compare (gemm or gemm_sm90)")
    ap.add_argument("--gemm", action="append", default=[],
                    help="M,N,K, or M,N,K,L: L = T (B stored transposed, x @ W.T), TA (A stored transposed) or TATB (repeatable)")
    ap.add_argument("--sdpa", action="append", default=[],
                    help="B,H,S,D or B=..,H=..,S=..,D=..[,CAUSAL=1][,HKV=..][,SKV=..] (repeatable)")
    ap.add_argument("--sdpa-kernel", default="auto",
                    help="attention template: sdpa_fwd_sm90, sdpa_fwd, or auto (sdpa_fwd_sm90 on sm_90, else sdpa_fwd)")
    ap.add_argument("--dtype", default="bf16", help="for --gemm/--sdpa")
    ap.add_argument("--fp8", action="append", default=[],
                    help="FP8 attention: B,H,S,D or B=..,H=..,S=..,D=..[,CAUSAL=1][,HKV=..][,SKV=..][,DESCALE=1][,VT=1: "
                         "ours with V stored transposed] "
                         "(repeatable; O in bf16)")
    ap.add_argument("--fp8-anchors", action="store_true",
                    help="FP8 attention on ANCHORS.md's attention shapes and their causal variants")
    ap.add_argument("--fp8-kernel", default="auto",
                    help="FP8 attention template (auto: sdpa_fp8_sm90 on Hopper, with the mma.sync sdpa_fp8 beside it "
                         "as 'mma8'; sdpa_fp8 elsewhere)")
    ap.add_argument("--fp8-max-err", type=float, default=0.1,
                    help="a contender of an FP8 row whose relative error against the fp32 reference passes this "
                         "is listed as wrong, not timed")
    ap.add_argument("--anchors", action="store_true", help="every shape of ANCHORS.md (GEMM bf16, attention fp16/bf16)")
    ap.add_argument("--only", choices=["gemm", "sdpa"], help="with --anchors: one kind")
    ap.add_argument("--odd", action="store_true",
                    help="the odd and skinny GEMM shapes (bf16): misaligned rows, vocabulary-sized N, decode batches; "
                         "then five of them as x @ W.T (B stored transposed)")
    ap.add_argument("--tune-budget", type=int, default=0, help="tune shapes that have no run yet, with this budget")
    ap.add_argument("--tune-only", action="store_true", help="tune the shapes that have no run yet, then stop")
    ap.add_argument("--tune-args", default="",
                    help="more `evotune run` options for those tuning runs, e.g. \"--sanitize none --baselines none\" "
                         "(quicker: this benchmark measures the vendors itself)")
    ap.add_argument("--rep", type=int, default=200,
                    help="ms of GPU time per contender over all rounds, for each of the two figures")
    ap.add_argument("--calls", type=int, default=100, help="most calls per contender per round for kernel time")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds, rotated order")
    ap.add_argument("--unstable", type=float, default=0.10,
                    help="flag a row whose rounds disagree by more than this fraction")
    ap.add_argument("--json", help="write the document here (rewritten after every row)")
    args = ap.parse_args()
    torch.zeros(1, device="cuda")  # PyTorch's context is current: cubins load into it
    gemms = [gemm_shape(s) for s in args.gemm]
    hopper = torch.cuda.get_device_capability() == (9, 0)
    if args.sdpa_kernel == "auto":
        args.sdpa_kernel = "sdpa_fwd_sm90" if hopper else "sdpa_fwd"
    # The second FP8 code path, timed beside the first (the issue's "both code paths").
    args.fp8_other = "sdpa_fp8" if args.fp8_kernel in ("auto", "sdpa_fp8_sm90") and hopper else None
    if args.fp8_kernel == "auto":
        args.fp8_kernel = "sdpa_fp8_sm90" if hopper else "sdpa_fp8"
    sdpas = [(args.dtype, attn_problem(s)) for s in args.sdpa]
    gemm_dtype = "bf16" if args.anchors or args.odd else args.dtype
    if args.odd:
        gemms += [(M, N, K, 0) for M, N, K in ODD_GEMM] + [(M, N, K, 1) for M, N, K in ODD_GEMM_WT]
    if args.anchors:
        gemms += [(M, N, K, 0) for M, N, K in ANCHOR_GEMM] if args.only in (None, "gemm") else []
        if args.only in (None, "sdpa"):
            plain = [(d, attn_problem(",".join(map(str, shape)))) for d, shape in ANCHOR_SDPA]
            sdpas += plain + [(d, {**p, "CAUSAL": 1}) for d, p in plain]
            sdpas += [(d, attn_problem(t)) for d, t in ANCHOR_SDPA_EXTRA]
    fp8s = [attn_problem(s) for s in args.fp8]
    if args.fp8_anchors:
        plain = list(dict.fromkeys(shape for _, shape in ANCHOR_SDPA))
        fp8s += [attn_problem(",".join(map(str, shape))) for shape in plain]
        fp8s += [{**attn_problem(",".join(map(str, shape))), "CAUSAL": 1} for shape in plain]
    if args.tune_only:
        for (M, N, K, layout) in gemms:
            text = gemm_text(M, N, K, layout)
            print(f"gemm {text} {gemm_dtype}: run {winner(args, args.kernel, text, gemm_dtype)[0]}")
        for dtype, p in sdpas:
            text = attn_text(p)
            print(f"sdpa {dtype} {text}: run {winner(args, args.sdpa_kernel, text, dtype)[0]}")
        for p in fp8s:
            text = attn_text(p) + (",DESCALE=1" if p.get("DESCALE") else "") + \
                (",VT=1" if p.get("VT") else "")
            print(f"fp8 {text}: run {winner(args, args.fp8_kernel, text, 'bf16')[0]}; "
                  f"bf16 run {winner(args, args.sdpa_kernel, attn_text(p), 'bf16')[0]}")
        return
    timer = KernelTimer()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"flush {timer.flush_us:.1f} us", flush=True)
    cases = [("gemm", shape, gemm_dtype) for shape in gemms] + [("sdpa", s, d) for d, s in sdpas] + \
        [("fp8", p, "bf16") for p in fp8s]
    rows = []
    for n, (op, shape, dtype) in enumerate(cases):
        if n == 0 or cases[n - 1][0] != op:
            print("\n" + HEADS[op], flush=True)
        try:
            r = gemm_case(args, timer, *shape, dtype) if op == "gemm" else \
                sdpa_case(args, timer, dtype, shape) if op == "sdpa" else fp8_case(args, timer, shape)
        except (Exception, SystemExit) as e:  # one shape's failure (tuning, export, timing) keeps the others
            if os.environ.get("SIDE_BY_SIDE_TRACE"):  # where it failed, on stderr
                traceback.print_exc()
            r = {"op": op, "shape": list(shape[:3]) if op == "gemm" else [shape[k] for k in "BHSD"], "dtype": dtype,
                 "error": f"{type(e).__name__}: {e}"}
            if op == "gemm":
                r["tb"], r["ta"] = shape[3] & 1, shape[3] >> 1
            if op != "gemm":
                r["problem"] = ",".join(f"{k}={v}" for k, v in shape.items() if v or k in "BHSD")
        finally:
            restore_flash()
        rows.append(r)
        print(LINES[op](r), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(document(args, timer, rows), f, indent=1)
    print("\n" + table(rows, args.unstable), flush=True)


if __name__ == "__main__":
    main()
