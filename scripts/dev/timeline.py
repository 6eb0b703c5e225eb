#!/usr/bin/env python3
"""Developer probe for a lent GPU host: per-CTA timelines of gemm_sm90.

Builds a copy of the gemm_sm90 spec that defines GEMM_SM90_TIMELINE (kernel.cu
then stamps %globaltimer per CTA: entry, end of each unit's MMAs and of its
epilogue, exit), compiles and verifies each --config with evotune (one
exhaustive trial), and launches the cubin the way bench/side_by_side.py does,
back to back, with and without an L2 flush between launches (the flush is
triton do_bench's: zeroing 256 MB). The stamps are copied out in stream order
(no host synchronisation between launches, so the GPU stays at its steady
state) and summarised per config and mode (median over launches of each
figure, in us from the first CTA's entry; u<i>_* per unit, last_* the steps
of each CTA's last epilogue); --npz keeps the raw stamps.

    scripts/dev/timeline.py --shape 8192,1024,8192 --config BLOCK_M=128,PERSISTENT=1 --config ...
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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from side_by_side import TunedKernel, check, cuda, make_tensors  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SLOTS = 16


def dev_spec(tmp):
    """gemm_sm90's spec and sources in tmp, with the timeline compiled in."""
    src = os.path.join(ROOT, "kernel_templates", "gemm_sm90")
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), tmp)
    with open(os.path.join(tmp, "spec.toml"), "a") as f:
        f.write('\n[defines]\nGEMM_SM90_TIMELINE = "1"\n')
    return os.path.join(tmp, "spec.toml")


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
    ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
    check(cuda.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), k.module, b"gemm_sm90_timeline"),
          "cuModuleGetGlobal")
    row_bytes = grid * SLOTS * 8
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {}
    for mode in ("flush", "noflush"):
        buf = torch.zeros((args.reps, grid * SLOTS), dtype=torch.int64, device="cuda")
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
            check(cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(buf[r].data_ptr()), ptr, ctypes.c_size_t(row_bytes),
                                            ctypes.c_void_p(stream)), "cuMemcpyDtoDAsync")
        torch.cuda.synchronize()
        out[mode] = (buf.view(args.reps, grid, SLOTS).cpu().numpy(),
                     np.array([a.elapsed_time(b) * 1e3 for a, b in ev]))
    return out


def summarise(tl, ev_us):
    """Median over launches of: event time, span (first entry to last exit), entry skew, each unit's
    MMA end and epilogue length across CTAs, the exit spread, and the SM-time fraction spent outside."""
    rows = []
    for rep in tl:
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
    ap.add_argument("--evotune", default=os.path.join(ROOT, ".device-build", "evotune"))
    ap.add_argument("--shape", required=True, help="M,N,K")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", action="append", required=True, help="gemm_sm90 config (repeatable)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--npz", help="write the raw stamps here")
    args = ap.parse_args()
    torch.zeros(1, device="cuda")
    tmp = tempfile.mkdtemp(prefix="evotune-tl-")
    spec, db = dev_spec(tmp), os.path.join(tmp, "tl.db")
    raw = {}
    for i, cfg in enumerate(args.config):
        res = stamps(args, tune_one(args, spec, db, cfg))
        for mode, (tl, ev) in res.items():
            raw[f"c{i}_{mode}"], raw[f"c{i}_{mode}_event_us"] = tl, ev
            m = summarise(tl, ev)
            print(f"[{i}] {mode:<8} " + " ".join(f"{k}={v:.1f}" if k != "idle" else f"{k}={v:.3f}"
                                                for k, v in m.items()), flush=True)
        print(f"[{i}] = {cfg}", flush=True)
    if args.npz:
        np.savez_compressed(args.npz, configs=np.array(args.config), **raw)
