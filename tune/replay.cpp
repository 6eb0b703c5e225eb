#include "tune/replay.hpp"

#include <algorithm>

namespace evotune {

namespace {

// Statuses a recorded trial reached the GPU to get.
bool needs_gpu(TrialStatus s) {
  return s == TrialStatus::ok || s == TrialStatus::incorrect || s == TrialStatus::crashed ||
         s == TrialStatus::timeout || s == TrialStatus::launch_error;
}

template <typename T>
std::future<T> ready_future(T value, Wakeup& wake) {
  std::promise<T> p;
  p.set_value(std::move(value));
  wake.notify();
  return p.get_future();
}

}  // namespace

ReplayEvaluator::ReplayEvaluator(const TunePlan& plan)
    : plan_(plan), compile_free_(plan.compile_threads, 0.0), gpu_free_(static_cast<size_t>(plan.slots), 0.0) {}

std::future<Staged> ReplayEvaluator::stage(const Config& c, Wakeup& wake) {
  Staged s;
  const Trial* rec = plan_.replay->find(c);
  if (!rec) {
    Trial t;
    t.config = c;
    t.status = TrialStatus::invalid;
    t.error = "not in the replay dataset " + plan_.options.replay_path;
    s.finished = t;
    return ready_future(std::move(s), wake);
  }
  Trial t = *rec;
  t.id = 0;
  t.seq = 0;
  if (plan_.options.replay_warm_cache) t.compile_ms = 0, t.cache_hit = true;
  if (needs_gpu(t.status))
    s.job.trial = t;
  else
    s.finished = t;
  return ready_future(std::move(s), wake);
}

std::future<Trial> ReplayEvaluator::run(Job job, int slot, const Limits&, Wakeup& wake) {
  Trial t = std::move(job.trial);
  t.device = slot;
  return ready_future(std::move(t), wake);
}

void ReplayEvaluator::recorded(const Trial& t, double proposed_at) {
  auto slot = std::min_element(compile_free_.begin(), compile_free_.end());
  const double compiled = std::max(proposed_at, *slot) + t.compile_ms / 1000.0;
  *slot = compiled;
  double finish = compiled;
  if (needs_gpu(t.status)) {
    auto g = std::min_element(gpu_free_.begin(), gpu_free_.end());
    *g = std::max(compiled, *g) + (t.verify_ms + t.bench_ms) / 1000.0;
    finish = *g;
    gpu_busy_s_ += (t.verify_ms + t.bench_ms) / 1000.0;
  }
  now_ = std::max(now_, finish);
}

}  // namespace evotune
