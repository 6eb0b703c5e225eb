#include "tune/compiling.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>

namespace evotune {

CompilingEvaluator::CompilingEvaluator(const TunePlan& plan, long long smem_optin)
    : plan_(plan),
      compiler_(plan.options.isolate_compiles ? plan.exe : std::string(), plan.compile_threads,
                plan.options.compile_timeout_s),
      builder_(plan, compiler_, smem_optin),
      pool_(std::make_unique<ThreadPool>(plan.compile_threads)) {
  compiler_.spawn_all();
}

CompilingEvaluator::~CompilingEvaluator() {
  pool_.reset();  // joins the staging tasks before the compilers go
}

std::future<Staged> CompilingEvaluator::stage(const Config& c, Wakeup& wake) {
  auto done = std::make_shared<std::promise<Staged>>();
  std::future<Staged> f = done->get_future();
  pool_->submit([this, done, c, &wake] {
    try {
      spdlog::debug("compiling {}", c.canonical());
      done->set_value(builder_.stage(c, stop_requested()));
    } catch (...) {
      done->set_exception(std::current_exception());
    }
    wake.notify();
  });
  return f;
}

Staged CompilingEvaluator::stage_now(const Config& c) const {
  const std::atomic<bool> never{false};
  return builder_.stage(c, never);
}

double CompilingEvaluator::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void CompileOnly::start() {
  compile_references(plan_, compiler_);
}

std::future<Trial> CompileOnly::run(Job, int, const Limits&, Wakeup&) {
  throw std::logic_error("a compile-only run has no slot to run a job on");
}

}  // namespace evotune
