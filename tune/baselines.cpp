#include "tune/baselines.hpp"

#include <chrono>

#include "core/dtype.hpp"
#include "core/strings.hpp"
#include "engine/torch_baseline.hpp"
#include "tune/plan.hpp"

namespace evotune {

namespace {

// The baselines' timing: the elites' final re-timing (sustained), so that the
// speedups compare like with like.
SustainedTiming timing_of(const TuneOptions& o) {
  if (o.retime_ms <= 0) return {};
  return {o.retime_ms, o.retime_ms, std::max(o.timing.max_samples, 2000)};
}

// A spec baseline's values on one problem (dims and [lets], with the
// default config for lets that read parameters).
std::map<std::string, int64_t> values_of(const TunePlan& plan, const BaselineSpec& b, const Problem& p) {
  const Config def = plan.spec.default_config();
  const Scope scope(plan.spec, &p, &def, plan.dev);
  std::map<std::string, int64_t> out;
  for (const auto& [k, e] : b.values)
    out[k] = scope.eval(e, ValueRule::any, "[[baseline]] " + b.name + "." + k).as_int();
  return out;
}

std::vector<BaselineResult> measure_one(const TunePlan& plan, GpuPool& gpu, const BaselineSpec& b, int pi) {
  const Problem& p = plan.problems[static_cast<size_t>(pi)];
  const double timeout_s = 120 + 20 * plan.options.retime_ms / 1e3;
  if (b.library == "torch_sdpa") {
    TorchSdpaRequest r;
    r.name = b.name;
    r.problem = pi;
    r.device = gpu.first_device();
    r.seed = plan.options.seed;
    r.dtype = to_string(p.dtype);
    r.backend = b.strings.at("backend");
    r.values = values_of(plan, b, p);
    r.timing = plan.options.timing;
    r.sustained = timing_of(plan.options);
    r.tol = gpu.setup().problems.at(static_cast<size_t>(pi)).tol;
    return {torch_sdpa_baseline(r, timeout_s)};
  }
  BaselineRequest r;
  r.problem = pi;
  r.name = b.name;
  r.library = b.library;
  if (const BaselineLibrary* lib = find_baseline_library(b.library))  // none for the reference kernel
    for (const std::string& k : lib->buffers) r.buffers[k] = b.strings.at(k);
  r.values = values_of(plan, b, p);
  r.sustained = timing_of(plan.options);
  return gpu.baseline(r, timeout_s * 4);
}

}  // namespace

bool baseline_selected(const std::string& selection, const std::string& name) {
  if (selection == "all") return true;
  if (selection == "none") return false;
  for (const std::string& s : split(selection, ','))
    if (trim(s) == name) return true;
  return false;
}

std::vector<BaselineResult> measure_baselines(const TunePlan& plan, GpuPool& gpu, Store& store, int64_t run_id,
                                              Progress& progress) {
  std::vector<BaselineSpec> todo;
  if (baseline_selected(plan.options.baselines, "reference")) todo.push_back({"reference", "reference", {}, {}});
  for (const BaselineSpec& b : plan.spec.baselines)
    if (baseline_selected(plan.options.baselines, b.name)) todo.push_back(b);
  std::vector<BaselineResult> all;
  if (todo.empty()) return all;
  progress.baselines_started(todo.size(), plan.problems.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t pi = 0; pi < plan.problems.size(); ++pi)
    for (const BaselineSpec& b : todo)
      for (BaselineResult& r : measure_one(plan, gpu, b, static_cast<int>(pi))) {
        r.run_id = run_id;
        store.record_baseline(run_id, r);
        progress.baseline(plan, r);
        all.push_back(std::move(r));
      }
  progress.baselines_done(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return all;
}

}  // namespace evotune
