#!/usr/bin/env python3
"""Per-CTA timelines of the Hopper templates: when each CTA starts, loads, computes and stores.

gemm_sm90 and sdpa_fwd_sm90 (and sdpa_fp8_sm90, built from it) stamp time
when the build option EVOTUNE_SM90_TIMELINE is defined (off in the product;
kernel_templates/common/evotune_sm90.cuh has the helper, each kernel's
comment above its first tl_mark lists its 32 slots): thread 0 of each CTA
stamps %globaltimer and the SM's clock64 into its row at fixed points
(entry, set-up done, first loads issued and landed, each unit's end, exit).
This tool copies kernel_templates/ to a temporary folder, turns the option on
in the kernel's spec there ([defines]; its spill and stack gates loosened to
128 bytes, which the stamps cost a producer warpgroup), tunes each --config
as a one-trial run (compiled, gated and verified by evotune), and launches
the cubin the way bench/side_by_side.py does: back to back, with and without
an L2 flush between launches (256 MB zeroed, as triton's do_bench), the
stamps copied out in stream order with no host synchronisation between
launches. The vendor's kernel (cuBLAS through torch.matmul; cuDNN's
attention for 16-bit attention) is timed on the same problem and modes by
CUDA events for comparison. Cycles do not depend on the clock the power limit
allows, so they compare configs exactly.

Needs:  a Hopper GPU (sm_90a); PyTorch and numpy; an evotune binary
        (--evotune, else $EVOTUNE, else build/evotune).
Run:    tools/timeline.py --shape 8192,1024,8192 --config BLOCK_N=256,PERSISTENT=1 --config ...
        tools/timeline.py --kernel sdpa_fwd_sm90 --problem B=2,H=8,S=2048,D=64 --dtype fp16 --config ...
        --templates DIR builds a changed copy of kernel_templates/, --option -DNAME=1 adds a define.
        Stamps change the code around them: a slow path that the product build
        takes may not show in the stamped build (docs/MEASUREMENTS.md, 2026-11-30).
        --npz FILE keeps the raw stamps (per config and mode).
Prints: the vendor's event time per mode (us); then per config and mode
        (flush, noflush) one line of medians over launches: event time and
        span (us), entry skew, exit spread, idle (the SM-time share outside
        the CTAs), and the kernel's own steps:
        gemm_sm90: u<i>_mma_* / u<i>_epi, when unit i's MMAs ended and its
        epilogue took (us from the first CTA's entry); u0_first / u0_half,
        when the first unit's first and middle k-tiles landed; last_*, the
        steps of each CTA's last epilogue; kc_*, thousands of SM cycles from
        entry to the set-up barrier, the producer starting and issuing its
        first loads, the first k-tile landing, and of the first and second
        unit's MMAs; mhz, the clock they imply; kw_*, thousands of cycles
        thread 0 waited on operands in units 0 and 1 (all k-tiles, the first
        four).
        sdpa: setup (entry to past the set-up barrier), pack (V_PACK's pass),
        p_start / p_q / p_k (the producer starting, issuing its first Q and
        K), u0_q / u0_k (the first unit taken, its Q landed; its first key
        tile landed), u<i> (unit i from taken to finished, its epilogue
        included), g<i> (finished to the next taken: negative where the next
        unit starts under this one's end, UNIT_OVERLAP), tail (the last unit
        finished to the exit), units_med / units_max (units per CTA), all
        in us from the CTA's own entry; kc_u0, thousands of cycles of the
        first unit, and of its parts (overlapped configs): kc_first (its Q
        landed to its first softmax done), kc_t1 / kc_t2 (the second and
        third key tiles), kc_rest (the fourth to the last), kc_drain (the
        last P·V), kc_epi (the epilogue: split merge, O's stores); mhz.
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from evotune_path import evotune_binary  # noqa: E402
from side_by_side import TunedKernel, check, cuda, make_tensors  # noqa: E402

SLOTS = 32  # stamps per CTA (evotune_sm90.cuh's evotune_timeline rows)
CTAS = 4096  # CTAs stamped (its kTimelineCtas)


def dev_spec(args, tmp):
    """kernel_templates/ (or --templates) in tmp, the kernel's spec there with the timeline compiled in."""
    shutil.copytree(args.templates or os.path.join(ROOT, "kernel_templates"), os.path.join(tmp, "kernel_templates"))
    path = os.path.join(tmp, "kernel_templates", args.kernel, "spec.toml")
    with open(path) as f:
        text = f.read()
    kernel_keys = []
    if args.templates and "\nincludes = " not in text:
        kernel_keys.append('includes = ["../common"]')  # the copy's own common headers, not the binary's
    if args.option:
        flags = ", ".join(json.dumps(o) for o in args.option)
        if "\noptions = [" in text:
            text = text.replace("\noptions = [", f"\noptions = [{flags}, ", 1)
        else:
            kernel_keys.append(f"options = [{flags}]")
    if kernel_keys:
        text = text.replace("[kernel]\n", "[kernel]\n" + "".join(k + "\n" for k in kernel_keys), 1)
    # The stamps cost a 40-register producer warpgroup a few spilled bytes.
    text = text.replace("max_spill_bytes = 0", "max_spill_bytes = 128").replace("max_stack = 0", "max_stack = 128")
    define = 'EVOTUNE_SM90_TIMELINE = "1"\n'
    text = text.replace("[defines]\n", "[defines]\n" + define, 1) if "[defines]\n" in text else \
        text + "\n[defines]\n" + define
    with open(path, "w") as f:
        f.write(text)
    return path


def tune_one(args, spec, db, cfg):
    problem = ["--shape", args.shape] if args.shape else ["--problem", args.problem]
    run = [args.evotune, "--db", db, "run", "-q", "--kernel", spec, *problem, "--dtype", args.dtype,
           "--strategy", "exhaustive", "--budget", "1", "--sanitize", "none", "--config", cfg]
    r = subprocess.run(run, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(run)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    r = subprocess.run([args.evotune, "--db", db, "export", "last", "--format", "launch"], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


def stamps(args, doc):
    p = doc["problems"][0]
    t = make_tensors(p, {})
    k = TunedKernel(doc, p, t)
    grid = p["grid"][0]
    ptrs = []
    if grid > CTAS:
        raise SystemExit(f"{grid} CTAs: the timeline stamps the first {CTAS} only")
    for name in (b"evotune_timeline", b"evotune_timeline_clk"):
        ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
        check(cuda.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), k.module, name), "cuModuleGetGlobal")
        ptrs.append(ptr)
    row_bytes = grid * SLOTS * 8
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {}
    for mode in ("flush", "noflush"):
        buf = torch.zeros((args.reps, 2, grid * SLOTS), dtype=torch.int64, device="cuda")
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.reps)]
        stream = torch.cuda.current_stream().cuda_stream
        for _ in range(args.warmup):
            if mode == "flush":
                cache.zero_()
            k()
        for r in range(args.reps):
            if mode == "flush":
                cache.zero_()
            ev[r][0].record()
            k()
            ev[r][1].record()
            for j, ptr in enumerate(ptrs):
                check(cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(buf[r, j].data_ptr()), ptr,
                                                ctypes.c_size_t(row_bytes), ctypes.c_void_p(stream)),
                      "cuMemcpyDtoDAsync")
        torch.cuda.synchronize()
        both = buf.view(args.reps, 2, grid, SLOTS).cpu().numpy()
        out[mode] = (both[:, 0], both[:, 1], np.array([a.elapsed_time(b) * 1e3 for a, b in ev]))
    return out


def vendor(args):
    """The vendor's kernel on the same problem (name, callable), or None: cuBLAS (torch.matmul) for
    gemm_sm90, cuDNN's attention for 16-bit sdpa_fwd_sm90; none for FP8 attention."""
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    if args.kernel == "gemm_sm90":
        M, N, K = (int(x) for x in args.shape.split(","))
        a, b = torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)
        return "cuBLAS", lambda: a @ b
    if args.kernel != "sdpa_fwd_sm90":
        return None
    from torch.nn.attention import SDPBackend, sdpa_kernel
    p = {k: int(v) for k, v in (kv.split("=") for kv in args.problem.split(","))}
    B, H, S, D = p["B"], p["H"], p["S"], p["D"]
    hkv, skv = p.get("HKV") or H, p.get("SKV") or S
    q = torch.randn(B, H, S, D, device="cuda", dtype=dt)
    k, v = (torch.randn(B, hkv, skv, D, device="cuda", dtype=dt) for _ in range(2))
    kw = {"enable_gqa": hkv != H}
    if p.get("CAUSAL") and S == skv:
        kw["is_causal"] = True
    elif p.get("CAUSAL"):
        from torch.nn.attention.bias import causal_lower_right
        kw["attn_mask"] = causal_lower_right(S, skv)

    def run():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    return "cuDNN", run


def vendor_events(args, fn):
    """fn timed as stamps() times the kernel: event time per mode, replayed from a CUDA graph (PyTorch's
    attention call alone takes the host longer than a short kernel takes the GPU)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        fn = graph.replay
    except RuntimeError as e:  # not capturable here: timed as called
        print(f"# {e.__class__.__name__}: {str(e).splitlines()[0][:120]}; timing the calls", file=sys.stderr)
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {}
    for mode in ("flush", "noflush"):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.reps)]
        for r in range(args.warmup + args.reps):
            if mode == "flush":
                cache.zero_()
            if r >= args.warmup:
                ev[r - args.warmup][0].record()
            fn()
            if r >= args.warmup:
                ev[r - args.warmup][1].record()
        torch.cuda.synchronize()
        out[mode] = float(np.median([x.elapsed_time(y) * 1e3 for x, y in ev]))
    return out


def summarise_gemm(tl, clk, ev_us):
    """gemm_sm90: median over launches of: event time, span (first entry to last exit), entry skew, each unit's
    MMA end and epilogue length across CTAs, the exit spread, and the SM-time fraction spent outside."""
    rows = []
    for rep, cyc in zip(tl, clk):
        t0 = rep[:, 0].min()
        rel = (rep.astype(np.float64) - t0) / 1e3  # us
        rel[rep == 0] = np.nan
        end = rel[:, 15]
        span = np.nanmax(end)
        row = {"span": span, "skew": np.nanmax(rel[:, 0]), "exit_min": np.nanmin(end), "exit_med": np.nanmedian(end),
               "idle": 1 - np.nansum(end - rel[:, 0]) / (len(rep) * span)}
        # The last unit's epilogue, in steps: decoding the unit, staging the first piece, issuing its
        # store, the rest.
        mmas = rel[:, 2:10:2]
        last = np.array([np.nanmax(m) if not np.all(np.isnan(m)) else np.nan for m in mmas])
        lastepi = np.array([np.nanmax(e) if not np.all(np.isnan(e)) else np.nan for e in rel[:, 3:10:2]])
        row["last_start"] = np.nanmedian(rel[:, 10] - last)
        row["last_staged"] = np.nanmedian(rel[:, 11] - rel[:, 10])
        row["last_issued"] = np.nanmedian(rel[:, 12] - rel[:, 11])
        row["last_rest"] = np.nanmedian(lastepi - rel[:, 12])
        # The first unit's first and middle k-tiles landing (thread 0's full-barrier waits).
        row["u0_first"] = np.nanmedian(rel[:, 13])
        row["u0_half"] = np.nanmedian(rel[:, 14])
        # SM cycles (clock64, thousands): entry to the first k-tile, the first unit's MMAs from its first
        # k-tile, the second unit's from the end of the first epilogue.
        c = cyc.astype(np.float64) / 1e3
        c[rep == 0] = np.nan
        row["kc_start"] = np.nanmedian(c[:, 13] - c[:, 0])
        row["kc_setup"] = np.nanmedian(c[:, 17] - c[:, 0])  # thread 0 past the set-up barrier
        row["kc_prod"] = np.nanmedian(c[:, 19] - c[:, 0])  # the producer's leader starting
        row["kc_preissue"] = np.nanmedian(c[:, 18] - c[:, 0])  # about to issue its first loads
        row["kc_issue"] = np.nanmedian(c[:, 16] - c[:, 0])  # the producer's first loads issued
        row["kc_u0"] = np.nanmedian(c[:, 2] - c[:, 13])
        row["kc_u1"] = np.nanmedian(c[:, 4] - c[:, 3])
        row["mhz"] = np.nanmedian((c[:, 2] - c[:, 13]) / (rel[:, 2] - rel[:, 13])) * 1e3
        # Thread 0's full-barrier waits (thousands of cycles) in units 0 and 1: all k-tiles, the first four.
        for j, key in enumerate(("kw_u0", "kw_u0_first4", "kw_u1", "kw_u1_first4")):
            v = rep[:, 20 + j].astype(np.float64)
            row[key] = np.median((v[v > 0] - 1) / 1e3) if np.any(v > 0) else np.nan
        for u in range(3):
            mma, epi = rel[:, 2 + 2 * u], rel[:, 3 + 2 * u]
            if np.all(np.isnan(mma)):
                break
            row[f"u{u}_mma_min"], row[f"u{u}_mma_med"], row[f"u{u}_mma_max"] = (
                np.nanmin(mma), np.nanmedian(mma), np.nanmax(mma))
            row[f"u{u}_epi"] = np.nanmedian(epi - mma)
        rows.append(row)
    keys = rows[0].keys()
    med = {k: float(np.median([r.get(k, np.nan) for r in rows])) for k in keys}
    med["event"] = float(np.median(ev_us))
    return med


def summarise_sdpa(tl, clk, ev_us):
    """sdpa_fwd_sm90 / sdpa_fp8_sm90 (the slots in its kernel.cu above kTlUnits): median over launches of
    the event time, span, skew, exit spread, idle share, and each CTA's steps from its own entry (us)."""
    units = 6  # kTlUnits
    rows = []
    for rep, cyc in zip(tl, clk):
        t0 = rep[:, 0].min()
        rel = (rep.astype(np.float64) - t0) / 1e3  # us from the first entry
        rel[rep == 0] = np.nan
        rel[:, 20] = np.where(rep[:, 20] > 0, rep[:, 20] - 1, np.nan)  # a count, not a time
        entry, end = rel[:, 0], rel[:, 15]
        span = np.nanmax(end)
        row = {"span": span, "skew": np.nanmax(entry), "exit_min": np.nanmin(end), "exit_med": np.nanmedian(end),
               "idle": 1 - np.nansum(end - entry) / (len(rep) * span)}

        # Steps within a CTA by its SM's cycles (exact; %globaltimer ticks coarsely), in us at the
        # clock the first unit ran at.
        c = cyc.astype(np.float64)
        c[rep == 0] = np.nan
        mhz = np.nanmedian((c[:, 4] - c[:, 3]) / (rel[:, 4] - rel[:, 3]))

        def since_entry(slot):
            return np.nanmedian((c[:, slot] - c[:, 0]) / mhz) if not np.all(np.isnan(c[:, slot])) else np.nan
        row["setup"] = since_entry(2)
        row["pack"] = since_entry(21) - row["setup"]
        row["p_start"], row["p_q"], row["p_k"] = since_entry(16), since_entry(17), since_entry(18)
        row["u0_q"], row["u0_k"] = since_entry(3), since_entry(22)
        for i in range(units):
            taken, done = c[:, 3 + 2 * i] / mhz, c[:, 4 + 2 * i] / mhz
            if np.all(np.isnan(done)):
                break
            row[f"u{i}"] = np.nanmedian(done - taken)
            if i + 1 < units and not np.all(np.isnan(c[:, 5 + 2 * i])):
                row[f"g{i}"] = np.nanmedian(c[:, 5 + 2 * i] / mhz - done)
        n = rel[:, 20]
        last_done = np.array([r[4:4 + 2 * units:2][~np.isnan(r[4:4 + 2 * units:2])].max()
                              if not np.all(np.isnan(r[4:4 + 2 * units:2])) else np.nan for r in rel])
        # The tail only where the last unit finished is stamped (at most kTlUnits units).
        row["tail"] = np.nanmedian(np.where(n <= units, end - last_done, np.nan)) if np.any(n <= units) else np.nan
        row["units_med"], row["units_max"] = np.nanmedian(n), np.nanmax(n)
        row["kc_u0"] = np.nanmedian(c[:, 4] - c[:, 3]) / 1e3
        # The first unit's key-tile loop (slots 23-27, overlapped configs), thousands of cycles: Q landed
        # to the first softmax done, the second and third tiles' steps, the steps from there to the last,
        # the last P·V, and the epilogue (merge and O's stores).
        for name, a, b in (("kc_first", 3, 23), ("kc_t1", 23, 24), ("kc_t2", 24, 25), ("kc_rest", 25, 26),
                           ("kc_drain", 26, 27), ("kc_epi", 27, 4)):
            if not np.all(np.isnan(c[:, a] + c[:, b])):
                row[name] = np.nanmedian(c[:, b] - c[:, a]) / 1e3
        row["mhz"] = mhz
        rows.append(row)
    keys = rows[0].keys()
    med = {k: float(np.median([r.get(k, np.nan) for r in rows])) for k in keys}
    med["event"] = float(np.median(ev_us))
    return med


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", help="evotune binary (default: $EVOTUNE, else build/evotune)")
    ap.add_argument("--kernel", default="gemm_sm90", choices=["gemm_sm90", "sdpa_fwd_sm90", "sdpa_fp8_sm90"])
    ap.add_argument("--shape", help="gemm_sm90: M,N,K")
    ap.add_argument("--problem", help="attention: B=..,H=..,S=..,D=..[,CAUSAL=1][,HKV=..][,SKV=..][,VT=1]")
    ap.add_argument("--dtype", default="bf16", help="the output's type (FP8 attention: O's)")
    ap.add_argument("--config", action="append", required=True, help="a config of the kernel (repeatable)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--npz", help="write the raw stamps here")
    ap.add_argument("--templates", help="build from this kernel_templates/ tree instead (a changed copy; its "
                                        "common/ headers take the place of the binary's)")
    ap.add_argument("--option", action="append", default=[],
                    help="a compiler option for the kernel, e.g. -DNAME=1 (repeatable)")
    args = ap.parse_args()
    gemm = args.kernel == "gemm_sm90"
    if gemm != bool(args.shape) or gemm == bool(args.problem):
        ap.error("gemm_sm90 takes --shape M,N,K; the attention templates --problem B=..,H=..,S=..,D=..")
    args.evotune = evotune_binary(args.evotune)
    torch.zeros(1, device="cuda")
    tmp = tempfile.mkdtemp(prefix="evotune-tl-")
    spec, db = dev_spec(args, tmp), os.path.join(tmp, "tl.db")
    summarise = summarise_gemm if gemm else summarise_sdpa
    raw = {}
    v = vendor(args)
    if v:
        print(f"{v[0]} " + " ".join(f"{m}: event={t:.1f}" for m, t in vendor_events(args, v[1]).items()), flush=True)
    for i, cfg in enumerate(args.config):
        res = stamps(args, tune_one(args, spec, db, cfg))
        for mode, (tl, clk, ev) in res.items():
            raw[f"c{i}_{mode}"], raw[f"c{i}_{mode}_clk"], raw[f"c{i}_{mode}_event_us"] = tl, clk, ev
            m = summarise(tl, clk, ev)
            print(f"[{i}] {mode:<8} " + " ".join(f"{k}={v:.1f}" if k != "idle" else f"{k}={v:.3f}"
                                                for k, v in m.items()), flush=True)
        print(f"[{i}] = {cfg}", flush=True)
    if args.npz:
        np.savez_compressed(args.npz, configs=np.array(args.config), **raw)
