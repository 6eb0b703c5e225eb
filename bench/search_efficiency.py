#!/usr/bin/env python3
"""Search efficiency on recorded spaces, no GPU needed.

Replays every recorded space (tests/data/*.json with their built-in kernels,
and each folder of ../shared/search_spaces with a spec.toml and dataset.json)
with `evotune run --replay` over a set of seeds per strategy, and prints per
space: the mean best/optimum after 20, 50, 100 and 200 evaluations, and the
median evaluations to come within 2% and 5% of the optimum (the best ok trial
of the dataset; a run that never gets there counts as the space's size, as in
Kernel Tuner's figures). evo runs at three settings: one compile process with
a window of one (sequential), and the default window of a 16- and a 64-core
host (`-j 16`, `-j 64`); the replay's simulated clock charges each trial its
recorded compile and GPU time. random does not depend on the window.

    bench/search_efficiency.py [--seeds 25] [--first-seed 1] [--budget 1000]
        [--spaces DIR] [--only NAME,...] [--evotune PATH] [--jobs N]
"""
import argparse
import concurrent.futures
import glob
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from evotune_path import ROOT, evotune_binary  # noqa: E402

CHECKPOINTS = (20, 50, 100, 200)
WITHIN = (0.02, 0.05)
# name, strategy, extra run options
SETTINGS = (
    ("evo w1", "evo", ["-j", "1", "--window", "1"]),
    ("evo 16-core", "evo", ["-j", "16"]),
    ("evo 64-core", "evo", ["-j", "64"]),
    ("random", "random", ["-j", "1", "--window", "1"]),
)


def find_spaces(shared):
    spaces = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.json"))):
        spaces.append((os.path.splitext(os.path.basename(path))[0], path, None))
    for spec in sorted(glob.glob(os.path.join(shared, "*", "spec.toml"))):
        folder = os.path.dirname(spec)
        data = os.path.join(folder, "dataset.json")
        if os.path.isfile(data):
            spaces.append((os.path.basename(folder), data, spec))
    return spaces


def space_facts(dataset):
    with open(dataset) as f:
        trials = json.load(f)["trials"]
    fits = [t["fitness"] for t in trials if t["status"] == "ok" and t["fitness"] > 0]
    return min(fits), len(trials)


def one_run(evotune, dataset, spec, strategy, extra, seed, budget, tmp):
    db = os.path.join(tmp, f"{os.getpid()}-{seed}-{strategy}-{'_'.join(extra)}.db")
    cmd = [evotune, "--db", db, "run", "-q", "--replay", dataset, "--budget", str(budget), "--seed", str(seed),
           "--strategy", strategy, "--retime", "0"] + extra
    if spec:
        cmd += ["--kernel", spec]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT status, fitness FROM trials WHERE status != 'invalid' ORDER BY seq").fetchall()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    best, curve = float("inf"), []
    for status, fitness in rows:
        if status == "ok" and fitness and fitness > 0:
            best = min(best, fitness)
        curve.append(best)
    return curve


def summarise(curves, optimum, size):
    out = {}
    for n in CHECKPOINTS:
        vals = [c[min(n, len(c)) - 1] / optimum for c in curves if c]
        out[f"@{n}"] = statistics.mean(vals) if vals else float("nan")
    for w in WITHIN:
        hits = []
        for c in curves:
            at = next((i + 1 for i, b in enumerate(c) if b <= optimum * (1 + w)), None)
            hits.append(at if at is not None else size)
        out[f"to {w:.0%}"] = statistics.median(hits)
        out[f"miss {w:.0%}"] = sum(1 for c in curves if not any(b <= optimum * (1 + w) for b in c))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=25)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--budget", type=int, default=1000, help="evaluations per run (a miss counts as the space size)")
    ap.add_argument("--spaces", default=os.path.join(ROOT, "..", "shared", "search_spaces"),
                    help="folder of recorded spaces (default ../shared/search_spaces)")
    ap.add_argument("--only", default="", help="comma-separated space names")
    ap.add_argument("--settings", default="", help="comma-separated settings (default: all)")
    ap.add_argument("--evotune", default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", default="", help="also write the figures to this file")
    args = ap.parse_args()
    evotune = evotune_binary(args.evotune)
    spaces = find_spaces(os.path.abspath(args.spaces))
    if args.only:
        keep = set(args.only.split(","))
        spaces = [s for s in spaces if s[0] in keep]
    settings = [s for s in SETTINGS if not args.settings or s[0] in args.settings.split(",")]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, dataset, spec in spaces:
            optimum, size = space_facts(dataset)
            budget = min(args.budget, size)
            futures = {(label, seed): pool.submit(one_run, evotune, dataset, spec, strategy, extra, seed, budget, tmp)
                       for label, strategy, extra in settings for seed in seeds}
            curves = {}
            for i, ((label, seed), fut) in enumerate(futures.items()):
                curves.setdefault(label, []).append(fut.result())
                print(f"\r{name}: {i + 1}/{len(futures)} runs", end="", file=sys.stderr, flush=True)
            print("", file=sys.stderr)
            results[name] = {label: summarise(c, optimum, size) for label, c in curves.items()}
            print_table(name, optimum, size, budget, results[name])
    os.rmdir(tmp)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def print_table(name, optimum, size, budget, rows):
    print(f"\n{name}: {size} configs, optimum {optimum:.4g}, budget {budget}")
    cols = [f"@{n}" for n in CHECKPOINTS] + [f"to {w:.0%}" for w in WITHIN]
    print(f"  {'setting':<12}" + "".join(f"{c:>8}" for c in cols) + "   misses 2%/5%")
    for label, r in rows.items():
        cells = "".join(f"{r[c]:>8.3f}" for c in cols[:len(CHECKPOINTS)])
        cells += "".join(f"{r[c]:>8g}" for c in cols[len(CHECKPOINTS):])
        print(f"  {label:<12}{cells}   {r['miss 2%']}/{r['miss 5%']}", flush=True)


if __name__ == "__main__":
    main()
