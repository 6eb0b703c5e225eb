// The search loop: proposals run up to a window ahead of the observations
// (window.hpp), each made when a compile process is free to take it, so from
// the freshest results. A config is staged (compiled and gated) as soon as
// it is proposed. When a GPU frees, the staged configs waiting for one are a
// choice: the one the strategy ranks best on everything observed by then
// runs (budget counts GPU runs, not compiles), and the worst of a surplus
// that would only wait are dropped, never recorded. Trials are recorded as
// they finish; the strategy's proposals and choices are deterministic for a
// seed and the order results arrive in, so a replay (a simulated clock)
// gives the same run every time.
#pragma once

#include <deque>
#include <functional>
#include <future>
#include <optional>

#include "search/space.hpp"
#include "search/strategy.hpp"
#include "tune/evaluator.hpp"
#include "tune/plan.hpp"
#include "tune/recorder.hpp"
#include "tune/window.hpp"

namespace evotune {

// What a run on a slot may take, given the population's best trial so far:
// timing stops past abort_factor × its p50, a run is cut off past
// max(timeout_floor_s, timeout_factor × its GPU time).
Limits limits_for(const TunePlan& plan, const Trial* best);

struct SearchOutcome {
  bool interrupted = false;  // a stop was requested
  bool exhausted = false;    // the strategy ran out of configs
};

class SearchLoop {
 public:
  SearchLoop(const TunePlan& plan, const SearchSpace& space, Evaluator& ev, Strategy& strategy, RunRecorder& recorder,
             Wakeup& wake);
  // Lets whatever is still in flight finish; nothing of it is recorded.
  ~SearchLoop();
  SearchLoop(const SearchLoop&) = delete;
  SearchLoop& operator=(const SearchLoop&) = delete;

  // Runs until the budget is spent, the space is exhausted or a stop is
  // requested. `start` runs once, after the first configs are staging (it
  // sets the problems up on the GPUs meanwhile).
  SearchOutcome run(const std::function<void()>& start);

 private:
  // One proposed config on its way through: staged, run on a slot (or
  // dropped while it waits for one), recorded.
  struct Entry {
    Config config;
    double proposed_at = 0;
    double staging_s = 0;  // wall time from proposal to staged
    double run_started = 0;
    double run_s = 0;  // wall time on the slot
    std::future<Staged> staging;  // until taken
    std::optional<Job> job;       // staged for a slot
    int slot = -1;
    std::future<Trial> running;
    std::optional<Trial> trial;  // finished
    bool user_invalid = false;   // a user config the constraints reject: never counted as proposed
  };

  bool collect();
  bool record_finished();
  bool dispatch();
  void drop_surplus();
  bool refill();
  void abandon();
  long staging() const;
  std::vector<size_t> waiting() const;
  std::vector<double> scores(const std::vector<size_t>& entries);

  const TunePlan& plan_;
  const SearchSpace& space_;
  Evaluator& ev_;
  Strategy& strategy_;
  RunRecorder& recorder_;
  Wakeup& wake_;
  WindowSizer window_;
  std::deque<Entry> entries_;
  std::vector<bool> slot_busy_;
  // Staged jobs kept waiting per slot while every slot is busy.
  static constexpr size_t kWaitingPerSlot = 2;
  size_t next_seed_ = 0;
  int proposed_ = 0;  // in flight, not yet recorded
  bool exhausted_ = false;
};

}  // namespace evotune
