// The run's record as the session goes: the run opened (or a resumed one
// reopened, its trials replayed into the strategy), each trial committed in
// proposal order with the elite population it produced, the run's
// statistics, its final status. The population is the strategy's own.
#pragma once

#include <optional>
#include <vector>

#include "search/strategy.hpp"
#include "store/store.hpp"
#include "tune/evaluator.hpp"
#include "tune/plan.hpp"
#include "tune/progress.hpp"

namespace evotune {

class RunRecorder {
 public:
  RunRecorder(const TunePlan& plan, Store& store, Strategy& strategy, Progress& progress);

  // Creates the run (or reopens the resumed one) and gives the strategy the
  // trials it already has.
  void open();
  // Commits a finished trial (the evaluator keeps the run's clock).
  void record(Trial t, Evaluator& ev);
  // The sanitizer gate's verdicts on a recorded elite.
  void sanitized(const Trial& t, const std::vector<std::string>& tools);
  void sanitizer_finding(const Trial& t, const SanitizerFinding& f);
  // Ends the run ("done", "interrupted" or "failed") with its statistics.
  void finish(const std::string& status, Evaluator& ev);

  const RunInfo& run() const { return run_; }
  int spent() const { return spent_; }
  const std::vector<int>& counts() const { return counts_; }
  const std::optional<Trial>& default_trial() const { return default_trial_; }
  const RunStats& stats() const { return stats_; }
  Population& population() { return strategy_.population(); }

 private:
  void update_time(Evaluator& ev);

  const TunePlan& plan_;
  Store& store_;
  Strategy& strategy_;
  Progress& progress_;
  RunInfo run_;
  RunStats stats_;  // the run's totals (earlier sessions included)
  int spent_ = 0;
  int recorded_ = 0;  // trials recorded this session
  std::vector<int> counts_;
  std::optional<Trial> default_trial_;
};

}  // namespace evotune
