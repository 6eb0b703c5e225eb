#!/usr/bin/env python3
"""Kernel time against event time: tuned gemm_sm90 runs and cuBLAS, side by side.

Event time (two CUDA events around each launch, after an L2 flush) is the
kernel plus whatever the launch costs on the GPU between the events. This
times the winner of each evotune run given and cuBLAS (torch.matmul) on the
same inputs, --rounds rounds in rotated order, with bench/kernel_time.py
(CUPTI kernel records under torch.profiler, L2 flushed before every call,
CUDA events recorded around every call as well).

Needs:  a CUDA GPU that runs the runs' kernels; PyTorch and numpy; an evotune
        binary (--evotune, else $EVOTUNE, else build/evotune) and a database
        holding finished runs of a GEMM template (gemm_sm90 or gemm) at --shape,
        e.g. from `evotune run --kernel gemm_sm90 --shape 8192,1024,8192 --dtype bf16`.
Run:    tools/kprof.py --db bench.db --runs 1,2 --shape 8192,1024,8192
        With --exporters, runs tuned by different builds (say, before and after
        a kernel change, in one database) are compared in one process: a launch
        export needs the binary whose kernel sources the run was tuned with.
Prints: per contender the median event time, the median kernel time, their
        difference and the gap from the flush's end to the GEMM kernel's start
        (all in us, with the number of calls); then per run cuBLAS's kernel time
        over the run's, round by round (mean, median, min, max, sd).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from evotune_path import evotune_binary  # noqa: E402
from kernel_time import KernelTimer  # noqa: E402
from side_by_side import TunedKernel, make_tensors  # noqa: E402


def load(args, run, exporter):
    r = subprocess.run([exporter, "--db", args.db, "export", str(run), "--format", "launch"], capture_output=True,
                       text=True, check=True)
    doc = json.loads(r.stdout)
    p = doc["problems"][0]
    t = make_tensors(p, {})
    return TunedKernel(doc, p, t), t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evotune", help="evotune binary (default: $EVOTUNE, else build/evotune)")
    ap.add_argument("--db", required=True)
    ap.add_argument("--runs", required=True, help="comma-separated run ids")
    ap.add_argument("--exporters", help="comma-separated evotune binaries that export each run (default --evotune; "
                    "a launch export needs the binary whose kernel sources the run was tuned with)")
    ap.add_argument("--shape", required=True, help="M,N,K")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    args.evotune = evotune_binary(args.evotune)
    M, N, K = (int(x) for x in args.shape.split(","))
    contenders = []
    runs = args.runs.split(",")
    exporters = args.exporters.split(",") if args.exporters else [args.evotune] * len(runs)
    for run, exporter in zip(runs, exporters):
        k, t = load(args, run, exporter)
        contenders.append((f"run {run}", k, t))
    _, _, t0 = contenders[0]
    a = t0["A"].view(M, K)
    b = t0["B"].view(K, N)
    contenders.append(("cuBLAS", lambda: a @ b, None))
    timer = KernelTimer()
    for _, fn, _ in contenders:  # warm-up
        for _ in range(20):
            timer.flush()
            fn()
    torch.cuda.synchronize()
    stats = {name: {"event": [], "kernel": [], "gap": []} for name, _, _ in contenders}
    per_round = {name: [] for name, _, _ in contenders}  # median kernel time of each round
    for r in range(args.rounds):
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        for name, fn, _ in order:
            calls = timer.run([fn], args.reps, events=True)[0]
            stats[name]["event"] += [c.event_us for c in calls]
            stats[name]["kernel"] += [c.kernel_us for c in calls]
            stats[name]["gap"] += [c.lead_us for c in calls]
            per_round[name].append(np.median([c.kernel_us for c in calls]))
    print(f"{'contender':<10} {'event us':>9} {'kernel us':>10} {'event-kernel':>13} {'flush end->start':>17}  n")
    for name, s in stats.items():
        ev, kn, gp = (np.median(s[k]) if s[k] else float("nan") for k in ("event", "kernel", "gap"))
        print(f"{name:<10} {ev:9.1f} {kn:10.1f} {ev - kn:13.1f} {gp:17.1f}  {len(s['kernel'])}")
    # cuBLAS's kernel time over each run's, round by round (both timed in the same round).
    base = np.array(per_round["cuBLAS"])
    for name, _, _ in contenders[:-1]:
        r = base / np.array(per_round[name])
        print(f"{name}: cuBLAS/ours by kernel time per round: mean {r.mean():.4f}, median {np.median(r):.4f}, "
              f"min {r.min():.4f}, max {r.max():.4f}, sd {r.std(ddof=1) if len(r) > 1 else 0:.4f} over {len(r)} rounds")


if __name__ == "__main__":
    main()
