// What a user asks of a tuning run (TuneOptions), and what the run gives back
// (TuneResult). The options are resolved once into a TunePlan (plan.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "store/store.hpp"

namespace evotune {

struct TuneOptions {
  std::string kernel;                 // built-in name or spec path
  std::vector<std::string> problems;  // "2,8,512,64" or "B=2,H=8,S=512,D=64"
  std::optional<std::string> dtype;   // default: the spec's first dtype
  int budget = 128;
  int elites = 6;
  uint64_t seed = 1;
  std::string strategy = "evo";
  std::string db_path = "evotune.db";
  bool compile_only = false;
  std::string arch;                // compile-only target (or a check on the device's)
  int compile_threads = 0;         // 0: one per core
  double compile_timeout_s = 300;  // a compile that takes longer is cut off
  bool isolate_compiles = true;    // NVRTC in child processes (false: threads of this one)
  int device = 0;
  std::string gpus;                // --gpus: "all" or ordinals "0,1"; with a replay, N simulated GPUs
  std::string replay_path;         // evaluate from a dataset instead of a GPU
  bool replay_warm_cache = false;  // replay: charge no compile time (a warm compile cache)
  int retime_rounds = 3;           // final interleaved re-timing of the elites (0: none)
  // Each re-timing evaluation first keeps the GPU under the elite's own load
  // this long (wall ms; on an H200 clocks settle within ~150 ms), then
  // samples for as long again (at most 2000 launches): every elite is timed
  // at the clocks a sustained run of it settles to (0: the search's timing).
  double retime_ms = 200;
  double timeout_floor_s = 20;  // a trial's time limit is at least this...
  double timeout_factor = 20;   // ...or this many times the best trial's GPU time
  double abort_factor = 3;      // stop timing once p50 > factor × the best's p50
  TimingOptions timing;
  bool use_cache = true;
  std::vector<std::string> seed_configs;  // evaluated first ("BLOCK_M=64,...")
  int64_t resume_run = 0;
  // The options given on the command line, by long name ("--seed"). A resumed
  // run takes its own values for those left out and refuses a given one that
  // differs from its own.
  std::set<std::string> given;
  std::string worker_exe;  // default: this executable
  int window = 0;          // configs in flight; 0: auto
  std::string command_line;
  bool quiet = false;  // no per-trial or progress lines (the header and the summary remain)
  // compute-sanitizer gate: "none", "elites" (each elite once, before the
  // final re-timing; a finding drops it and the next one moves up) or "all"
  // (every trial that passes verification). Empty: "elites" where
  // compute-sanitizer is installed, off (and said so) where it is not.
  std::string sanitize;
  // Baselines measured after the re-timing (tune/baselines.hpp): "all" (the
  // reference kernel and every [[baseline]] of the spec), "none", or names.
  std::string baselines = "all";
};

struct TuneResult {
  RunInfo run;
  double gpu_busy = 0;      // fraction of wall time × GPUs spent verifying and timing
  double compile_busy = 0;  // fraction of wall time × compile slots spent compiling
  // This session's search alone (its set-up included, the elites' checks and
  // re-timing after it not): what more GPUs or ranks speed up.
  int search_trials = 0;
  double search_s = 0;
  double search_gpu_busy = 0;  // fraction of search_s × GPUs
  double after_search_s = 0;   // the elites' checks and re-timing
  std::vector<Trial> elites;
  std::optional<Trial> default_trial;
  std::vector<int> status_counts;         // by TrialStatus
  std::vector<BaselineResult> baselines;  // measured by this session
  bool interrupted = false;
  bool exhausted = false;  // the strategy ran out of configs before the budget
  // This process was a rank of an MPI job that evaluated for rank 0, which
  // ran the search, recorded it and reported it.
  bool evaluated_for_rank0 = false;
};

// Set by SIGINT: the run records the trial in hand and stops.
std::atomic<bool>& stop_requested();

}  // namespace evotune
