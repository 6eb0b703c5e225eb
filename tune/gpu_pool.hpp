// The GPU evaluator: one worker process per GPU (engine/worker_client.hpp),
// each holding the run's problems — inputs, reference outputs — set up once.
// A staged job runs on a free worker; with the sanitizer gate on every
// correct trial (`--sanitize all`), a job that passes verification also runs
// under compute-sanitizer before its trial counts. After the search, elites
// are staged again and re-measured here (retime.hpp, sanitize.hpp).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/sanitizer.hpp"
#include "engine/worker_client.hpp"
#include "tune/compiling.hpp"

namespace evotune {

class GpuPool : public CompilingEvaluator {
 public:
  // Spawns the compiler processes and the GPU workers at once: each creates
  // its CUDA context while the run is being opened.
  explicit GpuPool(const TunePlan& plan);

  int slots() const override { return static_cast<int>(workers_.size()); }
  int gpus() const override { return slots(); }
  // Compiles the support and reference kernels and sets the problems up on
  // every GPU. Throws EngineError (or SpecError: a reference that does not
  // compile) when it fails: the run cannot go on.
  void start() override;
  std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) override;
  double gpu_busy_s() const override;

  // The problems as the workers have them (for the sanitizer gate).
  const SetupRequest& setup() const { return setup_; }
  // Gates every correct trial on compute-sanitizer from now on.
  void sanitize_every_trial(const SanitizerGate* gate) { every_ = gate; }
  // Runs a staged job again on the first GPU (the final re-timing), its time
  // counted as GPU work.
  EvalReply remeasure(const EvalRequest& request, double timeout_s);
  // Times a baseline on the first GPU's problem buffers (after the run: not counted as its GPU work).
  std::vector<BaselineResult> baseline(const BaselineRequest& request, double timeout_s);
  // Counts other GPU work of the run (the elites under the sanitizer).
  void add_gpu_time(double seconds);
  int first_device() const { return plan_.gpus.front().ordinal; }

 private:
  Trial finish(Job& job, const EvalReply& reply, int slot, double elapsed_s) const;

  SetupRequest setup_;
  std::vector<std::unique_ptr<WorkerClient>> workers_;
  const SanitizerGate* every_ = nullptr;
  mutable std::mutex mu_;
  double gpu_busy_s_ = 0;  // guarded by mu_: runs finish on their own threads
  // The evaluations in flight, let finish before the workers go.
  std::vector<std::future<void>> tasks_;
};

// Sanitizer runs take far longer than plain evaluations.
double sanitizer_limit(double trial_limit_s);

}  // namespace evotune
