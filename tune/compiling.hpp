// Evaluators that compile: the configs are staged on a pool of threads, each
// NVRTC compile in a compiler process of its own. CompileOnly stops there (a
// compile-only run needs no GPU); GpuPool (gpu_pool.hpp) goes on to the GPU.
#pragma once

#include <chrono>
#include <memory>

#include "engine/compile_service.hpp"
#include "engine/thread_pool.hpp"
#include "tune/candidate.hpp"
#include "tune/evaluator.hpp"
#include "tune/plan.hpp"

namespace evotune {

class CompilingEvaluator : public Evaluator {
 public:
  // Starts the compiler processes (each loads NVRTC) at once.
  explicit CompilingEvaluator(const TunePlan& plan, long long smem_optin = 0);
  ~CompilingEvaluator() override;

  int compile_slots() const override { return static_cast<int>(plan_.compile_threads); }
  std::future<Staged> stage(const Config& c, Wakeup& wake) override;
  double elapsed() const override;
  // The same staging, here and now (an elite staged again after the search).
  Staged stage_now(const Config& c) const;
  CompileService& compiler() { return compiler_; }

 protected:
  const TunePlan& plan_;
  CompileService compiler_;
  CandidateBuilder builder_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  // Last: its destructor joins the staging tasks, which use the members above.
  std::unique_ptr<ThreadPool> pool_;
};

// A compile-only run: staging is the whole evaluation; no slot is ever used.
class CompileOnly : public CompilingEvaluator {
 public:
  using CompilingEvaluator::CompilingEvaluator;
  // Compiles the reference kernels (part of what a compile-only run checks):
  // throws SpecError where one does not compile.
  void start() override;
  int slots() const override { return 1; }
  int gpus() const override { return 0; }
  std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) override;
  double gpu_busy_s() const override { return 0; }
};

}  // namespace evotune
