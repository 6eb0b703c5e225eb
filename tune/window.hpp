// How many configs the search keeps in flight (proposed, not yet recorded).
// Each is proposed without the results of those ahead of it, so the window
// is as small as keeps the pipeline's slower stage busy: by Little's law,
// that stage's throughput times a config's time in flight (its compile and
// its GPU time), from the mean times measured so far. A GPU-bound run
// (kernels slower than compiles) keeps few in flight, with a margin of
// compiled configs waiting for the GPU; a compile-bound one as many as it
// has compile processes and those on the GPU. Never more than twice the
// compile processes. It starts at a few and grows by one per result (the
// first results steer the most proposals, so they are not made blind);
// `--window N` fixes it.
#pragma once

#include "core/types.hpp"
#include "tune/plan.hpp"

namespace evotune {

class WindowSizer {
 public:
  // `slots`: configs run at once (GPUs, real or simulated); `compile_slots`:
  // configs compiled at once (the ranks' of an MPI job, all together;
  // 0: the plan's compile threads).
  WindowSizer(const TunePlan& plan, int slots, int compile_slots = 0);
  // A recorded trial: its compile time and, when it reached a GPU, its GPU
  // time; the longer of the trial's own and the wall time the loop saw its
  // staging and its run take (process start, loading, transfers; 0 in a
  // replay).
  void observe(const Trial& t, double staging_s = 0, double run_s = 0);
  int window() const;

 private:
  int fixed_ = 0;  // --window
  int cap_ = 4;
  int slots_ = 1;
  double compile_threads_ = 1;
  int results_ = 0;  // trials observed (constraint rejections aside)
  int compiled_ = 0;
  double compile_s_ = 0;  // summed over the compiled trials
  int ran_ = 0;
  double gpu_s_ = 0;  // summed over the trials that reached a GPU
};

}  // namespace evotune
