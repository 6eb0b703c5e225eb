#include "export/facts.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace evotune {

ExportFacts gather_facts(const ExportInput& in) {
  if (!in.run || !in.spec) throw UsageError("export needs a run and its kernel spec");
  if (!in.winner) throw UsageError("run " + std::to_string(in.run->id) + " has no ok trial to export");
  if (!in.winner->ok())
    throw UsageError("trial " + std::to_string(in.winner->id) + " is " + to_string(in.winner->status) +
                     ", not ok: only a correct config can be exported");
  if (in.run->problems.empty()) throw UsageError("run " + std::to_string(in.run->id) + " has no problems");
  ExportFacts f{*in.run, *in.spec, *in.winner, {}, {}, {}, {}};
  f.dev.cc = in.run->device.cc > 0 ? in.run->device.cc : 90;
  f.dev.num_sms = in.run->device.num_sms > 0 ? in.run->device.num_sms : DeviceTraits::for_arch(f.dev.cc).num_sms;
  f.dim_names = f.spec.dims;
  for (const auto& [k, v] : f.spec.dim_defaults)
    if (std::find(f.dim_names.begin(), f.dim_names.end(), k) == f.dim_names.end()) f.dim_names.push_back(k);
  for (size_t p = 0; p < f.run.problems.size(); ++p) {
    const Trial* best = nullptr;
    auto consider = [&](const Trial& t) {
      if (!t.ok()) return;
      const Measurement* m = measurement_on(t, static_cast<int>(p));
      if (!usable_p50(m)) return;
      if (!best || m->p50_us < measurement_on(*best, static_cast<int>(p))->p50_us) best = &t;
    };
    consider(f.winner);
    for (const auto& t : in.ok_trials) consider(t);
    f.best_on.push_back(best ? best : &f.winner);
  }
  Scope scope(f.spec, &f.run.problems[0], &f.winner.config, f.dev);
  for (const auto& [name, e] : f.spec.defines) {
    try {
      f.define_values[name] = scope.eval(e).str();
    } catch (const std::exception&) {
      // Left out: the header says it was not evaluated.
    }
  }
  return f;
}

const Measurement* measurement_on(const Trial& t, int problem) {
  for (const auto& m : t.per_problem)
    if (m.problem == problem) return &m;
  return nullptr;
}

bool usable_p50(const Measurement* m) {
  return m && std::isfinite(m->p50_us) && m->p50_us > 0;
}

std::optional<double> speedup_on(const ExportInput& in, const Trial& t, int problem) {
  if (!in.default_trial) return std::nullopt;
  const Measurement* d = measurement_on(*in.default_trial, problem);
  const Measurement* w = measurement_on(t, problem);
  if (!usable_p50(d) || !usable_p50(w)) return std::nullopt;
  return d->p50_us / w->p50_us;
}

}  // namespace evotune
