#include "core/types.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

std::string Config::canonical() const {
  std::string s;
  for (const auto& [k, v] : values) {
    if (!s.empty()) s += ',';
    s += k + '=' + std::to_string(v);
  }
  return s;
}

uint64_t Config::hash() const {
  return fnv1a64(canonical());
}

Config Config::parse(const std::string& text) {
  Config c;
  for (const std::string& item : split(text, ',')) {
    std::string t = trim(item);
    if (t.empty()) continue;
    auto eq = t.find('=');
    if (eq == std::string::npos) throw UsageError("config entry '" + t + "' is not NAME=VALUE");
    std::string name = trim(t.substr(0, eq));
    std::optional<int64_t> v = parse_int(trim(t.substr(eq + 1)));
    if (name.empty() || !v) throw UsageError("config entry '" + t + "' is not NAME=INTEGER (a decimal integer)");
    if (!c.values.emplace(name, *v).second) throw UsageError("config names " + name + " twice");
  }
  return c;
}

int64_t Config::at(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) throw UsageError("config has no parameter " + name);
  return it->second;
}

std::optional<int64_t> Problem::find(const std::string& name) const {
  for (const auto& [k, v] : dims)
    if (k == name) return v;
  return std::nullopt;
}

int64_t Problem::at(const std::string& name) const {
  auto v = find(name);
  if (!v) throw UsageError("problem has no dimension " + name);
  return *v;
}

void Problem::set(const std::string& name, int64_t v) {
  for (auto& [k, x] : dims) {
    if (k == name) {
      x = v;
      return;
    }
  }
  dims.emplace_back(name, v);
}

std::string Problem::canonical() const {
  std::string s;
  for (const auto& [k, v] : dims) {
    if (!s.empty()) s += ',';
    s += k + '=' + std::to_string(v);
  }
  return s;
}

std::string to_string(TrialStatus s) {
  switch (s) {
    case TrialStatus::ok:
      return "ok";
    case TrialStatus::invalid:
      return "invalid";
    case TrialStatus::compile_error:
      return "compile_error";
    case TrialStatus::resource_rejected:
      return "resource_rejected";
    case TrialStatus::launch_error:
      return "launch_error";
    case TrialStatus::crashed:
      return "crashed";
    case TrialStatus::timeout:
      return "timeout";
    case TrialStatus::incorrect:
      return "incorrect";
  }
  return "?";
}

const std::vector<TrialStatus>& all_statuses() {
  static const std::vector<TrialStatus> all = {
      TrialStatus::ok,           TrialStatus::invalid, TrialStatus::compile_error, TrialStatus::resource_rejected,
      TrialStatus::launch_error, TrialStatus::crashed, TrialStatus::timeout,       TrialStatus::incorrect};
  return all;
}

TrialStatus parse_status(const std::string& s) {
  for (TrialStatus t : all_statuses())
    if (to_string(t) == s) return t;
  std::string names;
  for (TrialStatus t : all_statuses()) names += (names.empty() ? "" : ", ") + to_string(t);
  throw UsageError("unknown trial status '" + s + "' (one of: " + names + ")");
}

double geomean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double s = 0;
  for (double x : xs) s += std::log(x);
  return std::exp(s / static_cast<double>(xs.size()));
}

// ------------------------------------------------------------------ JSON

void to_json(nlohmann::json& j, const Config& c) {
  j = nlohmann::json::object();
  for (const auto& [k, v] : c.values) j[k] = v;
}
void from_json(const nlohmann::json& j, Config& c) {
  c.values.clear();
  for (auto it = j.begin(); it != j.end(); ++it) c.values[it.key()] = it.value().get<int64_t>();
}

void to_json(nlohmann::json& j, const Problem& p) {
  nlohmann::json dims = nlohmann::json::array();
  for (const auto& [k, v] : p.dims) dims.push_back({k, v});
  j = {{"dims", dims}, {"dtype", to_string(p.dtype)}};
}
void from_json(const nlohmann::json& j, Problem& p) {
  p.dims.clear();
  for (const auto& d : j.at("dims")) p.dims.emplace_back(d.at(0).get<std::string>(), d.at(1).get<int64_t>());
  p.dtype = parse_dtype(j.at("dtype").get<std::string>());
}

void to_json(nlohmann::json& j, const Resources& r) {
  j = {{"registers", r.registers},       {"smem_static", r.smem_static}, {"smem_dynamic", r.smem_dynamic},
       {"spill_stores", r.spill_stores}, {"spill_loads", r.spill_loads}, {"stack_frame", r.stack_frame},
       {"wgmma_serialized", r.wgmma_serialized}};
}
void from_json(const nlohmann::json& j, Resources& r) {
  r.registers = j.value("registers", 0);
  r.smem_static = j.value("smem_static", 0);
  r.smem_dynamic = j.value("smem_dynamic", 0);
  r.spill_stores = j.value("spill_stores", 0);
  r.spill_loads = j.value("spill_loads", 0);
  r.stack_frame = j.value("stack_frame", 0);
  r.wgmma_serialized = j.value("wgmma_serialized", 0);
}

void to_json(nlohmann::json& j, const ErrorStats& e) {
  j = {{"max_abs", e.max_abs}, {"mean_abs", e.mean_abs},   {"bad_frac", e.bad_frac},
       {"rel_l2", e.rel_l2},   {"nan_count", e.nan_count}, {"unwritten", e.unwritten}};
}
void from_json(const nlohmann::json& j, ErrorStats& e) {
  e.max_abs = j.value("max_abs", 0.0);
  e.mean_abs = j.value("mean_abs", 0.0);
  e.bad_frac = j.value("bad_frac", 0.0);
  e.rel_l2 = j.value("rel_l2", 0.0);
  e.nan_count = j.value("nan_count", int64_t{0});
  e.unwritten = j.value("unwritten", int64_t{0});
}

void to_json(nlohmann::json& j, const Measurement& m) {
  j = {{"problem", m.problem}, {"p50_us", m.p50_us}, {"p90_us", m.p90_us},   {"min_us", m.min_us},
       {"mean_us", m.mean_us}, {"cv", m.cv},         {"samples", m.samples}, {"aborted_early", m.aborted_early},
       {"err", m.err}};
}
void from_json(const nlohmann::json& j, Measurement& m) {
  m.problem = j.value("problem", 0);
  m.p50_us = j.value("p50_us", 0.0);
  m.p90_us = j.value("p90_us", 0.0);
  m.min_us = j.value("min_us", 0.0);
  m.mean_us = j.value("mean_us", 0.0);
  m.cv = j.value("cv", 0.0);
  m.samples = j.value("samples", 0);
  m.aborted_early = j.value("aborted_early", false);
  if (j.contains("err")) m.err = j.at("err").get<ErrorStats>();
}

void to_json(nlohmann::json& j, const BaselineResult& b) {
  j = {{"problem", b.problem}, {"name", b.name}, {"library", b.library}, {"status", b.status}, {"reason", b.reason},
       {"detail", b.detail},   {"m", b.m}};
}
void from_json(const nlohmann::json& j, BaselineResult& b) {
  b.problem = j.value("problem", 0);
  b.name = j.value("name", "");
  b.library = j.value("library", "");
  b.status = j.value("status", "failed");
  b.reason = j.value("reason", "");
  b.detail = j.value("detail", "");
  if (j.contains("m")) b.m = j.at("m").get<Measurement>();
}

void to_json(nlohmann::json& j, const Trial& t) {
  j = {{"id", t.id},
       {"run_id", t.run_id},
       {"seq", t.seq},
       {"config", t.config},
       {"config_str", t.config.canonical()},
       {"status", to_string(t.status)},
       {"error", t.error},
       {"compile_ms", t.compile_ms},
       {"verify_ms", t.verify_ms},
       {"bench_ms", t.bench_ms},
       {"cache_hit", t.cache_hit},
       {"resources", t.res},
       {"per_problem", t.per_problem},
       {"fitness", t.fitness},
       {"final_us", t.final_us},
       {"device", t.device},
       {"host", t.host},
       {"created_at", t.created_at},
       {"sanitized", t.sanitized}};
}
void from_json(const nlohmann::json& j, Trial& t) {
  t.id = j.value("id", int64_t{0});
  t.run_id = j.value("run_id", int64_t{0});
  t.seq = j.value("seq", 0);
  t.config = j.at("config").get<Config>();
  t.status = parse_status(j.at("status").get<std::string>());
  t.error = j.value("error", std::string());
  t.compile_ms = j.value("compile_ms", 0.0);
  t.verify_ms = j.value("verify_ms", 0.0);
  t.bench_ms = j.value("bench_ms", 0.0);
  t.cache_hit = j.value("cache_hit", false);
  if (j.contains("resources")) t.res = j.at("resources").get<Resources>();
  t.per_problem = j.value("per_problem", std::vector<Measurement>{});
  t.fitness = j.value("fitness", 0.0);
  t.final_us = j.value("final_us", 0.0);
  t.device = j.value("device", -1);
  t.host = j.value("host", std::string());
  t.created_at = j.value("created_at", std::string());
  t.sanitized = j.value("sanitized", std::string());
}

const BaselineResult* BaselineSummary::not_ok() const {
  for (const BaselineResult* r : per_problem)
    if (r && !r->ok()) return r;
  return nullptr;
}

std::vector<BaselineSummary> summarize_baselines(const std::vector<BaselineResult>& results, size_t problems) {
  std::vector<BaselineSummary> out;
  for (const BaselineResult& r : results) {
    auto it = std::find_if(out.begin(), out.end(), [&](const BaselineSummary& s) { return s.name == r.name; });
    if (it == out.end()) {
      out.push_back({r.name, r.library, r.detail, 0, std::vector<const BaselineResult*>(problems, nullptr)});
      it = out.end() - 1;
    }
    if (r.problem >= 0 && static_cast<size_t>(r.problem) < problems)
      it->per_problem[static_cast<size_t>(r.problem)] = &r;
  }
  for (BaselineSummary& s : out) {
    std::vector<double> us;
    for (const BaselineResult* r : s.per_problem)
      if (r && r->ok() && r->m.p50_us > 0) us.push_back(r->m.p50_us);
    s.us = us.size() == problems && problems > 0 ? geomean(us) : 0;
    for (const BaselineResult* r : s.per_problem)
      if (r && !r->detail.empty()) s.detail = r->detail;
  }
  return out;
}

double speedup_over(const Trial& t, const BaselineSummary& b) {
  const double us = t.final_us > 0 ? t.final_us : t.fitness;
  return us > 0 && b.us > 0 ? b.us / us : 0;
}

}  // namespace evotune
