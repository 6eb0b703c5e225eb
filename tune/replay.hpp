// The replay evaluator: a dataset of recorded trials (`evotune export RUN
// --format dataset`) stands in for the compiler and the GPUs, on a simulated
// clock of the same pipeline — compile slots, GPUs taken in order, a window
// of proposals ahead of the observations — so that strategies, resume and the
// search loop run and are tested anywhere.
#pragma once

#include <vector>

#include "tune/evaluator.hpp"
#include "tune/plan.hpp"

namespace evotune {

class ReplayEvaluator : public Evaluator {
 public:
  explicit ReplayEvaluator(const TunePlan& plan);

  int slots() const override { return plan_.slots; }
  int compile_slots() const override { return 0; }
  int gpus() const override { return plan_.slots; }
  // The recorded trial: finished at once when it never reached the GPU.
  std::future<Staged> stage(const Config& c, Wakeup& wake) override;
  // The recorded trial, on simulated GPU `slot`.
  std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) override;
  double elapsed() const override { return now_; }
  double gpu_busy_s() const override { return gpu_busy_s_; }
  // Advances the simulated clock by the trial's recorded compile and GPU time.
  void recorded(const Trial& t, double proposed_at) override;
  bool simulated() const override { return true; }

 private:
  const TunePlan& plan_;
  double now_ = 0;
  double gpu_busy_s_ = 0;
  std::vector<double> compile_free_;  // when each simulated compile slot is free
  std::vector<double> gpu_free_;      // when each simulated GPU is free
};

}  // namespace evotune
