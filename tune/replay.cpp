#include "tune/replay.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/device_info.hpp"

namespace evotune {

namespace {

// Statuses a recorded trial reached the GPU to get.
bool needs_gpu(TrialStatus s) {
  return s == TrialStatus::ok || s == TrialStatus::incorrect || s == TrialStatus::crashed ||
         s == TrialStatus::timeout || s == TrialStatus::launch_error;
}

template <typename T>
std::future<T> ready_future(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace

ReplayLookup::ReplayLookup(const TunePlan& plan, int slots) : plan_(plan), slots_(slots), host_(host_name()) {}

std::future<Staged> ReplayLookup::stage(const Config& c, Wakeup&) {
  Staged s;
  const Trial* rec = plan_.replay->find(c);
  if (!rec) {
    Trial t;
    t.config = c;
    t.status = TrialStatus::invalid;
    t.error = "not in the replay dataset " + plan_.options.replay_path;
    s.finished = t;
    return ready_future(std::move(s));
  }
  Trial t = *rec;
  t.id = 0;
  t.seq = 0;
  t.device = -1;
  t.host.clear();
  if (plan_.options.replay_warm_cache) t.compile_ms = 0, t.cache_hit = true;
  if (needs_gpu(t.status))
    s.job.trial = t;
  else
    s.finished = t;
  return ready_future(std::move(s));
}

std::future<Trial> ReplayLookup::run(Job job, int slot, const Limits&, Wakeup&) {
  Trial t = std::move(job.trial);
  t.device = slot;
  t.host = host_;
  return ready_future(std::move(t));
}

ReplayEvaluator::ReplayEvaluator(const TunePlan& plan, std::unique_ptr<Evaluator> source)
    : plan_(plan),
      source_(source ? std::move(source) : std::make_unique<ReplayLookup>(plan, plan.slots)),
      compile_free_(std::max(1u, plan.compile_threads), 0.0) {}

template <typename T>
T ReplayEvaluator::settle(std::future<T> f) {
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    source_->wait(source_wake_, source_wake_.events());
  return f.get();
}

std::future<Staged> ReplayEvaluator::stage(const Config& c, Wakeup&) {
  Staged s = settle(source_->stage(c, source_wake_));
  const Trial& t = s.finished ? *s.finished : s.job.trial;
  const double compile_s = t.status == TrialStatus::invalid ? 0 : t.compile_ms / 1000.0;
  auto slot = std::min_element(compile_free_.begin(), compile_free_.end());
  *slot = std::max(now_, *slot) + compile_s;
  std::promise<Staged> p;
  std::future<Staged> f = p.get_future();
  stagings_.emplace(Key{*slot, started_++}, std::make_pair(std::move(p), std::move(s)));
  return f;
}

std::future<Trial> ReplayEvaluator::run(Job job, int slot, const Limits& limits, Wakeup&) {
  Trial t = settle(source_->run(std::move(job), slot, limits, source_wake_));
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
