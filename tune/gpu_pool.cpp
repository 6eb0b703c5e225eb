#include "tune/gpu_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compiler.hpp"
#include "engine/device_info.hpp"
#include "engine/support_kernels.hpp"

namespace evotune {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

double sanitizer_limit(double trial_limit_s) {
  return std::max(120.0, 5 * trial_limit_s);
}

GpuPool::GpuPool(const TunePlan& plan) : CompilingEvaluator(plan, plan.gpus.front().smem_optin) {
  for (const DeviceInfo& g : plan.gpus) {
    SetupRequest early;
    early.device = g.ordinal;
    workers_.push_back(std::make_unique<WorkerClient>(plan.exe, early));
    workers_.back()->spawn();
  }
}

void GpuPool::start() {
  setup_.seed = plan_.options.seed;
  setup_.timing = plan_.options.timing;
  CompileRequest support;
  support.source_name = kSupportKernelsName;
  support.source = support_kernels_source();
  support.entry = "evotune_fill";
  support.arch = arch_for(plan_.dev.cc, false);
  CompileResult sr = compiler_.compile(support);
  if (!sr.ok) throw EngineError("compiling evotune's support kernels failed:\n" + sr.log);
  setup_.cubins.push_back(sr.cubin);
  ReferenceCubins refs = compile_references(plan_, compiler_);
  setup_.cubins.insert(setup_.cubins.end(), refs.cubins.begin(), refs.cubins.end());
  const Planner planner(plan_.spec, plan_.dev);
  for (size_t i = 0; i < plan_.all_problems.size(); ++i)
    setup_.problems.push_back(planner.problem_setup(plan_.all_problems[i], plan_.timed[i], 1 + refs.of_problem[i]));
  for (size_t i = 0; i < workers_.size(); ++i) {
    SetupRequest s = setup_;
    s.device = plan_.gpus[i].ordinal;
    workers_[i]->set_setup(std::move(s));
  }
  spdlog::info("support and reference kernels compiled; starting {} GPU worker(s)", workers_.size());
  std::vector<std::future<void>> starts;
  for (auto& w : workers_) starts.push_back(std::async(std::launch::async, [&w] { w->start(); }));
  for (auto& f : starts) f.get();  // rethrows a set-up failure
  // Filling the inputs and running the references is GPU work of the run.
  for (auto& w : workers_) add_gpu_time(w->last_setup_ms() / 1000);
  spdlog::info("GPU worker(s) ready: inputs filled, references computed ({:.0f} ms)",
               workers_.front()->last_setup_ms());
}

std::future<Trial> GpuPool::run(Job job, int slot, const Limits& limits, Wakeup& wake) {
  spdlog::debug("GPU {}: evaluating {}", slot, job.trial.config.canonical());
  tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(),
                              [](const std::future<void>& f) {
                                return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
                              }),
               tasks_.end());
  auto done = std::make_shared<std::promise<Trial>>();
  std::future<Trial> result = done->get_future();
  job.request.abort_us = limits.abort_us;
  tasks_.push_back(std::async(std::launch::async,
                              [this, done, slot, &wake, job = std::move(job), limit = limits.timeout_s]() mutable {
                                try {
                                  const auto t0 = Clock::now();
                                  WorkerClient& worker = *workers_[static_cast<size_t>(slot)];
                                  EvalReply reply = worker.evaluate(job.request, limit);
                                  if (every_ && reply.status == TrialStatus::ok) {
                                    const auto t1 = Clock::now();
                                    if (auto f = every_->check(job.request, worker.device(), sanitizer_limit(limit))) {
                                      reply.status = f->status;
                                      reply.error = f->report;
                                    }
                                    reply.verify_ms += 1000 * seconds_since(t1);
                                  }
                                  const double elapsed = seconds_since(t0);
                                  add_gpu_time(elapsed);
                                  spdlog::debug("GPU {}: {} after {:.2f} s", slot, to_string(reply.status), elapsed);
                                  done->set_value(finish(job, reply, slot, elapsed));
                                } catch (...) {
                                  done->set_exception(std::current_exception());
                                }
                                wake.notify();
                              }));
  return result;
}

Trial GpuPool::finish(Job& job, const EvalReply& reply, int slot, double elapsed_s) const {
  Trial t = std::move(job.trial);
  t.device = plan_.gpus[static_cast<size_t>(slot)].ordinal;
  t.host = host_name();
  t.status = reply.status;
  t.error = reply.error;
  t.verify_ms = reply.verify_ms;
  t.bench_ms = reply.bench_ms;
  if (t.ok() && every_) t.sanitized = join(every_->tools(), ",");
  // A timeout or a dead worker reports no times: charge the wall time.
  if (t.verify_ms + t.bench_ms <= 0) t.verify_ms = elapsed_s * 1000;
  // Keep the run's own problems; check shapes are a gate, not a result.
  for (size_t i = 0; i < reply.per_problem.size() && i < plan_.problems.size(); ++i)
    t.per_problem.push_back(reply.per_problem[i]);
  if (t.ok()) {
    std::vector<double> p50s;
    for (const auto& m : t.per_problem) p50s.push_back(m.p50_us);
    t.fitness = geomean(p50s);
  }
  return t;
}

EvalReply GpuPool::remeasure(const EvalRequest& request, double timeout_s) {
  const auto t0 = Clock::now();
  EvalReply reply = workers_.front()->evaluate(request, timeout_s);
  add_gpu_time(seconds_since(t0));
  return reply;
}

std::vector<BaselineResult> GpuPool::baseline(const BaselineRequest& request, double timeout_s) {
  return workers_.front()->baseline(request, timeout_s);  // after the run's clock stopped: not its GPU time
}

void GpuPool::add_gpu_time(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  gpu_busy_s_ += seconds;
}

double GpuPool::gpu_busy_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gpu_busy_s_;
}

}  // namespace evotune
