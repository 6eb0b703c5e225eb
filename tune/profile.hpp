// The profile step: Nsight Compute on a finished run's elites and default
// config, and optionally its baselines, on the run's problems, each profile
// stored with its trial or baseline. Each trial is evaluated once more by
// this binary (`run --strategy exhaustive --config ... --baselines none` into
// a scratch database) under ncu, which profiles the first launch of each
// problem's timed series (the NVTX range the worker opens around it, so
// verification launches of the check shapes are not taken), at the GPU's own
// clocks with caches flushed. Each baseline is measured once more the same
// way (`--baselines <its spec name>`, its problem alone), and ncu profiles
// the one call the worker (or the PyTorch script) makes in the baseline's
// own range after measuring it: the longest kernel of that call is stored.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace evotune {

struct ProfileOptions {
  std::string db_path;
  int64_t run_id = 0;
  int top = 3;               // elites, best first
  bool with_default = true;  // the template's default config too, where it was measured correct
  bool baselines = false;    // the run's baselines measured ok too (reference kernel, vendor libraries)
  std::string ncu;           // default: locate_ncu()
  std::string exe;           // the evotune that evaluates; default: this executable
  double timeout_s = 600;    // per trial
  // Where to keep a full Nsight Compute report (.ncu-rep) of each profiled
  // trial and baseline besides the stored metrics; empty: none.
  std::string reports_dir;
};

struct ProfileSummary {
  std::vector<TrialProfile> profiles;  // as stored
  double wall_s = 0;
};

// Throws UsageError (no such run, nothing to profile: a compile-only run or
// none correct, a reports_dir that is not a directory), EngineError (ncu missing, refused the counters, failed or
// profiled nothing: what it printed is in the message), StoreError. A failure
// leaves the profiles stored before it.
ProfileSummary profile_run(const ProfileOptions& options, std::ostream& log);

}  // namespace evotune
