// export_json: what the header holds, as one JSON document for other tools.
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/strings.hpp"
#include "export/export.hpp"
#include "export/facts.hpp"

namespace evotune {

namespace {

using nlohmann::json;

// Each buffer of the kernel on one problem: element type, count and bytes.
json buffers_json(const ExportFacts& f, const Problem& prob, const Scope& scope) {
  json buffers = json::array();
  for (const auto& a : f.spec.args) {
    if (!a.is_buffer) continue;
    json bj = {{"name", a.name},
               {"role", to_string(a.role)},
               {"elem", to_string(resolve_elem(a.elem, prob.dtype))},
               {"count_expr", a.count.text()}};
    try {
      int64_t n = scope.eval(a.count).as_int();
      bj["count"] = n;
      bj["bytes"] = n * elem_bytes(a.elem, prob.dtype);
    } catch (const std::exception& e) {
      bj["error"] = e.what();
    }
    buffers.push_back(bj);
  }
  return buffers;
}

// One problem of the run: the winner's measurement and launch there, the
// default's, the buffers, the [defines], and the best trial measured on it.
json problem_json(const ExportInput& in, const ExportFacts& f, size_t p) {
  const Problem& prob = f.run.problems[p];
  const Trial& w = f.winner;
  json pj = {{"index", p}, {"shape", prob.canonical()}, {"dims", json::object()}, {"dtype", to_string(prob.dtype)}};
  for (const auto& [k, v] : prob.dims) pj["dims"][k] = v;
  const Measurement* m = measurement_on(w, static_cast<int>(p));
  pj["winner"] = m ? json(*m) : json(nullptr);
  if (in.default_trial) {
    const Measurement* d = measurement_on(*in.default_trial, static_cast<int>(p));
    pj["default_p50_us"] = usable_p50(d) ? json(d->p50_us) : json(nullptr);
  }
  auto s = speedup_on(in, w, static_cast<int>(p));
  pj["speedup_over_default"] = s ? json(*s) : json(nullptr);
  try {
    LaunchDims d = f.spec.launch_dims(w.config, prob, f.dev);
    pj["launch"] = {{"grid", d.grid}, {"block", d.block}, {"smem", d.smem}};
    if (f.spec.launch.has_cluster()) pj["launch"]["cluster"] = d.cluster;
  } catch (const std::exception& e) {
    pj["launch"] = {{"error", e.what()}};
  }
  Scope scope(f.spec, &prob, &w.config, f.dev);
  pj["buffers"] = buffers_json(f, prob, scope);
  json defines = json::object();
  for (const auto& [name, e] : f.spec.defines) {
    try {
      Value v = scope.eval(e);
      defines[name] = v.is_int() ? json(v.as_int()) : json(v.as_double());
    } catch (const std::exception&) {
      defines[name] = nullptr;
    }
  }
  pj["defines"] = defines;
  const Trial& b = *f.best_on[p];
  const Measurement* bm = measurement_on(b, static_cast<int>(p));
  pj["best"] = {{"trial_id", b.id},
                {"seq", b.seq},
                {"config", b.config},
                {"config_str", b.config.canonical()},
                {"p50_us", bm ? json(bm->p50_us) : json(nullptr)}};
  return pj;
}

// The spec's launch expressions, as written.
json launch_exprs_json(const KernelSpec& spec) {
  json launch_exprs = json::object();
  auto exprs3 = [](const std::array<Expr, 3>& a) {
    json arr = json::array();
    for (const auto& e : a) arr.push_back(e.empty() ? json("1") : json(e.text()));
    return arr;
  };
  launch_exprs["grid"] = exprs3(spec.launch.grid);
  launch_exprs["block"] = exprs3(spec.launch.block);
  launch_exprs["smem"] = spec.launch.smem.empty() ? "0" : spec.launch.smem.text();
  if (spec.launch.has_cluster()) launch_exprs["cluster"] = exprs3(spec.launch.cluster);
  return launch_exprs;
}

json params_json(const KernelSpec& spec, const Trial& w) {
  json params = json::array();
  for (const auto& p : spec.params) {
    auto it = w.config.values.find(p.name);
    params.push_back({{"name", p.name},
                      {"value", it == w.config.values.end() ? json(nullptr) : json(it->second)},
                      {"default", p.default_value},
                      {"values", p.values},
                      {"help", p.help}});
  }
  return params;
}

// The macros as the header defines them.
json macros_json(const ExportFacts& f) {
  json macros = json::object();
  for (const auto& [k, v] : f.winner.config.values) macros[k] = v;
  macros[dtype_macro(f.run.problems[0].dtype)] = 1;
  for (const auto& [name, text] : f.define_values) {  // [defines] as the header has them (problem 0)
    auto v = parse_int(text);
    macros[name] = v ? json(*v) : json(std::strtod(text.c_str(), nullptr));
  }
  return macros;
}

json kernel_json(const ExportFacts& f) {
  const RunInfo& run = f.run;
  const KernelSpec& spec = f.spec;
  return {{"name", spec.name},
          {"description", spec.description},
          {"entry", spec.entry},
          {"origin", run.spec_origin.empty() ? spec.origin : run.spec_origin},
          {"spec_hash", run.spec_hash.empty() ? spec.content_hash() : run.spec_hash},
          {"arch_specific", spec.arch_specific},
          {"dims", f.dim_names}};
}

json run_json(const RunInfo& run, size_t ok_trials) {
  return {{"id", run.id},
          {"strategy", run.strategy},
          {"seed", run.seed},
          {"budget", run.budget},
          {"elites_k", run.elites_k},
          {"status", run.status},
          {"dtype", run.dtype},
          {"created_at", run.created_at},
          {"finished_at", run.finished_at},
          {"evotune_version", run.evotune_version},
          {"compile_only", run.compile_only},
          {"stats", run.stats},
          {"ok_trials", ok_trials}};
}

}  // namespace

std::string export_json(const ExportInput& in) {
  ExportFacts f = gather_facts(in);
  const Trial& w = f.winner;
  json problems = json::array();
  for (size_t p = 0; p < f.run.problems.size(); ++p) problems.push_back(problem_json(in, f, p));
  json lets = json::object();
  for (const auto& [k, e] : f.spec.lets) lets[k] = e.text();
  json winner = {{"trial_id", w.id},          {"seq", w.seq},
                 {"config", w.config},        {"config_str", w.config.canonical()},
                 {"fitness_us", w.fitness},   {"resources", w.res},
                 {"compile_ms", w.compile_ms}};
  json doc = {{"format", "evotune-export"},
              {"format_version", 1},
              {"exported_at", utc_now_iso()},
              {"kernel", kernel_json(f)},
              {"run", run_json(f.run, in.ok_trials.size())},
              {"device", f.run.device},
              {"winner", winner},
              {"params", params_json(f.spec, w)},
              {"macros", macros_json(f)},
              {"launch_exprs", launch_exprs_json(f.spec)},
              {"lets", lets},
              {"problems", problems}};
  if (in.default_trial) {
    const Trial& d = *in.default_trial;
    doc["default"] = {{"trial_id", d.id},
                      {"config", d.config},
                      {"config_str", d.config.canonical()},
                      {"status", to_string(d.status)},
                      {"fitness_us", d.ok() ? json(d.fitness) : json(nullptr)}};
    doc["speedup_over_default"] =
        d.ok() && d.fitness > 0 && w.fitness > 0 ? json(d.fitness / w.fitness) : json(nullptr);
  } else {
    doc["default"] = nullptr;
    doc["speedup_over_default"] = nullptr;
  }
  return doc.dump(2) + "\n";
}

}  // namespace evotune
