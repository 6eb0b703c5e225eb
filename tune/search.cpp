#include "tune/search.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

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
      window_(plan, ev.slots(), ev.compile_slots()) {}

SearchLoop::~SearchLoop() {
  abandon();
}

SearchOutcome SearchLoop::run(const std::function<void()>& start) {
  std::atomic<bool>& stop = stop_requested();
  slot_busy_.assign(static_cast<size_t>(ev_.slots()), false);
  refill();
  start();
  while (!entries_.empty() && !stop.load()) {
    const uint64_t seen = wake_.events();
    bool progressed = collect();
    progressed = record_finished() || progressed;
    progressed = dispatch() || progressed;
    progressed = refill() || progressed;
    if (!progressed) ev_.wait(wake_, seen);  // until a staging or a run finishes
  }
  SearchOutcome out{stop.load(), exhausted_};
  abandon();
  return out;
}

// The stagings and runs that finished: staged → a trial (gated out) or a job
// waiting for a slot; run → a trial, its slot free.
bool SearchLoop::collect() {
  bool progressed = false;
  for (Entry& e : entries_) {
    if (ready(e.staging)) {
      Staged s = e.staging.get();
      e.staging_s = ev_.elapsed() - e.proposed_at;
      if (s.finished)
        e.trial = std::move(*s.finished);
      else
        e.job = std::move(s.job);
      progressed = true;
    }
    if (ready(e.running)) {
      e.trial = e.running.get();
      e.run_s = ev_.elapsed() - e.run_started;
      slot_busy_[static_cast<size_t>(e.slot)] = false;
      progressed = true;
    }
  }
  return progressed;
}

// Every finished trial, in proposal order among those finished together:
// the strategy observes it, the store commits it, the window learns its times.
bool SearchLoop::record_finished() {
  bool progressed = false;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->trial) {
      ++it;
      continue;
    }
    if (!it->user_invalid) --proposed_;
    window_.observe(*it->trial, it->staging_s, it->run_s);
    recorder_.record(std::move(*it->trial), ev_);
    it = entries_.erase(it);
    progressed = true;
  }
  if (progressed && spdlog::should_log(spdlog::level::debug))
    spdlog::debug("recorded {} trials: window {}, in flight {} (compiling {}, compiled and waiting {}, on GPUs {})",
                  recorder_.spent(), window_.window(), entries_.size(), staging(), waiting().size(),
                  std::count(slot_busy_.begin(), slot_busy_.end(), true));
  return progressed;
}

// Each free slot takes the waiting job the strategy ranks best now (the
// first proposed when it has no preference), and each time one does, the
// worst of a surplus left waiting is dropped.
bool SearchLoop::dispatch() {
  bool progressed = false;
  for (size_t slot = 0; slot < slot_busy_.size(); ++slot) {
    if (slot_busy_[slot]) continue;
    const std::vector<size_t> w = waiting();
    if (w.empty()) break;
    const std::vector<double> score = scores(w);
    size_t pick = 0;
    for (size_t i = 1; i < score.size(); ++i)
      if (score[i] < score[pick]) pick = i;
    Entry& e = entries_[w[pick]];
    e.slot = static_cast<int>(slot);
    slot_busy_[slot] = true;
    e.run_started = ev_.elapsed();
    e.running = ev_.run(std::move(*e.job), e.slot, limits_for(plan_, strategy_.population().best()), wake_);
    e.job.reset();
    progressed = true;
    drop_surplus();
  }
  return progressed;
}

// Past kWaitingPerSlot jobs per slot waiting, the one the strategy ranks
// worst would only hold a place of the window from a fresher proposal: it
// is dropped (compiled, never run, never recorded; the strategy does not
// propose it again). One per dispatch, so compiles never outrun the GPUs
// by more than twice. A strategy with no preference keeps them all, and
// so does one with nothing left to propose.
void SearchLoop::drop_surplus() {
  if (exhausted_) return;
  const std::vector<size_t> w = waiting();
  if (w.size() <= kWaitingPerSlot * slot_busy_.size()) return;
  const std::vector<double> score = scores(w);
  if (score.empty()) return;
  size_t worst = 0;
  for (size_t i = 1; i < score.size(); ++i)
    if (score[i] >= score[worst]) worst = i;  // the latest among equals
  Entry& e = entries_[w[worst]];
  spdlog::debug("dropped a compiled config the search ranks worst of {} waiting: {}", w.size(), e.config.canonical());
  strategy_.withdraw(e.config);
  --proposed_;
  entries_.erase(entries_.begin() + static_cast<long>(w[worst]));
}

// Entries staged and waiting for a slot, in proposal order.
std::vector<size_t> SearchLoop::waiting() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].job) out.push_back(i);
  return out;
}

std::vector<double> SearchLoop::scores(const std::vector<size_t>& entries) {
  if (entries.size() < 2) return {};
  std::vector<Config> configs;
  for (size_t i : entries) configs.push_back(entries_[i].config);
  return strategy_.scores(configs);
}

// Proposals run up to a window ahead of the observations, and wait for a
// free compile process (a config proposed earlier would only queue, with
// older results).
bool SearchLoop::refill() {
  const std::atomic<bool>& stop = stop_requested();
  const auto window = static_cast<size_t>(window_.window());
  bool progressed = false;
  while (recorder_.spent() + proposed_ < plan_.budget() && !stop.load() && !exhausted_) {
    if (entries_.size() >= window) break;
    if (ev_.compile_slots() > 0 && staging() >= ev_.compile_slots()) break;
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
        break;
      }
      e.config = *c;
    }
    if (!e.user_invalid) {
      ++proposed_;
      e.staging = ev_.stage(e.config, wake_);
    }
    entries_.push_back(std::move(e));
    progressed = true;
  }
  return progressed;
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
    // A simulated evaluator completes them only as its clock moves.
    while (e.staging.valid() && !ready(e.staging)) ev_.wait(wake_, wake_.events());
    while (e.running.valid() && !ready(e.running)) ev_.wait(wake_, wake_.events());
  }
  entries_.clear();
  stop.store(false);
}

}  // namespace evotune
