#include "core/spec.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

// ------------------------------------------------------------ enum names

std::string to_string(ScalarType t) {
  switch (t) {
    case ScalarType::i32:
      return "i32";
    case ScalarType::i64:
      return "i64";
    case ScalarType::u32:
      return "u32";
    case ScalarType::f32:
      return "f32";
  }
  return "?";
}
std::string to_string(ArgRole r) {
  switch (r) {
    case ArgRole::in:
      return "in";
    case ArgRole::out:
      return "out";
    case ArgRole::scratch:
      return "scratch";
  }
  return "?";
}
std::string to_string(InitKind k) {
  switch (k) {
    case InitKind::normal:
      return "normal";
    case InitKind::uniform:
      return "uniform";
    case InitKind::zero:
      return "zero";
    case InitKind::ones:
      return "ones";
  }
  return "?";
}

DeviceTraits DeviceTraits::for_arch(int cc) {
  DeviceTraits d;
  d.cc = cc;
  switch (cc) {
    case 80:
      d.num_sms = 108;
      break;
    case 86:
      d.num_sms = 84;
      break;
    case 89:
      d.num_sms = 58;
      break;  // L4
    case 90:
      d.num_sms = 132;
      break;
    case 100:
      d.num_sms = 148;
      break;
    default:
      d.num_sms = 100;
      break;
  }
  return d;
}

// ------------------------------------------------------------ Scope

const std::vector<std::string>& builtin_names() {
  static const std::vector<std::string> names = {"dtype_bytes", "is_bf16", "cc", "num_sms"};  // Scope::lookup
  return names;
}

namespace {

// A [lets] entry that failed, its message complete: the expressions that
// read it pass it on unchanged.
struct LetError : ExprError {
  using ExprError::ExprError;
};

std::string indexed(const std::string& key, size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

// Why `v` breaks `rule`, or "" when it keeps it.
std::string rule_violation(ValueRule rule, const Value& v) {
  switch (rule) {
    case ValueRule::any:
      return "";
    case ValueRule::positive_int:
      return v.is_integral() && v.as_int() >= 1 ? "" : "must be a positive integer";
    case ValueRule::nonneg_int:
      return v.is_integral() && v.as_int() >= 0 ? "" : "must be an integer >= 0";
    case ValueRule::number:
      return std::isfinite(v.as_double()) ? "" : "must be a finite number";
    case ValueRule::nonneg_number:
      return v.as_double() >= 0 ? "" : "must be a number >= 0";
    case ValueRule::fraction:
      return v.as_double() >= 0 && v.as_double() <= 1 ? "" : "must be a number from 0 to 1";
  }
  return "";
}

}  // namespace

Scope::Scope(const KernelSpec& spec, const Problem* problem, const Config* config, const DeviceTraits& dev)
    : spec_(spec), problem_(problem), config_(config), dev_(dev) {}

Value Scope::eval(const Expr& e) const {
  try {
    return e.eval([this](std::string_view n) { return lookup(n); });
  } catch (const LetError&) {
    throw;
  } catch (const ExprError& x) {
    throw ExprError(x.what() + values_of(e));
  }
}

Value Scope::eval(const Expr& e, ValueRule rule, const std::string& where) const {
  return eval_at(e, rule, [&] { return where; });
}

Value Scope::eval(const Expr& e, ValueRule rule, std::string_view key, size_t index) const {
  return eval_at(e, rule, [&] { return indexed(std::string(key), index); });
}

// `where()` is called only for a message: evaluating constraints is hot.
template <typename Where>
Value Scope::eval_at(const Expr& e, ValueRule rule, const Where& where) const {
  auto site = [&] { return spec_.label() + ": " + where() + " " + in_quotes(e.text()) + context() + ": "; };
  Value v;
  try {
    v = eval(e);
  } catch (const ExprError& x) {
    throw SpecError(site() + x.what());
  }
  const std::string why = rule_violation(rule, v);
  if (!why.empty()) throw SpecError(site() + why + ", is " + v.str() + values_of(e));
  return v;
}

// " with N=1000, BLOCK=0": the names `e` reads that have a value here.
std::string Scope::values_of(const Expr& e) const {
  std::vector<std::string> parts;
  for (const std::string& id : e.identifiers()) {
    try {
      if (auto v = lookup(id)) parts.push_back(id + "=" + v->str());
    } catch (const ExprError&) {
      // a let that fails has no value to show; its own error says why
    }
  }
  return parts.empty() ? "" : " with " + join(parts, ", ");
}

std::string Scope::context() const {
  std::string c;
  if (problem_) c += " on " + problem_->canonical() + " " + to_string(problem_->dtype);
  if (config_) c += std::string(problem_ ? "," : "") + " config " + config_->canonical();
  return c;
}

std::optional<Value> Scope::lookup(std::string_view name) const {
  std::string n(name);
  if (config_) {
    auto it = config_->values.find(n);
    if (it != config_->values.end()) return Value(it->second);
  }
  if (problem_) {
    if (auto v = problem_->find(n)) return Value(*v);
    // An optional dimension the problem lacks (one recorded before the
    // kernel gained it) has its default, as check_problem would fill it.
    if (auto d = spec_.dim_defaults.find(n); d != spec_.dim_defaults.end()) return Value(d->second);
    if (n == "dtype_bytes") return Value(static_cast<int64_t>(dtype_bytes(problem_->dtype)));
    if (n == "is_bf16") return Value(static_cast<int64_t>(problem_->dtype == Dtype::bf16));
  }
  if (n == "cc") return Value(static_cast<int64_t>(dev_.cc));
  if (n == "num_sms") return Value(static_cast<int64_t>(dev_.num_sms));
  auto memo = memo_.find(name);
  if (memo != memo_.end()) return memo->second;
  auto let = spec_.lets.find(n);
  if (let == spec_.lets.end()) return std::nullopt;
  // The loader refuses cycles; this keeps a hand-built spec from recursing forever.
  if (std::find(evaluating_.begin(), evaluating_.end(), n) != evaluating_.end())
    throw LetError("[lets] " + n + " refers to itself");
  if (evaluating_.size() >= static_cast<size_t>(kMaxExprDepth))
    throw LetError("[lets] " + n + ": lets refer to lets deeper than " + std::to_string(kMaxExprDepth) + " levels");
  evaluating_.push_back(n);
  Value v;
  try {
    v = eval(let->second);
  } catch (const ExprError& e) {
    evaluating_.pop_back();
    throw LetError("[lets] " + n + ": " + e.what());
  }
  evaluating_.pop_back();
  memo_.emplace(n, v);
  return v;
}

// ------------------------------------------------------------ KernelSpec

namespace {

// The [tolerance] keys: where each is read, where its value goes, its rule.
struct ToleranceField {
  const char* name;
  Expr ToleranceSpec::*spec;
  double Tolerances::*value;
  ValueRule rule;
};
const ToleranceField kToleranceFields[] = {
    {"max_abs", &ToleranceSpec::max_abs, &Tolerances::max_abs, ValueRule::nonneg_number},
    {"mean_abs", &ToleranceSpec::mean_abs, &Tolerances::mean_abs, ValueRule::nonneg_number},
    {"atol", &ToleranceSpec::atol, &Tolerances::atol, ValueRule::nonneg_number},
    {"rtol", &ToleranceSpec::rtol, &Tolerances::rtol, ValueRule::nonneg_number},
    {"max_bad_frac", &ToleranceSpec::max_bad_frac, &Tolerances::max_bad_frac, ValueRule::fraction},
};

// "[tolerance].atol", or "[tolerance.bf16].atol" for a dtype's override.
std::string tolerance_where(const std::string& dtype, const char* field) {
  return (dtype.empty() ? std::string("[tolerance].") : "[tolerance." + dtype + "].") + field;
}

struct GateField {
  const char* name;
  Expr GateSpec::*expr;
};
const GateField kGateFields[] = {{"max_registers", &GateSpec::max_registers},
                                 {"max_smem", &GateSpec::max_smem},
                                 {"max_spill_bytes", &GateSpec::max_spill_bytes},
                                 {"max_stack", &GateSpec::max_stack}};

bool reads_param(const KernelSpec& s, const Expr& e) {
  for (const std::string& n : s.names_used(e))
    if (s.find_param(n)) return true;
  return false;
}

// The default config, the [space] starts and every config one parameter away
// from the default: few (the sum of the value lists), and between them they
// give every parameter each of its values.
std::vector<Config> configs_near_default(const KernelSpec& s) {
  std::vector<Config> out{s.default_config()};
  out.insert(out.end(), s.starts.begin(), s.starts.end());
  for (const ParamSpec& p : s.params) {
    for (int64_t v : p.values) {
      if (v == p.default_value) continue;
      out.push_back(s.default_config());
      out.back().values[p.name] = v;
    }
  }
  return out;
}

}  // namespace

std::string KernelSpec::label() const {
  return origin == "builtin" ? "builtin:" + name : origin;
}

std::string KernelSpec::content_hash() const {
  uint64_t h = fnv1a64(spec_text);
  h = fnv1a64(source_text, h);
  h = fnv1a64(reference.source_text, h);
  for (const auto& [hname, text] : headers) h = fnv1a64(text, fnv1a64(hname, h));
  return hex64(h);
}

const ParamSpec* KernelSpec::find_param(const std::string& n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

Config KernelSpec::default_config() const {
  Config c;
  for (const auto& p : params) c.values[p.name] = p.default_value;
  return c;
}

double KernelSpec::space_size() const {
  double n = 1;
  for (const auto& p : params) n *= static_cast<double>(p.values.size());
  return n;
}

void KernelSpec::check_problem(Problem& p) const {
  for (const auto& [k, v] : p.dims) {
    if (std::find(dims.begin(), dims.end(), k) == dims.end() && !dim_defaults.count(k))
      throw UsageError("kernel " + name + " has no dimension " + k + " (dimensions: " + join(dims, ",") + ")");
  }
  Problem ordered;
  ordered.dtype = p.dtype;
  for (const auto& d : dims) {
    auto v = p.find(d);
    if (!v) {
      auto def = dim_defaults.find(d);
      if (def == dim_defaults.end())
        throw UsageError("problem " + p.canonical() + " misses dimension " + d + " of kernel " + name);
      v = def->second;
    }
    ordered.dims.emplace_back(d, *v);
  }
  for (const auto& [k, v] : dim_defaults) {
    if (std::find(dims.begin(), dims.end(), k) != dims.end()) continue;
    auto given = p.find(k);
    ordered.dims.emplace_back(k, given ? *given : v);
  }
  p = ordered;
  if (std::find(dtypes.begin(), dtypes.end(), p.dtype) == dtypes.end()) {
    std::vector<std::string> names;
    for (Dtype d : dtypes) names.push_back(to_string(d));
    throw UsageError("kernel " + name + " does not take dtype " + to_string(p.dtype) + " (it takes " +
                     join(names, ", ") + ")");
  }
  Scope scope(*this, &p, nullptr, DeviceTraits{});
  for (size_t i = 0; i < problem_constraints.size(); ++i) {
    const Expr& c = problem_constraints[i];
    if (!scope.eval(c, ValueRule::any, "[problem].constraints", i).truthy())
      throw UsageError("kernel " + name + " does not accept " + p.canonical() + ": needs " + c.text());
  }
}

Problem KernelSpec::parse_problem(const std::string& text, Dtype dtype) const {
  Problem p;
  p.dtype = dtype;
  std::vector<std::string> parts = split(text, ',');
  bool named = text.find('=') != std::string::npos;
  if (named) {
    for (const auto& part : parts) {
      auto eq = part.find('=');
      if (eq == std::string::npos)
        throw UsageError("malformed problem '" + text + "': '" + trim(part) + "' is not NAME=VALUE");
      std::string k = trim(part.substr(0, eq));
      auto v = parse_int(trim(part.substr(eq + 1)));
      if (!v) throw UsageError("malformed problem '" + text + "': '" + trim(part) + "' needs a decimal integer value");
      if (p.find(k)) throw UsageError("malformed problem '" + text + "': " + k + " given twice");
      p.dims.emplace_back(k, *v);
    }
  } else {
    std::vector<std::string> all = dims;
    if (parts.size() > dims.size()) {
      for (const auto& [k, v] : dim_defaults)
        if (std::find(dims.begin(), dims.end(), k) == dims.end()) all.push_back(k);
    }
    if (parts.size() < dims.size() || parts.size() > all.size())
      throw UsageError("malformed shape '" + text + "': kernel " + name + " takes " + std::to_string(dims.size()) +
                       " comma-separated integers (" + join(dims, ",") + ")");
    for (size_t i = 0; i < parts.size(); ++i) {
      auto v = parse_int(trim(parts[i]));
      if (!v) throw UsageError("malformed shape '" + text + "': '" + trim(parts[i]) + "' is not a decimal integer");
      p.dims.emplace_back(all[i], *v);
    }
  }
  for (const auto& [k, v] : p.dims)
    if (v <= 0 && std::find(dims.begin(), dims.end(), k) != dims.end())
      throw UsageError("malformed problem '" + text + "': " + k + " must be positive");
  check_problem(p);
  return p;
}

Problem KernelSpec::check_shape(size_t i, const Problem& base) const {
  Problem p = base;
  for (const auto& part : split(check_shapes.at(i), ',')) {
    auto eq = part.find('=');
    p.set(trim(part.substr(0, eq)), *parse_int(trim(part.substr(eq + 1))));
  }
  return p;
}

std::vector<Problem> KernelSpec::check_problems(const std::vector<Problem>& run) const {
  std::vector<Problem> out;
  auto known = [&](const Problem& p) {
    auto same = [&](const Problem& x) { return x.canonical() == p.canonical() && x.dtype == p.dtype; };
    return std::any_of(run.begin(), run.end(), same) || std::any_of(out.begin(), out.end(), same);
  };
  for (size_t i = 0; i < check_shapes.size(); ++i) {
    for (const Problem& base : run) {
      Problem cs = check_shape(i, base);
      try {
        check_problem(cs);
      } catch (const UsageError&) {
        continue;  // this check shape does not apply to this problem
      }
      if (!known(cs)) out.push_back(cs);
    }
  }
  return out;
}

std::optional<std::string> KernelSpec::invalid_reason(const Config& c, const std::vector<Problem>& problems,
                                                      const DeviceTraits& dev) const {
  for (const auto& p : params) {
    auto it = c.values.find(p.name);
    if (it == c.values.end()) return "missing parameter " + p.name;
    if (std::find(p.values.begin(), p.values.end(), it->second) == p.values.end())
      return p.name + "=" + std::to_string(it->second) + " is not one of its values";
  }
  for (const auto& [k, v] : c.values)
    if (!find_param(k)) return "unknown parameter " + k;
  // Any false constraint rejects the config, whatever its place: the
  // enumeration prunes in another order and must agree.
  std::optional<SpecError> failure;
  for (const auto& prob : problems) {
    Scope scope(*this, &prob, &c, dev);
    for (size_t i = 0; i < constraints.size(); ++i) {
      const Expr& e = constraints[i];
      try {
        if (!scope.eval(e, ValueRule::any, "[space].constraints", i).truthy())
          return "violates " + e.text() + (problems.size() > 1 ? " on " + prob.canonical() : "");
      } catch (const SpecError& err) {
        if (!failure) failure = err;
      }
    }
  }
  if (failure) throw *failure;
  return std::nullopt;
}

void KernelSpec::check_binding(const std::vector<Problem>& problems, const DeviceTraits& dev) const {
  std::vector<Problem> all = problems;
  for (Problem& p : check_problems(problems)) all.push_back(std::move(p));
  const std::vector<ExprSite> sites = expr_sites();
  std::vector<bool> per_problem(sites.size());
  for (size_t i = 0; i < sites.size(); ++i) per_problem[i] = !reads_param(*this, *sites[i].expr);
  for (const Problem& p : all) {
    Scope scope(*this, &p, nullptr, dev);
    for (size_t i = 0; i < sites.size(); ++i)
      if (per_problem[i] && !sites[i].guarded) scope.eval(*sites[i].expr, sites[i].rule, sites[i].where);
  }
  // Validity is decided on the run's problems; a valid config is then
  // compiled and launched on the check shapes too.
  for (const Config& c : configs_near_default(*this)) {
    if (invalid_reason(c, problems, dev)) continue;
    for (const Problem& p : all) {
      Scope scope(*this, &p, &c, dev);
      for (size_t i = 0; i < sites.size(); ++i)
        if (!per_problem[i] && !sites[i].guarded) scope.eval(*sites[i].expr, sites[i].rule, sites[i].where);
    }
  }
}

std::vector<ExprSite> KernelSpec::expr_sites() const {
  std::vector<ExprSite> out;
  auto add = [&](std::string where, const Expr& e, ValueRule rule, bool needs_config, bool guarded = false) {
    if (!e.empty()) out.push_back({std::move(where), &e, rule, needs_config, guarded});
  };
  for (size_t i = 0; i < problem_constraints.size(); ++i)
    add(indexed("[problem].constraints", i), problem_constraints[i], ValueRule::any, false, true);
  add("[problem].flops", flops, ValueRule::nonneg_number, false);
  add("[problem].bytes", bytes, ValueRule::nonneg_number, false);
  for (const auto& [k, e] : lets) add("[lets]." + k, e, ValueRule::any, true, true);
  for (size_t i = 0; i < constraints.size(); ++i)
    add(indexed("[space].constraints", i), constraints[i], ValueRule::any, true, true);
  for (const auto& [k, e] : defines) add("[defines]." + k, e, ValueRule::any, true);
  // The reference has no config: its launch is evaluated per problem.
  for (const LaunchSpec* l : {&launch, &reference.launch}) {
    const std::string section = l == &launch ? "[launch]" : "[reference]";
    for (size_t i = 0; i < 3; ++i) {
      add(indexed(section + ".grid", i), l->grid[i], ValueRule::positive_int, l == &launch);
      add(indexed(section + ".block", i), l->block[i], ValueRule::positive_int, l == &launch);
      add(indexed(section + ".cluster", i), l->cluster[i], ValueRule::positive_int, l == &launch);
    }
    add(section + ".smem", l->smem, ValueRule::nonneg_int, l == &launch);
  }
  for (const ArgSpec& a : args) {
    const std::string where = "[[arg]] " + a.name;
    if (a.is_tmap) {
      for (size_t i = 0; i < a.tmap.dims.size(); ++i)
        add(indexed(where + " dims", i), a.tmap.dims[i], ValueRule::positive_int, true);
      for (size_t i = 0; i < a.tmap.strides.size(); ++i)
        add(indexed(where + " strides", i), a.tmap.strides[i], ValueRule::positive_int, true);
      for (size_t i = 0; i < a.tmap.box.size(); ++i)
        add(indexed(where + " box", i), a.tmap.box[i], ValueRule::positive_int, true);
      add(where + " swizzle", a.tmap.swizzle, ValueRule::nonneg_int, true);
      add(where + " l2_promotion", a.tmap.l2_promotion, ValueRule::nonneg_int, true);
      add(where + " enabled", a.tmap.enabled, ValueRule::any, true);
    } else if (a.is_buffer) {
      // In and out buffers are allocated and filled per problem, before any config.
      add(where + " count", a.count, ValueRule::positive_int, a.role == ArgRole::scratch);
      if (a.role != ArgRole::scratch) {
        add(where + " scale", a.init_scale, ValueRule::nonneg_number, false);
        add(where + " offset", a.init_offset, ValueRule::number, false);
      }
    } else {
      const bool to_reference = std::find(reference.args.begin(), reference.args.end(), a.name) != reference.args.end();
      add(where + " value", a.value, ValueRule::any, !to_reference);
    }
  }
  for (const auto& [dtype, ts] : tolerance)
    for (const ToleranceField& f : kToleranceFields) add(tolerance_where(dtype, f.name), ts.*f.spec, f.rule, false);
  for (const GateField& g : kGateFields)
    add(std::string("[gates].") + g.name, gates.*g.expr, ValueRule::nonneg_int, true);
  return out;
}

std::set<std::string> KernelSpec::names_used(const Expr& e) const {
  std::set<std::string> seen;
  std::vector<std::string> todo = e.identifiers();
  while (!todo.empty()) {
    std::string n = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    if (auto let = lets.find(n); let != lets.end())
      for (std::string& id : let->second.identifiers()) todo.push_back(std::move(id));
  }
  return seen;
}

namespace {

LaunchDims eval_launch(const LaunchSpec& l, const Scope& scope, const std::string& section) {
  LaunchDims d;
  for (size_t i = 0; i < 3; ++i) {
    auto dim = [&](const std::array<Expr, 3>& es, const char* key) {
      return es[i].empty() ? 1 : scope.eval(es[i], ValueRule::positive_int, section + key, i).as_int();
    };
    d.grid[i] = dim(l.grid, ".grid");
    d.block[i] = dim(l.block, ".block");
    d.cluster[i] = dim(l.cluster, ".cluster");
  }
  d.smem = l.smem.empty() ? 0 : scope.eval(l.smem, ValueRule::nonneg_int, section + ".smem").as_int();
  return d;
}

}  // namespace

LaunchDims KernelSpec::launch_dims(const Config& c, const Problem& p, const DeviceTraits& dev) const {
  return eval_launch(launch, Scope(*this, &p, &c, dev), "[launch]");
}

LaunchDims KernelSpec::reference_launch_dims(const Problem& p, const DeviceTraits& dev) const {
  return eval_launch(reference.launch, Scope(*this, &p, nullptr, dev), "[reference]");
}

std::vector<std::pair<std::string, std::string>> KernelSpec::compile_defines(const Config& c, const Problem& p,
                                                                             const DeviceTraits& dev) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : c.values) out.emplace_back(k, std::to_string(v));
  Scope scope(*this, &p, &c, dev);
  for (const auto& [k, e] : defines) out.emplace_back(k, scope.eval(e, ValueRule::any, "[defines]." + k).str());
  out.emplace_back(dtype_macro(p.dtype), "1");
  return out;
}

std::vector<std::pair<std::string, std::string>> KernelSpec::reference_defines(const Problem& p,
                                                                               const DeviceTraits& dev) const {
  std::vector<std::pair<std::string, std::string>> out;
  Scope scope(*this, &p, nullptr, dev);
  for (const auto& [k, e] : defines) {
    if (reads_param(*this, e)) continue;  // a define that depends on a tunable: the reference does not use it
    out.emplace_back(k, scope.eval(e, ValueRule::any, "[defines]." + k).str());
  }
  out.emplace_back(dtype_macro(p.dtype), "1");
  return out;
}

Tolerances KernelSpec::tolerances(const Problem& p) const {
  Scope scope(*this, &p, nullptr, DeviceTraits{});
  Tolerances t;
  for (const ToleranceField& f : kToleranceFields) {
    for (const std::string& dtype : {to_string(p.dtype), std::string()}) {  // the dtype's override, else the default
      auto ts = tolerance.find(dtype);
      if (ts == tolerance.end() || (ts->second.*f.spec).empty()) continue;
      t.*f.value = scope.eval(ts->second.*f.spec, f.rule, tolerance_where(dtype, f.name)).as_double();
      break;
    }
  }
  return t;
}

namespace {

// Why ptxas serialised a kernel's wgmma, by its advisory number (as ptxas
// 13.0 words them); "" for one not listed here.
const char* wgmma_serialization_cause(int code) {
  switch (code) {
    case 7511: return ": insufficient register resources for the wgmma pipeline";
    case 7512: return ": insufficient register resources for the function";
    case 7515: return ": non-wgmma instructions define accumulator registers while a wgmma is in flight";
    default: return "";
  }
}

}  // namespace

std::optional<std::string> KernelSpec::gate_reason(const Resources& r, const Config& c, const Problem& p,
                                                   const DeviceTraits& dev) const {
  Scope scope(*this, &p, &c, dev);
  auto limit = [&](const Expr& e, const char* key) -> std::optional<int64_t> {
    if (e.empty()) return std::nullopt;
    return scope.eval(e, ValueRule::nonneg_int, std::string("[gates].") + key).as_int();
  };
  if (auto m = limit(gates.max_registers, "max_registers"); m && r.registers > *m)
    return strfmt("%d registers > gate %lld", r.registers, static_cast<long long>(*m));
  if (auto m = limit(gates.max_smem, "max_smem"); m && r.smem_total() > *m)
    return strfmt("%d bytes shared memory > gate %lld", r.smem_total(), static_cast<long long>(*m));
  if (auto m = limit(gates.max_spill_bytes, "max_spill_bytes"); m && r.spill_bytes() > *m)
    return strfmt("%d bytes spilled > gate %lld", r.spill_bytes(), static_cast<long long>(*m));
  if (auto m = limit(gates.max_stack, "max_stack"); m && r.stack_frame > *m)
    return strfmt("%d bytes stack frame > gate %lld", r.stack_frame, static_cast<long long>(*m));
  if (!gates.allow_serialized_wgmma && r.wgmma_serialized)
    return strfmt("ptxas serialised the wgmma instructions (C%d%s) > gate allow_serialized_wgmma = false",
                  r.wgmma_serialized, wgmma_serialization_cause(r.wgmma_serialized));
  return std::nullopt;
}

double KernelSpec::flops_of(const Problem& p) const {
  if (flops.empty()) return 0;
  return Scope(*this, &p, nullptr, DeviceTraits{}).eval(flops, ValueRule::nonneg_number, "[problem].flops").as_double();
}

// ------------------------------------------------------------ TOML parsing

namespace {

class TomlReader {
 public:
  explicit TomlReader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw SpecError(origin_ + ": " + where + ": " + what);
  }

  // Rejects keys the format does not define, so typos are caught.
  void only_keys(const toml::table& t, const std::string& where, std::initializer_list<const char*> allowed) const {
    for (const auto& [k, v] : t) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || k.str() == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(where, "unknown key '" + std::string(k.str()) + "' (allowed: " + list + ")");
      }
    }
  }

  const toml::table* table(const toml::table& t, const char* key, bool required, const std::string& where) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(where, std::string("missing [") + key + "] table");
      return nullptr;
    }
    if (!n->is_table()) fail(where, std::string(key) + " must be a table");
    return n->as_table();
  }

  std::string str(const toml::table& t, const char* key, const std::string& where, bool required,
                  std::string def = {}) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(where, std::string("missing key '") + key + "'");
      return def;
    }
    if (!n->is_string()) fail(where, std::string("'") + key + "' must be a string");
    return std::string(*n->value<std::string>());
  }

  // Compute capability × 10 of an architecture NVRTC can target; 0 means
  // none where `zero_means_none`.
  int compute_capability(const toml::table& t, const char* key, int64_t def, bool zero_means_none) const {
    const int64_t v = integer(t, key, "[kernel]").value_or(def);
    if ((v != 0 || !zero_means_none) && (v < kMinComputeCapability || v > kMaxComputeCapability))
      fail("[kernel]", strfmt("%s = %lld is not a compute capability × 10 (%d to %d%s)", key, static_cast<long long>(v),
                              kMinComputeCapability, kMaxComputeCapability, zero_means_none ? ", or 0 for none" : ""));
    return static_cast<int>(v);
  }

  std::optional<int64_t> integer(const toml::table& t, const char* key, const std::string& where) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_integer()) fail(where, std::string("'") + key + "' must be an integer");
    return *n->value<int64_t>();
  }

  bool boolean(const toml::table& t, const char* key, const std::string& where, bool def) const {
    const toml::node* n = t.get(key);
    if (!n) return def;
    if (!n->is_boolean()) fail(where, std::string("'") + key + "' must be true or false");
    return *n->value<bool>();
  }

  // An expression: a string, an integer or a float.
  Expr expr_of(const toml::node& n, const std::string& where) const {
    try {
      if (n.is_string()) return Expr::parse(*n.value<std::string>());
      if (n.is_integer()) return Expr::constant(Value(*n.value<int64_t>()));
      if (n.is_floating_point()) {
        const double d = *n.value<double>();
        if (!std::isfinite(d)) fail(where, "expected a finite number, got " + Value(d).str());
        return Expr::constant(Value(d));
      }
    } catch (const ExprError& e) {
      fail(where, e.what());
    }
    fail(where, "expected an expression (string or number)");
  }

  Expr expr(const toml::table& t, const char* key, const std::string& where, bool required) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(where, std::string("missing key '") + key + "'");
      return {};
    }
    return expr_of(*n, where + "." + key);
  }

  std::vector<std::string> strings(const toml::table& t, const char* key, const std::string& where) const {
    std::vector<std::string> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    if (!n->is_array()) fail(where, std::string("'") + key + "' must be an array of strings");
    for (const auto& e : *n->as_array()) {
      if (!e.is_string()) fail(where, std::string("'") + key + "' must hold only strings");
      out.emplace_back(*e.value<std::string>());
    }
    return out;
  }

  std::vector<Expr> exprs(const toml::table& t, const char* key, const std::string& where) const {
    std::vector<Expr> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    if (!n->is_array()) fail(where, std::string("'") + key + "' must be an array of expressions");
    size_t i = 0;
    for (const auto& e : *n->as_array()) out.push_back(expr_of(e, where + "." + key + "[" + std::to_string(i++) + "]"));
    return out;
  }

  std::array<Expr, 3> dim3(const toml::table& t, const char* key, const std::string& where, bool required) const {
    std::array<Expr, 3> out;
    std::vector<Expr> v = exprs(t, key, where);
    if (v.empty() && required) fail(where, std::string("missing key '") + key + "' (1 to 3 expressions)");
    if (v.size() > 3) fail(where, std::string("'") + key + "' takes at most 3 expressions");
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i];
    return out;
  }

  LaunchSpec launch(const toml::table& t, const std::string& where) const {
    LaunchSpec l;
    l.grid = dim3(t, "grid", where, true);
    l.block = dim3(t, "block", where, true);
    l.cluster = dim3(t, "cluster", where, false);
    l.smem = expr(t, "smem", where, false);
    return l;
  }

 private:
  std::string origin_;
};

ElemType parse_elem(const std::string& s, const TomlReader& r, const std::string& where) {
  static const std::map<std::string, ElemType> names = {
      {"elem", ElemType::elem}, {"f16", ElemType::f16},   {"bf16", ElemType::bf16},
      {"f32", ElemType::f32},   {"i32", ElemType::i32},   {"u32", ElemType::u32},
      {"u8", ElemType::u8},     {"e4m3", ElemType::e4m3}, {"e5m2", ElemType::e5m2}};
  auto it = names.find(s);
  if (it == names.end())
    r.fail(where, "unknown buffer type '" + s + "*' (elem, f16, bf16, f32, i32, u32, u8, e4m3, e5m2)");
  return it->second;
}

bool is_dimension(const KernelSpec& s, const std::string& name) {
  return std::find(s.dims.begin(), s.dims.end(), name) != s.dims.end() || s.dim_defaults.count(name);
}

// Depth-first over the lets, iteratively (a spec may hold many); a let met
// again while open closes a cycle, reported as its path.
void check_let_cycles(const KernelSpec& s, const TomlReader& r) {
  std::map<std::string, std::vector<std::string>> reads;
  for (const auto& [name, e] : s.lets)
    for (const std::string& id : e.identifiers())
      if (s.lets.count(id)) reads[name].push_back(id);
  enum class State { open, done };
  std::map<std::string, State> state;
  for (const auto& [root, e] : s.lets) {
    if (state.count(root)) continue;
    std::vector<std::pair<std::string, size_t>> path{{root, 0}};  // a let, its next read to follow
    state[root] = State::open;
    while (!path.empty()) {
      const std::string name = path.back().first;
      const std::vector<std::string>& next = reads[name];
      if (path.back().second == next.size()) {
        state[name] = State::done;
        path.pop_back();
        continue;
      }
      const std::string dep = next[path.back().second++];
      auto st = state.find(dep);
      if (st == state.end()) {
        state[dep] = State::open;
        path.emplace_back(dep, 0);
      } else if (st->second == State::open) {
        std::string cycle = dep;
        auto from = std::find_if(path.begin(), path.end(), [&](const auto& x) { return x.first == dep; });
        for (auto it = from + 1; it != path.end(); ++it) cycle += " -> " + it->first;
        r.fail("[lets]." + dep, "the lets form a cycle: " + cycle + " -> " + dep);
      }
    }
  }
}

// Dimensions, parameters and [lets] have names of their own: the lookup
// tries a parameter, then a dimension, then a built-in, then a let, so a
// name that shadows another would be silently ignored. Lets form no cycle.
void check_names(const KernelSpec& s, const TomlReader& r) {
  const auto& builtins = builtin_names();
  auto builtin = [&](const std::string& n) { return std::find(builtins.begin(), builtins.end(), n) != builtins.end(); };
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (std::count(s.dims.begin(), s.dims.begin() + static_cast<long>(i), s.dims[i]))
      r.fail("[problem].dims", s.dims[i] + " is listed twice");
    if (builtin(s.dims[i])) r.fail("[problem].dims", s.dims[i] + " is the name of a built-in");
  }
  for (const auto& [name, v] : s.dim_defaults)
    if (builtin(name)) r.fail("[problem].defaults", name + " is the name of a built-in");
  for (const ParamSpec& p : s.params) {
    if (is_dimension(s, p.name)) r.fail("[[param]] " + p.name, "a parameter cannot share its name with a dimension");
    if (builtin(p.name)) r.fail("[[param]] " + p.name, p.name + " is the name of a built-in");
  }
  for (const auto& [name, e] : s.lets) {
    const char* other = s.find_param(name)      ? "a parameter"
                        : is_dimension(s, name) ? "a dimension"
                        : builtin(name)         ? "a built-in"
                                                : nullptr;
    if (other) r.fail("[lets]." + name, std::string("shadows ") + other + " of the same name");
  }
  check_let_cycles(s, r);
}

// Every expression reads only names that exist; one evaluated per problem
// reads no parameter; one that reads no name at all is evaluated now, so a
// constant that cannot be evaluated, or that breaks its rule, fails the load.
void check_exprs(const KernelSpec& s, const TomlReader& r) {
  std::set<std::string> known(s.dims.begin(), s.dims.end());
  for (const auto& [name, v] : s.dim_defaults) known.insert(name);
  for (const auto& ps : s.params) known.insert(ps.name);
  for (const auto& [name, e] : s.lets) known.insert(name);
  for (const auto& b : builtin_names()) known.insert(b);
  const Scope constants(s, nullptr, nullptr, DeviceTraits{});
  for (const ExprSite& site : s.expr_sites()) {
    const Expr& e = *site.expr;
    for (const auto& id : e.identifiers())
      if (!known.count(id)) r.fail(site.where, "expression " + in_quotes(e.text()) + " uses unknown name '" + id + "'");
    const std::set<std::string> used = s.names_used(e);
    for (const auto& n : used)
      if (!site.needs_config && s.find_param(n))
        r.fail(site.where, "expression " + in_quotes(e.text()) + " reads parameter " + n +
                               ", but it is evaluated per problem, with no config");
    if (used.empty()) constants.eval(e, site.rule, site.where);
  }
}

using SourceReader = std::function<std::string(const std::string&)>;

std::string read_source(const TomlReader& r, const SourceReader& read, const std::string& file,
                        const std::string& where) {
  try {
    return read(file);
  } catch (const std::exception& e) {
    r.fail(where, e.what());
  }
}

toml::table parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw SpecError(origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                    std::string(e.description()));
  }
}

void read_kernel(const TomlReader& r, const toml::table& root, const SourceReader& read, KernelSpec& s) {
  const toml::table& k = *r.table(root, "kernel", true, "top level");
  r.only_keys(k, "[kernel]",
              {"name", "description", "source", "entry", "min_cc", "max_cc", "arch_specific", "options", "includes"});
  s.name = r.str(k, "name", "[kernel]", true);
  s.description = r.str(k, "description", "[kernel]", false);
  s.source_name = r.str(k, "source", "[kernel]", true);
  s.source_text = read_source(r, read, s.source_name, "[kernel].source");
  s.entry = r.str(k, "entry", "[kernel]", true);
  s.min_cc = r.compute_capability(k, "min_cc", 70, true);  // 0: any (replay-only specs)
  s.max_cc = r.compute_capability(k, "max_cc", 0, true);
  if (s.max_cc != 0 && s.max_cc < s.min_cc)
    r.fail("[kernel]", strfmt("max_cc %d is below min_cc %d", s.max_cc, s.min_cc));
  s.arch_specific = r.boolean(k, "arch_specific", "[kernel]", false);
  s.options = r.strings(k, "options", "[kernel]");
  s.include_dirs = r.strings(k, "includes", "[kernel]");
}

void read_problem(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  const toml::table& p = *r.table(root, "problem", true, "top level");
  r.only_keys(p, "[problem]",
              {"dims", "defaults", "dtypes", "constraints", "example", "flops", "bytes", "check_shapes"});
  s.dims = r.strings(p, "dims", "[problem]");
  if (s.dims.empty()) r.fail("[problem]", "'dims' must name at least one dimension");
  if (const toml::table* d = r.table(p, "defaults", false, "[problem]")) {
    for (const auto& [name, v] : *d) {
      if (!v.is_integer()) r.fail("[problem].defaults", std::string(name.str()) + " must be an integer");
      s.dim_defaults[std::string(name.str())] = *v.value<int64_t>();
    }
  }
  for (const auto& d : r.strings(p, "dtypes", "[problem]")) {
    try {
      s.dtypes.push_back(parse_dtype(d));
    } catch (const UsageError& e) {
      r.fail("[problem].dtypes", e.what());
    }
  }
  for (size_t i = 0; i < s.dtypes.size(); ++i)
    if (std::count(s.dtypes.begin(), s.dtypes.begin() + static_cast<long>(i), s.dtypes[i]))
      r.fail("[problem].dtypes", to_string(s.dtypes[i]) + " is listed twice");
  if (p.get("dtypes") && s.dtypes.empty()) r.fail("[problem]", "'dtypes' must name at least one dtype");
  if (s.dtypes.empty()) s.dtypes = {Dtype::fp16};
  s.problem_constraints = r.exprs(p, "constraints", "[problem]");
  s.example = r.str(p, "example", "[problem]", false);
  s.flops = r.expr(p, "flops", "[problem]", false);
  s.bytes = r.expr(p, "bytes", "[problem]", false);
  s.check_shapes = r.strings(p, "check_shapes", "[problem]");
  for (const auto& cs : s.check_shapes) {
    for (const auto& part : split(cs, ',')) {
      auto eq = part.find('=');
      std::string name = eq == std::string::npos ? "" : trim(part.substr(0, eq));
      bool known = std::find(s.dims.begin(), s.dims.end(), name) != s.dims.end() || s.dim_defaults.count(name);
      if (eq == std::string::npos || !known || !parse_int(trim(part.substr(eq + 1))))
        r.fail("[problem].check_shapes",
               "'" + cs + "' must be NAME=INTEGER pairs (decimal) over the kernel's dimensions");
    }
  }
}

void read_defines(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  if (const toml::table* d = r.table(root, "defines", false, "top level")) {
    for (const auto& [name, v] : *d)
      s.defines.emplace_back(std::string(name.str()), r.expr_of(v, "[defines]." + std::string(name.str())));
  }
}

void read_params(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  const toml::node* params = root.get("param");
  if (!params || !params->is_array_of_tables()) r.fail("top level", "missing [[param]] entries");
  for (const auto& node : *params->as_array()) {
    const toml::table& t = *node.as_table();
    ParamSpec ps;
    ps.name = r.str(t, "name", "[[param]]", true);
    std::string where = "[[param]] " + ps.name;
    r.only_keys(t, where, {"name", "values", "default", "help"});
    const toml::node* vals = t.get("values");
    if (!vals || !vals->is_array() || vals->as_array()->empty())
      r.fail(where, "'values' must be a non-empty array of integers");
    for (const auto& v : *vals->as_array()) {
      if (!v.is_integer()) r.fail(where, "'values' must hold only integers");
      ps.values.push_back(*v.value<int64_t>());
    }
    std::set<int64_t> uniq(ps.values.begin(), ps.values.end());
    if (uniq.size() != ps.values.size()) r.fail(where, "'values' lists a value twice");
    auto def = r.integer(t, "default", where);
    ps.default_value = def.value_or(ps.values.front());
    if (!uniq.count(ps.default_value))
      r.fail(where, "default " + std::to_string(ps.default_value) + " is not one of its values");
    ps.help = r.str(t, "help", where, false);
    if (s.find_param(ps.name)) r.fail(where, "parameter defined twice");
    s.params.push_back(ps);
  }
}

void read_lets_and_space(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  if (const toml::table* lets = r.table(root, "lets", false, "top level")) {
    for (const auto& [name, v] : *lets)
      s.lets[std::string(name.str())] = r.expr_of(v, "[lets]." + std::string(name.str()));
  }
  if (const toml::table* sp = r.table(root, "space", false, "top level")) {
    r.only_keys(*sp, "[space]", {"constraints", "starts"});
    s.constraints = r.exprs(*sp, "constraints", "[space]");
    for (const std::string& start : r.strings(*sp, "starts", "[space]")) {
      const std::string where = "[space] starts \"" + start + "\"";
      Config c;
      try {
        c = Config::parse(start);
      } catch (const std::exception& e) {
        r.fail(where, e.what());
      }
      for (const auto& [name, value] : c.values) {
        const ParamSpec* ps = s.find_param(name);
        if (!ps) r.fail(where, "no parameter " + name);
        if (std::find(ps->values.begin(), ps->values.end(), value) == ps->values.end())
          r.fail(where, name + "=" + std::to_string(value) + " is not one of the parameter's values");
      }
      for (const auto& ps : s.params) c.values.emplace(ps.name, ps.default_value);
      s.starts.push_back(std::move(c));
    }
  }
}

void read_tmap_arg(const TomlReader& r, const toml::table& t, const std::string& where, ArgSpec& a) {
  a.is_buffer = false;
  a.is_tmap = true;
  a.tmap.tensor = r.str(t, "tensor", where, true);
  a.tmap.dims = r.exprs(t, "dims", where);
  a.tmap.strides = r.exprs(t, "strides", where);
  a.tmap.box = r.exprs(t, "box", where);
  if (a.tmap.dims.empty() || a.tmap.dims.size() > 5) r.fail(where, "'dims' needs 1 to 5 expressions");
  if (a.tmap.strides.size() + 1 != a.tmap.dims.size())
    r.fail(where, "'strides' needs one expression per dimension after the first");
  if (a.tmap.box.size() != a.tmap.dims.size()) r.fail(where, "'box' needs one expression per dimension");
  a.tmap.swizzle = r.expr(t, "swizzle", where, false);
  a.tmap.l2_promotion = r.expr(t, "l2_promotion", where, false);
  a.tmap.enabled = r.expr(t, "enabled", where, false);
  std::string oob = r.str(t, "oob", where, false, "zero");
  if (oob != "zero" && oob != "nan") r.fail(where, "oob must be zero or nan");
  a.tmap.oob_nan = oob == "nan";
}

void read_buffer_arg(const TomlReader& r, const toml::table& t, const std::string& where, const std::string& type,
                     ArgSpec& a) {
  a.is_buffer = true;
  a.elem = parse_elem(type.substr(0, type.size() - 1), r, where);
  a.count = r.expr(t, "count", where, true);
  std::string role = r.str(t, "role", where, false, "in");
  if (role == "in")
    a.role = ArgRole::in;
  else if (role == "out")
    a.role = ArgRole::out;
  else if (role == "scratch")
    a.role = ArgRole::scratch;
  else
    r.fail(where, "role must be in, out or scratch");
  std::string init = r.str(t, "init", where, false, a.role == ArgRole::scratch ? "zero" : "normal");
  if (init == "normal")
    a.init = InitKind::normal;
  else if (init == "uniform")
    a.init = InitKind::uniform;
  else if (init == "zero")
    a.init = InitKind::zero;
  else if (init == "ones")
    a.init = InitKind::ones;
  else
    r.fail(where, "init must be normal, uniform, zero or ones");
  if (const toml::node* sc = t.get("scale")) {
    // A number, or an expression over the dims evaluated per problem.
    if (sc->is_number()) {
      const double v = sc->is_integer() ? static_cast<double>(*sc->value<int64_t>()) : *sc->value<double>();
      if (!std::isfinite(v) || v < 0) r.fail(where, "scale must be a number >= 0 or an expression of the dims");
    }
    a.init_scale = r.expr_of(*sc, where + ".scale");
  }
  if (const toml::node* off = t.get("offset")) {
    if (off->is_number()) {
      const double v = off->is_integer() ? static_cast<double>(*off->value<int64_t>()) : *off->value<double>();
      if (!std::isfinite(v)) r.fail(where, "offset must be a finite number or an expression of the dims");
    }
    a.init_offset = r.expr_of(*off, where + ".offset");
  }
}

void read_scalar_arg(const TomlReader& r, const toml::table& t, const std::string& where, const std::string& type,
                     ArgSpec& a) {
  a.is_buffer = false;
  if (type == "i32")
    a.scalar = ScalarType::i32;
  else if (type == "i64")
    a.scalar = ScalarType::i64;
  else if (type == "u32")
    a.scalar = ScalarType::u32;
  else if (type == "f32")
    a.scalar = ScalarType::f32;
  else
    r.fail(where, "unknown type '" + type +
                      "' (buffers: elem*, f16*, bf16*, f32*, i32*, u32*, u8*; scalars: i32, i64, u32, f32)");
  a.value = r.expr(t, "value", where, true);
}

void read_args(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  const toml::node* args = root.get("arg");
  if (!args || !args->is_array_of_tables())
    r.fail("top level", "missing [[arg]] entries (the kernel's parameters, in order)");
  for (const auto& node : *args->as_array()) {
    const toml::table& t = *node.as_table();
    ArgSpec a;
    a.name = r.str(t, "name", "[[arg]]", true);
    std::string where = "[[arg]] " + a.name;
    r.only_keys(t, where,
                {"name", "type", "count", "value", "role", "init", "scale", "offset", "tensor", "dims", "strides",
                 "box", "swizzle", "l2_promotion", "enabled", "oob"});
    std::string type = r.str(t, "type", where, true);
    if (type == "tmap")
      read_tmap_arg(r, t, where, a);
    else if (ends_with(type, "*"))
      read_buffer_arg(r, t, where, type, a);
    else
      read_scalar_arg(r, t, where, type, a);
    for (const auto& other : s.args)
      if (other.name == a.name) r.fail(where, "argument defined twice");
    s.args.push_back(a);
  }
  for (const auto& a : s.args) {
    if (!a.is_tmap) continue;
    bool ok = std::any_of(s.args.begin(), s.args.end(),
                          [&](const ArgSpec& b) { return b.is_buffer && b.name == a.tmap.tensor; });
    if (!ok) r.fail("[[arg]] " + a.name, "tensor '" + a.tmap.tensor + "' is not a buffer [[arg]]");
  }
  if (std::none_of(s.args.begin(), s.args.end(),
                   [](const ArgSpec& a) { return a.is_buffer && a.role == ArgRole::out; }))
    r.fail("[[arg]]", "no buffer has role = \"out\": nothing to verify");
}

void read_reference(const TomlReader& r, const toml::table& root, const SourceReader& read, KernelSpec& s) {
  const toml::table& ref = *r.table(root, "reference", true, "top level");
  r.only_keys(ref, "[reference]", {"source", "entry", "grid", "block", "smem", "args"});
  s.reference.source_name = r.str(ref, "source", "[reference]", true);
  s.reference.source_text = read_source(r, read, s.reference.source_name, "[reference].source");
  s.reference.entry = r.str(ref, "entry", "[reference]", true);
  s.reference.launch = r.launch(ref, "[reference]");
  s.reference.args = r.strings(ref, "args", "[reference]");
  for (const auto& n : s.reference.args) {
    bool known = std::any_of(s.args.begin(), s.args.end(), [&](const ArgSpec& a) { return a.name == n; });
    if (!known) r.fail("[reference].args", "'" + n + "' is not one of the kernel's [[arg]] names");
    for (const auto& a : s.args)
      if (a.name == n && a.is_tmap) r.fail("[reference].args", "the reference cannot take tensor map '" + n + "'");
  }
}

void read_tolerances(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  if (const toml::table* tol = r.table(root, "tolerance", false, "top level")) {
    auto read_tol = [&](const toml::table& t, const std::string& where, bool allow_sub) {
      ToleranceSpec ts;
      for (const auto& [key, v] : t) {
        std::string kname(key.str());
        if (v.is_table()) {
          if (!allow_sub) r.fail(where, "nested table '" + kname + "'");
          continue;
        }
        auto field = std::find_if(std::begin(kToleranceFields), std::end(kToleranceFields),
                                  [&](const ToleranceField& f) { return kname == f.name; });
        if (field == std::end(kToleranceFields))
          r.fail(where, "unknown key '" + kname + "' (max_abs, mean_abs, atol, rtol, max_bad_frac)");
        ts.*field->spec = r.expr_of(v, where + "." + kname);
      }
      return ts;
    };
    s.tolerance[""] = read_tol(*tol, "[tolerance]", true);
    for (const auto& [key, v] : *tol) {
      if (!v.is_table()) continue;
      std::string dt(key.str());
      try {
        parse_dtype(dt);
      } catch (const UsageError&) {
        r.fail("[tolerance]", "sub-table '" + dt + "' is not a dtype");
      }
      s.tolerance[to_string(parse_dtype(dt))] = read_tol(*v.as_table(), "[tolerance." + dt + "]", false);
    }
  }
}

void read_gates(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  if (const toml::table* g = r.table(root, "gates", false, "top level")) {
    r.only_keys(*g, "[gates]",
                {"max_registers", "max_smem", "max_spill_bytes", "max_stack", "allow_serialized_wgmma", "sanitize"});
    for (const GateField& f : kGateFields) s.gates.*f.expr = r.expr(*g, f.name, "[gates]", false);
    s.gates.allow_serialized_wgmma = r.boolean(*g, "allow_serialized_wgmma", "[gates]", true);
    if (g->contains("sanitize")) {
      s.gates.sanitize = r.strings(*g, "sanitize", "[gates]");
      for (const auto& tool : s.gates.sanitize)
        if (std::find(sanitizer_tools().begin(), sanitizer_tools().end(), tool) == sanitizer_tools().end())
          r.fail("[gates]", "sanitize: unknown tool '" + tool + "' (known: " + join(sanitizer_tools(), ", ") + ")");
    }
  }
}

void read_baselines(const TomlReader& r, const toml::table& root, KernelSpec& s) {
  const toml::node* list = root.get("baseline");
  if (!list) return;
  if (!list->is_array_of_tables()) r.fail("top level", "baseline must be an array of tables ([[baseline]])");
  for (const auto& node : *list->as_array()) {
    const toml::table& t = *node.as_table();
    BaselineSpec b;
    b.name = r.str(t, "name", "[[baseline]]", true);
    const std::string where = "[[baseline]] " + b.name;
    if (b.name.empty() || b.name == "reference" ||
        b.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
      r.fail(where, "a name is lower-case letters, digits, '_' and '-', and not 'reference' (the reference kernel's)");
    for (const BaselineSpec& o : s.baselines)
      if (o.name == b.name) r.fail(where, "defined twice");
    b.library = r.str(t, "library", where, true);
    const BaselineLibrary* lib = find_baseline_library(b.library);
    if (!lib) {
      std::vector<std::string> known;
      for (const BaselineLibrary& l : baseline_libraries()) known.push_back(l.name);
      r.fail(where, "unknown library '" + b.library + "' (known: " + join(known, ", ") + ")");
    }
    for (const auto& [key, v] : t) {
      const std::string k(key.str());
      if (k == "name" || k == "library") continue;
      auto in = [&](const std::vector<std::string>& keys) {
        return std::find(keys.begin(), keys.end(), k) != keys.end();
      };
      const bool is_buffer = in(lib->buffers), is_value = in(lib->values) || in(lib->optional_values);
      if (!is_buffer && !is_value && !in(lib->strings)) {
        std::vector<std::string> keys = lib->buffers;
        keys.insert(keys.end(), lib->strings.begin(), lib->strings.end());
        keys.insert(keys.end(), lib->values.begin(), lib->values.end());
        keys.insert(keys.end(), lib->optional_values.begin(), lib->optional_values.end());
        r.fail(where, "library " + lib->name + " takes no '" + k + "' (it takes " + join(keys, ", ") + ")");
      }
      if (is_value) {
        b.values[k] = r.expr_of(v, where + "." + k);
        continue;
      }
      b.strings[k] = r.str(t, key.str().data(), where, true);
      if (is_buffer && std::none_of(s.args.begin(), s.args.end(),
                                    [&](const ArgSpec& a) { return a.is_buffer && a.name == b.strings[k]; }))
        r.fail(where, k + " = '" + b.strings[k] + "' is not a buffer [[arg]]");
    }
    for (const auto* keys : {&lib->buffers, &lib->strings, &lib->values})
      for (const std::string& k : *keys)
        if (!b.strings.count(k) && !b.values.count(k)) r.fail(where, "missing key '" + k + "' (" + lib->help + ")");
    s.baselines.push_back(std::move(b));
  }
}

}  // namespace

KernelSpec parse_spec(const std::string& text, const std::string& origin,
                      const std::function<std::string(const std::string&)>& read) {
  TomlReader r(origin);
  const toml::table root = parse_toml(text, origin);
  r.only_keys(root, "top level",
              {"kernel", "problem", "defines", "param", "lets", "space", "launch", "arg", "reference", "tolerance",
               "gates", "baseline"});
  KernelSpec s;
  s.origin = origin;
  s.spec_text = text;
  read_kernel(r, root, read, s);
  read_problem(r, root, s);
  read_defines(r, root, s);
  read_params(r, root, s);
  read_lets_and_space(r, root, s);
  const toml::table& l = *r.table(root, "launch", true, "top level");
  r.only_keys(l, "[launch]", {"grid", "block", "smem", "cluster"});
  s.launch = r.launch(l, "[launch]");

  read_args(r, root, s);
  read_reference(r, root, read, s);
  read_tolerances(r, root, s);
  read_gates(r, root, s);
  read_baselines(r, root, s);
  check_names(s, r);
  check_exprs(s, r);
  return s;
}

namespace {

// The names a source includes, in order: "name" (quoted: true) or <name>.
std::vector<std::pair<std::string, bool>> included_names(const std::string& text) {
  std::vector<std::pair<std::string, bool>> names;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line[0] != '#') continue;
    line = trim(line.substr(1));
    if (!starts_with(line, "include")) continue;
    line = trim(line.substr(7));
    if (line.size() < 2 || (line[0] != '"' && line[0] != '<')) continue;
    const bool quoted = line[0] == '"';
    size_t close = line.find(quoted ? '"' : '>', 1);
    if (close != std::string::npos && close > 1) names.emplace_back(line.substr(1, close - 1), quoted);
  }
  return names;
}

// A user's kernel's own headers: every file that its source or reference
// includes, looked for as a compiler would (a quoted name in the including
// file's folder, then in the spec's folder and include folders; <name> in
// those folders only), read once here
// and handed to NVRTC as text, transitively. So NVRTC compiles exactly what
// was read, and the compile cache's key and the kernel's content hash cover
// it: an edited header makes another kernel, never a cached cubin of the
// old one. A name found nowhere is left to the built-in helpers (registry:
// evotune_ptx.cuh, ...) and NVRTC's include path; a file found here takes the
// place of a built-in helper of the same name.
void add_user_headers(KernelSpec& s, const std::filesystem::path& spec_dir) {
  namespace fs = std::filesystem;
  struct Includer {
    std::string text;
    fs::path dir;
  };
  std::vector<Includer> pending = {{s.source_text, (spec_dir / s.source_name).parent_path()},
                                   {s.reference.source_text, (spec_dir / s.reference.source_name).parent_path()}};
  std::set<std::string> found;
  while (!pending.empty()) {
    Includer inc = std::move(pending.back());
    pending.pop_back();
    for (const auto& [name, quoted] : included_names(inc.text)) {
      if (found.count(name)) continue;
      std::vector<fs::path> dirs;
      if (quoted) dirs.push_back(inc.dir);
      dirs.insert(dirs.end(), s.include_dirs.begin(), s.include_dirs.end());
      for (const fs::path& d : dirs) {
        const fs::path f = (d / name).lexically_normal();
        std::error_code ec;
        if (!fs::is_regular_file(f, ec)) continue;
        found.insert(name);
        s.headers.emplace_back(name, read_file(f.string()));
        pending.push_back({s.headers.back().second, f.parent_path()});
        break;
      }
    }
  }
}

}  // namespace

KernelSpec load_spec_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::exception& e) {
    throw UsageError(std::string("cannot read spec file: ") + e.what());
  }
  fs::path dir = fs::absolute(fs::path(path)).parent_path();
  KernelSpec s = parse_spec(text, path, [&](const std::string& rel) { return read_file((dir / rel).string()); });
  for (auto& inc : s.include_dirs) inc = (dir / inc).lexically_normal().string();
  s.include_dirs.insert(s.include_dirs.begin(), dir.string());
  try {
    add_user_headers(s, dir);
  } catch (const std::exception& e) {
    throw UsageError(std::string("cannot read a header of ") + path + ": " + e.what());
  }
  return s;
}

const std::vector<BaselineLibrary>& baseline_libraries() {
  static const std::vector<BaselineLibrary> libs = {
      {"cublaslt",
       {"a", "b", "c"},
       {},
       {"m", "n", "k", "top"},
       "C[m,n] = A[m,k]·B[k,n], row-major buffers a, b, c of the problem (trans_b = 1: b holds Bᵀ, n rows of k; "
       "trans_a = 1: a holds Aᵀ, k rows of m); "
       "cuBLASLt's heuristic's first algorithm, and the fastest of its first `top` as '<name>-top<top>'",
       {"trans_b", "trans_a"}},
      {"torch_sdpa",
       {},
       {"backend"},
       {"b", "h", "hkv", "s", "skv", "d", "causal"},
       "PyTorch's scaled_dot_product_attention on one backend (cudnn, flash, efficient, math), Q [b,h,s,d] and K, V "
       "[b,hkv,skv,d], causal aligned bottom-right; run by python3 with torch on the GPU host",
       {}},
  };
  return libs;
}

const BaselineLibrary* find_baseline_library(const std::string& name) {
  for (const BaselineLibrary& l : baseline_libraries())
    if (l.name == name) return &l;
  return nullptr;
}

const std::vector<std::string>& sanitizer_tools() {
  static const std::vector<std::string> tools = {"memcheck", "racecheck", "synccheck"};
  return tools;
}

}  // namespace evotune
