// Replaying a dataset of recorded trials (`evotune export RUN --format
// dataset`) in place of the compiler and the GPUs.
//
// ReplayLookup looks each config up and returns its recorded trial at once,
// as if compiled and run on this host's GPU `slot`. ReplayEvaluator puts a
// source of recorded trials (a lookup here, or the ranks of an MPI job that
// look them up on their hosts) on a simulated clock of the same pipeline: a
// staging takes a compile process for the trial's recorded compile time, a
// run takes its GPU for the recorded GPU time, and each finishes only when
// the loop waits and the clock reaches it (events at the same time in the
// order they were started). So the search loop runs exactly as on a host
// with those compile processes and GPUs, and a seed gives the same run
// every time, anywhere, on any number of ranks.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "tune/evaluator.hpp"
#include "tune/plan.hpp"

namespace evotune {

class ReplayLookup : public Evaluator {
 public:
  // `slots`: the simulated GPUs of this host.
  ReplayLookup(const TunePlan& plan, int slots);

  int slots() const override { return slots_; }
  int compile_slots() const override { return static_cast<int>(plan_.compile_threads); }
  int gpus() const override { return slots_; }
  // The recorded trial: finished when it never reached the GPU (or is not in
  // the dataset: invalid).
  std::future<Staged> stage(const Config& c, Wakeup& wake) override;
  // The recorded trial, as measured by this host's GPU `slot`.
  std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) override;
  double elapsed() const override { return 0; }
  double gpu_busy_s() const override { return 0; }

 private:
  const TunePlan& plan_;
  int slots_;
  std::string host_;
};

class ReplayEvaluator : public Evaluator {
 public:
  // The plan's simulated GPUs and compile processes over `source` (default:
  // a lookup here), whose slots must be as many.
  explicit ReplayEvaluator(const TunePlan& plan, std::unique_ptr<Evaluator> source = nullptr);

  int slots() const override { return plan_.slots; }
  int compile_slots() const override { return static_cast<int>(plan_.compile_threads); }
  int gpus() const override { return plan_.slots; }
  // The recorded trial, after its compile time on the first free simulated
  // compile process: finished when it never reached the GPU.
  std::future<Staged> stage(const Config& c, Wakeup& wake) override;
  // The recorded trial, after its GPU time on simulated GPU `slot`.
  std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) override;
  double elapsed() const override { return now_; }
  double gpu_busy_s() const override { return gpu_busy_s_; }
  // Moves the clock to the next event and completes it (all of those due
  // at the same time); returns at once when none is pending.
  void wait(Wakeup& wake, uint64_t seen) override;
  bool simulated() const override { return true; }
  // Stagings and runs not yet completed.
  size_t pending() const { return stagings_.size() + runs_.size(); }

 private:
  using Key = std::pair<double, uint64_t>;  // when it completes, the order it was started

  // The source's answer, waited for now (the clock stands still meanwhile).
  template <typename T>
  T settle(std::future<T> f);

  const TunePlan& plan_;
  std::unique_ptr<Evaluator> source_;
  Wakeup source_wake_;
  double now_ = 0;
  double gpu_busy_s_ = 0;
  uint64_t started_ = 0;
  std::vector<double> compile_free_;  // when each simulated compile process is free
  std::map<Key, std::pair<std::promise<Staged>, Staged>> stagings_;
  std::map<Key, std::pair<std::promise<Trial>, Trial>> runs_;
};

}  // namespace evotune
