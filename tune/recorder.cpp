#include "tune/recorder.hpp"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/strings.hpp"

#ifndef EVOTUNE_VERSION
#define EVOTUNE_VERSION "0.0.0"
#endif

namespace evotune {

namespace {

RunInfo new_run(const TunePlan& plan) {
  const TuneOptions& o = plan.options;
  RunInfo run;
  run.kernel = plan.spec.name;
  run.spec_origin = plan.spec.origin == "builtin" ? "builtin" : std::filesystem::absolute(o.kernel).string();
  run.spec_hash = plan.spec.content_hash();
  run.spec_text = plan.spec.spec_text;
  run.problems = plan.problems;
  run.dtype = to_string(plan.problems.front().dtype);
  run.strategy = o.strategy;
  run.seed = o.seed;
  run.budget = o.budget;
  run.elites_k = o.elites;
  nlohmann::json opts = {{"command_line", o.command_line},
                         {"timing", o.timing},
                         {"timeout_floor_s", o.timeout_floor_s},
                         {"abort_factor", o.abort_factor},
                         {"retime_rounds", o.retime_rounds},
                         {"retime_ms", o.retime_ms},
                         {"sanitize", plan.sanitize.mode},
                         {"check_shapes", static_cast<int>(plan.all_problems.size() - plan.problems.size())},
                         {"compile_threads", plan.compile_threads},
                         {"gpus", plan.slots}};
  if (plan.replay) opts["replay"] = std::filesystem::absolute(o.replay_path).string();
  if (plan.ranks > 1) opts["ranks"] = plan.ranks;
  run.options_json = opts.dump();
  run.device = plan.device;
  run.evotune_version = EVOTUNE_VERSION;
  run.status = "running";
  run.compile_only = o.compile_only;
  return run;
}

}  // namespace

RunRecorder::RunRecorder(const TunePlan& plan, Store& store, Strategy& strategy, Progress& progress)
    : plan_(plan), store_(store), strategy_(strategy), progress_(progress), counts_(all_statuses().size(), 0) {}

void RunRecorder::open() {
  if (plan_.resumed) {
    run_ = *plan_.resumed;
    run_.budget = plan_.budget();
    store_.reopen_run(run_.id, run_.budget);
  } else {
    run_ = new_run(plan_);
    run_.id = store_.create_run(run_);
  }
  stats_ = run_.stats;
  stats_.compile_threads = static_cast<int>(plan_.compile_threads);
  const Config default_config = plan_.spec.default_config();
  for (const Trial& t : plan_.previous) {
    strategy_.mark_seen(t.config);
    strategy_.observe(t);
    ++counts_[static_cast<size_t>(t.status)];
    if (t.config == default_config) default_trial_ = t;
  }
  spent_ = plan_.spent();
}

void RunRecorder::update_time(Evaluator& ev) {
  const double wall = ev.elapsed();
  stats_.wall_s = run_.stats.wall_s + wall;
  stats_.gpu_idle_s = run_.stats.gpu_idle_s + (ev.gpus() == 0 ? 0 : std::max(0.0, wall * ev.gpus() - ev.gpu_busy_s()));
}

void RunRecorder::record(Trial t, Evaluator& ev) {
  if (t.status != TrialStatus::invalid) ++spent_;
  if (t.cache_hit) ++stats_.cache_hits;
  stats_.compile_busy_s += t.compile_ms / 1000;
  stats_.verify_s += t.verify_ms / 1000;
  stats_.bench_s += t.bench_ms / 1000;
  stats_.trials = spent_;
  stats_.invalid_draws = strategy_.invalid_draws();
  update_time(ev);
  // Observed (and so offered to the population) before it is recorded, so
  // that the stored elites include it: its id, unknown until the insert, is
  // 0 in the list the store receives.
  t.seq = static_cast<int>(plan_.previous.size()) + ++recorded_;
  strategy_.observe(t);
  Population& pop = strategy_.population();
  store_.record_trial(run_.id, t, pop.elite_ids());
  pop.assign_id(t.config, t.id, t.seq);
  ++counts_[static_cast<size_t>(t.status)];
  if (t.config == plan_.spec.default_config() && !default_trial_) {
    default_trial_ = t;
    store_.set_default_trial(run_.id, t.id);
  }
  store_.update_stats(run_.id, stats_);
  progress_.trial(plan_, t, spent_, pop.best());
}

void RunRecorder::sanitized(const Trial& t, const std::vector<std::string>& tools) {
  store_.record_sanitized(t.id, join(tools, ","));
}

void RunRecorder::sanitizer_finding(const Trial& t, const SanitizerFinding& f) {
  Population& pop = strategy_.population();
  pop.remove(t.config);
  store_.record_sanitizer_finding(run_.id, t.id, f.status, f.report, pop.elite_ids());
  --counts_[static_cast<size_t>(TrialStatus::ok)];
  ++counts_[static_cast<size_t>(f.status)];
  if (default_trial_ && default_trial_->id == t.id) default_trial_->status = f.status;
  progress_.sanitizer_finding(t, f);
}

void RunRecorder::finish(const std::string& status, Evaluator& ev) {
  update_time(ev);
  store_.finish_run(run_.id, status, stats_);
}

}  // namespace evotune
