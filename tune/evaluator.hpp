// Where a tuning run's configs are evaluated, behind one interface: a config
// is staged (compiled and gated, or looked up in a recorded dataset), then
// run on a free slot (a GPU, real or simulated). Implementations: GpuPool
// (GPU worker processes), CompileOnly (no GPU: staging is the whole
// evaluation), ReplayEvaluator (a dataset and a simulated clock) and
// RemoteEvaluator (the other ranks of an MPI job, remote.hpp). The
// search loop (search.hpp) drives any of them the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include "core/types.hpp"
#include "engine/plan.hpp"

namespace evotune {

// Wakes the search loop when a staging or a run finishes. Tasks fulfil their
// promise first and signal second, so a woken loop always finds the result
// ready.
class Wakeup {
 public:
  void notify();
  uint64_t events();
  // Returns when something happened after `seen` (or after `timeout`).
  void wait(uint64_t seen, std::chrono::milliseconds timeout = std::chrono::milliseconds(200));

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t events_ = 0;
};

// What a run on a slot may take, from the best trial at dispatch time.
struct Limits {
  std::vector<double> abort_us;  // per problem (check shapes included): stop timing past this p50 (0: never)
  double timeout_s = 20;
};

// A config staged for a slot: the trial so far (its config, compile time and
// resources; in a replay the recorded trial) and what the GPU needs.
struct Job {
  Trial trial;
  EvalRequest request;  // cubins and launch plans; empty in a replay
};

// The outcome of staging: a trial already finished (gated out, compile-only,
// recorded without GPU work), or a job for a slot.
struct Staged {
  std::optional<Trial> finished;
  Job job;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Configs run at once (GPUs, real or simulated), and compiled at once (0:
  // nothing is compiled, staging is immediate).
  virtual int slots() const = 0;
  virtual int compile_slots() const = 0;
  // GPUs whose time the run accounts for (0 without one).
  virtual int gpus() const = 0;
  // Prepares the problems on the GPUs; called once, after the first configs
  // are staging, so that both overlap.
  virtual void start() {}
  // Stages a config; `wake` is notified when the future is ready.
  virtual std::future<Staged> stage(const Config& c, Wakeup& wake) = 0;
  // Runs a staged job on a free slot; the trial is complete but for its id
  // and seq. `wake` is notified when the future is ready.
  virtual std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) = 0;
  // Seconds this session has run (a replay: its simulated clock), and GPU
  // seconds spent, summed over the GPUs.
  virtual double elapsed() const = 0;
  virtual double gpu_busy_s() const = 0;
  // Returns when a staging or a run may have finished after `seen` (the
  // loop had nothing to do). A simulated evaluator moves its clock to the
  // next of its events and completes it.
  virtual void wait(Wakeup& wake, uint64_t seen) { wake.wait(seen); }
  // Whether elapsed() is simulated.
  virtual bool simulated() const { return false; }
};

}  // namespace evotune
