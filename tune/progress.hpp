// What a tuning run reports as it goes, for whoever shows it: the run's
// header, each recorded trial, the sanitizer gate's findings, the re-timing
// rounds and the summary. The session never prints; cli/console_progress.hpp
// writes these events to a terminal.
#pragma once

#include <string>
#include <vector>

#include "core/types.hpp"
#include "engine/sanitizer.hpp"
#include "store/store.hpp"
#include "tune/options.hpp"
#include "tune/plan.hpp"

namespace evotune {

// The summary of a finished (or interrupted) session.
struct RunSummary {
  const TuneResult* result = nullptr;
  RunStats stats;          // the run's totals, earlier sessions included
  int spent = 0;           // trials that spent budget
  bool simulated = false;  // a replay's simulated clock
  bool gpu_time = false;   // the run measured GPU time (not compile-only)
};

class Progress {
 public:
  virtual ~Progress() = default;
  // The run is open: new (spent 0) or resumed.
  virtual void started(const TunePlan& /*plan*/, const RunInfo& /*run*/, int /*spent*/) {}
  // The problems are being set up on the GPUs.
  virtual void preparing(const TunePlan& /*plan*/) {}
  // A trial was recorded; `best` is the population's best after it (or null).
  virtual void trial(const TunePlan& /*plan*/, const Trial& /*t*/, int /*spent*/, const Trial* /*best*/) {}
  virtual void sanitizer_finding(const Trial& /*t*/, const SanitizerFinding& /*f*/) {}
  // The gate could not run (not asked for explicitly, so the run goes on).
  virtual void sanitizer_failed(const std::string& /*why*/) {}
  virtual void sanitizer_done(const std::vector<std::string>& /*tools*/, int /*checked*/, int /*rejected*/,
                              double /*seconds*/) {}
  virtual void retime_started(size_t /*elites*/, const TuneOptions& /*o*/) {}
  virtual void retime_round(int /*round*/, int /*rounds*/) {}
  virtual void baselines_started(size_t /*baselines*/, size_t /*problems*/) {}
  virtual void baseline(const TunePlan& /*plan*/, const BaselineResult& /*b*/) {}
  // The step's wall time, which the run's own time leaves out.
  virtual void baselines_done(double /*seconds*/) {}
  virtual void finished(const TunePlan& /*plan*/, const RunSummary& /*s*/) {}
};

}  // namespace evotune
