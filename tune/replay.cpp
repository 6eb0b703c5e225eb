#include "tune/replay.hpp"

#include <algorithm>
#include <cmath>

namespace evotune {

namespace {

// Statuses a recorded trial reached the GPU to get.
bool needs_gpu(TrialStatus s) {
  return s == TrialStatus::ok || s == TrialStatus::incorrect || s == TrialStatus::crashed ||
         s == TrialStatus::timeout || s == TrialStatus::launch_error;
}

}  // namespace

ReplayEvaluator::ReplayEvaluator(const TunePlan& plan)
    : plan_(plan), compile_free_(std::max(1u, plan.compile_threads), 0.0) {}

std::future<Staged> ReplayEvaluator::stage(const Config& c, Wakeup&) {
  Staged s;
  double compile_s = 0;
  const Trial* rec = plan_.replay->find(c);
  if (!rec) {
    Trial t;
    t.config = c;
    t.status = TrialStatus::invalid;
    t.error = "not in the replay dataset " + plan_.options.replay_path;
    s.finished = t;
  } else {
    Trial t = *rec;
    t.id = 0;
    t.seq = 0;
    if (plan_.options.replay_warm_cache) t.compile_ms = 0, t.cache_hit = true;
    compile_s = t.compile_ms / 1000.0;
    if (needs_gpu(t.status))
      s.job.trial = t;
    else
      s.finished = t;
  }
  auto slot = std::min_element(compile_free_.begin(), compile_free_.end());
  *slot = std::max(now_, *slot) + compile_s;
  std::promise<Staged> p;
  std::future<Staged> f = p.get_future();
  stagings_.emplace(Key{*slot, started_++}, std::make_pair(std::move(p), std::move(s)));
  return f;
}

std::future<Trial> ReplayEvaluator::run(Job job, int slot, const Limits&, Wakeup&) {
  Trial t = std::move(job.trial);
  t.device = slot;
  const double gpu_s = (t.verify_ms + t.bench_ms) / 1000.0;
  gpu_busy_s_ += gpu_s;
  std::promise<Trial> p;
  std::future<Trial> f = p.get_future();
  runs_.emplace(Key{now_ + gpu_s, started_++}, std::make_pair(std::move(p), std::move(t)));
  return f;
}

void ReplayEvaluator::wait(Wakeup& wake, uint64_t) {
  if (stagings_.empty() && runs_.empty()) return;
  const double next = std::min(stagings_.empty() ? HUGE_VAL : stagings_.begin()->first.first,
                               runs_.empty() ? HUGE_VAL : runs_.begin()->first.first);
  now_ = std::max(now_, next);
  // Everything due now, in the order it was started.
  while (!stagings_.empty() && stagings_.begin()->first.first <= now_) {
    auto node = stagings_.extract(stagings_.begin());
    node.mapped().first.set_value(std::move(node.mapped().second));
  }
  while (!runs_.empty() && runs_.begin()->first.first <= now_) {
    auto node = runs_.extract(runs_.begin());
    node.mapped().first.set_value(std::move(node.mapped().second));
  }
  wake.notify();
}

}  // namespace evotune
