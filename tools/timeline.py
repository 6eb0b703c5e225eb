#!/usr/bin/env python3
"""Per-CTA timelines of gemm_sm90: when each CTA starts, loads, computes and stores.

gemm_sm90's kernel.cu has a build option, GEMM_SM90_TIMELINE (off in the
product; the kernel's comment above tl_mark lists the stamps): thread 0 of
each CTA stamps %globaltimer and the SM's clock64 into a table of 32 slots per
CTA at fixed points (entry, set-up done, first loads issued, first k-tile
landed, the end of each tile's MMAs and epilogue, exit) and counts the cycles
it waits on operands. This tool copies the gemm_sm90 template to a temporary
folder, turns the option on in the copy's spec ([defines]; its spill and stack
gates are loosened to 128 bytes, which the stamps cost a producer warpgroup),
tunes each --config there as a one-trial run (so it is compiled, gated and
verified by evotune), and launches the cubin the way bench/side_by_side.py
does: back to back, with and without an L2 flush between launches (256 MB
zeroed, as triton's do_bench), the stamps copied out in stream order with no
host synchronisation between launches. cuBLAS (torch.matmul) is timed on the
same shape and modes by CUDA events for comparison. Cycles do not depend on
the clock the power limit allows, so they compare configs exactly.

Needs:  a Hopper GPU (sm_90a); PyTorch and numpy; an evotune binary
        (--evotune, else $EVOTUNE, else build/evotune).
Run:    tools/timeline.py --shape 8192,1024,8192 --config BLOCK_N=256,PERSISTENT=1 --config ...
        --npz FILE keeps the raw stamps (per config and mode).
Prints: cuBLAS's event time per mode (us); then per config and mode (flush,
        noflush) one line of medians over launches: event time and span (us),
        entry skew, exit spread, idle (the SM-time share outside the CTAs);
        u<i>_mma_* / u<i>_epi, when unit i's MMAs ended and its epilogue took
        (us from the first CTA's entry); u0_first / u0_half, when the first
        unit's first and middle k-tiles landed; last_*, the steps of each CTA's
        last epilogue; kc_*, thousands of SM cycles from entry to the set-up
        barrier, the producer starting and issuing its first loads, the first
        k-tile landing, and of the first and second unit's MMAs; mhz, the clock
        they imply; kw_*, thousands of cycles thread 0 waited on operands in
        units 0 and 1 (all k-tiles, the first four).
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

SLOTS = 32  # stamps per CTA (kernel.cu's gemm_sm90_timeline rows)


def dev_spec(tmp):
    """gemm_sm90's spec and sources in tmp, with the timeline compiled in."""
    src = os.path.join(ROOT, "kernel_templates", "gemm_sm90")
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), tmp)
    path = os.path.join(tmp, "spec.toml")
    with open(path) as f:
        text = f.read()
    # The stamps cost a 40-register producer warpgroup a few spilled bytes.
    text = text.replace("max_spill_bytes = 0", "max_spill_bytes = 128").replace("max_stack = 0", "max_stack = 128")
    with open(path, "w") as f:
        f.write(text + '\n[defines]\nGEMM_SM90_TIMELINE = "1"\n')
    return path


def tune_one(args, spec, db, cfg):
    run = [args.evotune, "--db", db, "run", "-q", "--kernel", spec, "--shape", args.shape, "--dtype", args.dtype,
           "--strategy", "exhaustive", "--budget", "1", "--config", cfg]
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
    for name in (b"gemm_sm90_timeline", b"gemm_sm90_timeline_clk"):
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


def cublas_events(args):
    """cuBLAS (torch) on the same shape, timed as stamps() times the kernel: event time per mode."""
    M, N, K = (int(x) for x in args.shape.split(","))
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    a, b = torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {}
    for mode in ("flush", "noflush"):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.reps)]
        for r in range(args.warmup + args.reps):
            if mode == "flush":
                cache.zero_()
            if r >= args.warmup:
                ev[r - args.warmup][0].record()
            a @ b
            if r >= args.warmup:
                ev[r - args.warmup][1].record()
        torch.cuda.synchronize()
        out[mode] = float(np.median([x.elapsed_time(y) * 1e3 for x, y in ev]))
    return out


def summarise(tl, clk, ev_us):
    """Median over launches of: event time, span (first entry to last exit), entry skew, each unit's
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


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", help="evotune binary (default: $EVOTUNE, else build/evotune)")
    ap.add_argument("--shape", required=True, help="M,N,K")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", action="append", required=True, help="gemm_sm90 config (repeatable)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--npz", help="write the raw stamps here")
    args = ap.parse_args()
    args.evotune = evotune_binary(args.evotune)
    torch.zeros(1, device="cuda")
    tmp = tempfile.mkdtemp(prefix="evotune-tl-")
    spec, db = dev_spec(tmp), os.path.join(tmp, "tl.db")
    raw = {}
    print("cuBLAS " + " ".join(f"{m}: event={v:.1f}" for m, v in cublas_events(args).items()), flush=True)
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
