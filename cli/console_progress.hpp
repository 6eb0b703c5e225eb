// The tuning session as a terminal shows it: the run's header, one line per
// recorded trial, the sanitizer gate's findings, the re-timing rounds, the
// summary with the elite table (also `evotune top`'s).
#pragma once

#include <optional>
#include <ostream>

#include "tune/progress.hpp"
#include "tune/session.hpp"

namespace evotune {

class ConsoleProgress : public Progress {
 public:
  // quiet: the header, warnings and the summary only.
  ConsoleProgress(std::ostream& out, bool quiet) : out_(out), quiet_(quiet) {}
  void started(const TunePlan& plan, const RunInfo& run, int spent) override;
  void preparing(const TunePlan& plan) override;
  void trial(const TunePlan& plan, const Trial& t, int spent, const Trial* best) override;
  void sanitizer_finding(const Trial& t, const SanitizerFinding& f) override;
  void sanitizer_failed(const std::string& why) override;
  void sanitizer_done(const std::vector<std::string>& tools, int checked, int rejected, double seconds) override;
  void retime_started(size_t elites, const TuneOptions& o) override;
  void retime_round(int round, int rounds) override;
  void baselines_started(size_t baselines, size_t problems) override;
  void baselines_done(double seconds) override;
  void baseline(const TunePlan& plan, const BaselineResult& b) override;
  void finished(const TunePlan& plan, const RunSummary& s) override;

 private:
  std::ostream& out_;
  bool quiet_;
};

// A run with its progress written to `out` (honouring options.quiet).
TuneResult tune(const TuneOptions& options, std::ostream& out);

// The elite table printed at the end of a run (and by `evotune top`).
// The baselines beside the run's best: p50 (geomean over problems), the best's
// speedup over each, errors, and why one was skipped or failed.
void print_baselines(std::ostream& out, const RunInfo& run, const std::vector<BaselineResult>& baselines,
                     const Trial* best);
void print_elites(std::ostream& out, const RunInfo& run, const std::vector<Trial>& elites,
                  const std::optional<Trial>& default_trial, const KernelSpec* spec);

}  // namespace evotune
