#include "tune/search.hpp"

#include <algorithm>
#include <chrono>

namespace evotune {

namespace {

template <typename T>
bool ready(const std::future<T>& f) {
  return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

Limits limits_for(const TunePlan& plan, const Trial* best) {
  const TuneOptions& o = plan.options;
  Limits l;
  for (size_t i = 0; i < plan.all_problems.size(); ++i) {
    double a = 0;
    if (best && i < best->per_problem.size() && plan.timed[i] && o.abort_factor > 0)
      a = o.abort_factor * best->per_problem[i].p50_us;
    l.abort_us.push_back(a);
  }
  l.timeout_s = o.timeout_floor_s;
  if (best) l.timeout_s = std::max(l.timeout_s, o.timeout_factor * (best->verify_ms + best->bench_ms) / 1000.0);
  return l;
}

SearchLoop::SearchLoop(const TunePlan& plan, const SearchSpace& space, Evaluator& ev, Strategy& strategy,
                       RunRecorder& recorder, Wakeup& wake)
    : plan_(plan),
      space_(space),
      ev_(ev),
      strategy_(strategy),
      recorder_(recorder),
      wake_(wake),
      window_(plan, ev.slots()) {}

SearchLoop::~SearchLoop() {
  abandon();
}

SearchOutcome SearchLoop::run(const std::function<void()>& start) {
  std::atomic<bool>& stop = stop_requested();
  refill();
  start();
  slot_busy_.assign(static_cast<size_t>(ev_.slots()), false);
  while (!entries_.empty() && !stop.load()) {
    const uint64_t seen = wake_.events();
    bool progressed = false;
    for (Entry& e : entries_) {
      if (stop.load()) break;
      progressed = advance(e) || progressed;
    }
    while (!entries_.empty() && entries_.front().trial && !stop.load()) {
      Entry& e = entries_.front();
      if (!e.user_invalid) --proposed_;
      // A replay's clock moves only as trials are recorded: its own times count.
      if (ev_.simulated())
        window_.observe(*e.trial);
      else
        window_.observe(*e.trial, e.staging_s, e.run_s);
      recorder_.record(std::move(*e.trial), e.proposed_at, ev_);
      entries_.pop_front();
      refill();  // after each observation, as the strategy expects
      progressed = true;
    }
    const size_t before = entries_.size();
    refill();
    progressed = progressed || entries_.size() != before;
    if (!progressed) wake_.wait(seen);  // until a staging or a run finishes
  }
  SearchOutcome out{stop.load(), exhausted_};
  abandon();
  return out;
}

// One step of an entry: staged → on a free slot → finished.
bool SearchLoop::advance(Entry& e) {
  if (e.trial) return false;
  bool progressed = false;
  if (!e.job) {
    if (!ready(e.staging)) return false;
    Staged s = e.staging.get();
    e.staging_s = ev_.elapsed() - e.proposed_at;
    progressed = true;
    if (s.finished) {
      e.trial = std::move(*s.finished);
      return true;
    }
    e.job = std::move(s.job);
  }
  if (e.slot < 0) {
    auto free = std::find(slot_busy_.begin(), slot_busy_.end(), false);
    if (free == slot_busy_.end()) return progressed;
    e.slot = static_cast<int>(free - slot_busy_.begin());
    *free = true;
    e.run_started = ev_.elapsed();
    e.running = ev_.run(std::move(*e.job), e.slot, limits_for(plan_, strategy_.population().best()), wake_);
    return true;
  }
  if (!ready(e.running)) return progressed;
  e.trial = e.running.get();
  e.run_s = ev_.elapsed() - e.run_started;
  slot_busy_[static_cast<size_t>(e.slot)] = false;
  return true;
}

// Proposals run up to a window ahead of the observations, and wait for a
// free compile process (a config proposed earlier would only queue, with
// older results). Results are recorded in proposal order, so a slow compile
// at the front holds back the finished entries behind it; while it does and
// the compile slots run short of work, up to twice the window is let in
// flight.
void SearchLoop::refill() {
  const std::atomic<bool>& stop = stop_requested();
  const long window = window_.window();
  while (recorder_.spent() + proposed_ < plan_.budget() && !stop.load()) {
    const auto n = static_cast<long>(entries_.size());
    const long compiling = staging();
    if (ev_.compile_slots() > 0 && compiling >= ev_.compile_slots()) break;
    if (n >= window && (n >= 2L * window || compiling >= ev_.compile_slots())) break;
    Entry e;
    e.proposed_at = ev_.elapsed();
    if (next_seed_ < plan_.seeds.size()) {
      e.config = plan_.seeds[next_seed_++];
      strategy_.mark_seen(e.config);
      if (auto why = space_.invalid_reason(e.config)) {
        Trial t;
        t.config = e.config;
        t.status = TrialStatus::invalid;
        t.error = *why;
        e.trial = std::move(t);
        e.user_invalid = true;
      }
    } else {
      std::optional<Config> c = strategy_.propose();
      if (!c) {
        exhausted_ = true;
        return;
      }
      e.config = *c;
    }
    if (!e.user_invalid) {
      ++proposed_;
      e.staging = ev_.stage(e.config, wake_);
    }
    entries_.push_back(std::move(e));
  }
}

long SearchLoop::staging() const {
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const Entry& e) { return e.staging.valid() && !ready(e.staging); });
}

// Whatever is still in flight is let finish (a future must not be dropped
// while its task runs) and forgotten: nothing of it was recorded.
void SearchLoop::abandon() {
  std::atomic<bool>& stop = stop_requested();
  stop.store(true);  // pending compiles end early
  for (Entry& e : entries_) {
    if (e.staging.valid()) e.staging.wait();
    if (e.running.valid()) e.running.wait();
  }
  entries_.clear();
  stop.store(false);
}

}  // namespace evotune
