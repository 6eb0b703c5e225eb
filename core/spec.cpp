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

std::string to_string(ElemType t) {
  switch (t) {
    case ElemType::elem:
      return "elem";
    case ElemType::f16:
      return "f16";
    case ElemType::bf16:
      return "bf16";
    case ElemType::f32:
      return "f32";
    case ElemType::i32:
      return "i32";
    case ElemType::u32:
      return "u32";
    case ElemType::u8:
      return "u8";
  }
  return "?";
}
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

ElemType resolve_elem(ElemType t, Dtype run_dtype) {
  if (t != ElemType::elem) return t;
  switch (run_dtype) {
    case Dtype::fp16:
      return ElemType::f16;
    case Dtype::bf16:
      return ElemType::bf16;
    case Dtype::fp32:
      return ElemType::f32;
  }
  return ElemType::f32;
}

int elem_bytes(ElemType t, Dtype run_dtype) {
  switch (resolve_elem(t, run_dtype)) {
    case ElemType::f16:
    case ElemType::bf16:
      return 2;
    case ElemType::u8:
      return 1;
    default:
      return 4;
  }
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

Scope::Scope(const KernelSpec& spec, const Problem* problem, const Config* config, const DeviceTraits& dev)
    : spec_(spec), problem_(problem), config_(config), dev_(dev) {}

Value Scope::eval(const Expr& e) const {
  return e.eval([this](std::string_view n) { return lookup(n); });
}

std::optional<Value> Scope::lookup(std::string_view name) const {
  std::string n(name);
  if (config_) {
    auto it = config_->values.find(n);
    if (it != config_->values.end()) return Value(it->second);
  }
  if (problem_) {
    if (auto v = problem_->find(n)) return Value(*v);
    if (n == "dtype_bytes") return Value(static_cast<int64_t>(dtype_bytes(problem_->dtype)));
    if (n == "is_bf16") return Value(static_cast<int64_t>(problem_->dtype == Dtype::bf16));
  }
  if (n == "cc") return Value(static_cast<int64_t>(dev_.cc));
  if (n == "num_sms") return Value(static_cast<int64_t>(dev_.num_sms));
  auto memo = memo_.find(name);
  if (memo != memo_.end()) return memo->second;
  auto let = spec_.lets.find(n);
  if (let == spec_.lets.end()) return std::nullopt;
  if (std::find(evaluating_.begin(), evaluating_.end(), n) != evaluating_.end())
    throw ExprError("[lets] " + n + " refers to itself");
  evaluating_.push_back(n);
  Value v;
  try {
    v = eval(let->second);
  } catch (...) {
    evaluating_.pop_back();
    throw;
  }
  evaluating_.pop_back();
  memo_.emplace(n, v);
  return v;
}

// ------------------------------------------------------------ KernelSpec

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
  for (const auto& c : problem_constraints) {
    bool ok = false;
    try {
      ok = scope.eval(c).truthy();
    } catch (const ExprError& e) {
      throw UsageError("problem " + p.canonical() + ": " + e.what());
    }
    if (!ok) throw UsageError("kernel " + name + " does not accept " + p.canonical() + ": needs " + c.text());
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
  for (const auto& prob : problems) {
    Scope scope(*this, &prob, &c, dev);
    for (const auto& e : constraints) {
      try {
        if (!scope.eval(e).truthy())
          return "violates " + e.text() + (problems.size() > 1 ? " on " + prob.canonical() : "");
      } catch (const ExprError& err) {
        return std::string("constraint error: ") + err.what();
      }
    }
  }
  return std::nullopt;
}

namespace {

LaunchDims eval_launch(const LaunchSpec& l, const Scope& scope) {
  LaunchDims d;
  for (int i = 0; i < 3; ++i) {
    d.grid[i] = l.grid[i].empty() ? 1 : scope.eval(l.grid[i]).as_int();
    d.block[i] = l.block[i].empty() ? 1 : scope.eval(l.block[i]).as_int();
    d.cluster[i] = l.cluster[i].empty() ? 1 : scope.eval(l.cluster[i]).as_int();
  }
  d.smem = l.smem.empty() ? 0 : scope.eval(l.smem).as_int();
  return d;
}

}  // namespace

LaunchDims KernelSpec::launch_dims(const Config& c, const Problem& p, const DeviceTraits& dev) const {
  return eval_launch(launch, Scope(*this, &p, &c, dev));
}

LaunchDims KernelSpec::reference_launch_dims(const Problem& p, const DeviceTraits& dev) const {
  return eval_launch(reference.launch, Scope(*this, &p, nullptr, dev));
}

namespace {

const char* dtype_macro(Dtype d) {
  switch (d) {
    case Dtype::fp16:
      return "EVOTUNE_DTYPE_FP16";
    case Dtype::bf16:
      return "EVOTUNE_DTYPE_BF16";
    case Dtype::fp32:
      return "EVOTUNE_DTYPE_FP32";
  }
  return "EVOTUNE_DTYPE_FP32";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> KernelSpec::compile_defines(const Config& c, const Problem& p,
                                                                             const DeviceTraits& dev) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : c.values) out.emplace_back(k, std::to_string(v));
  Scope scope(*this, &p, &c, dev);
  for (const auto& [k, e] : defines) out.emplace_back(k, scope.eval(e).str());
  out.emplace_back(dtype_macro(p.dtype), "1");
  return out;
}

std::vector<std::pair<std::string, std::string>> KernelSpec::reference_defines(const Problem& p,
                                                                               const DeviceTraits& dev) const {
  std::vector<std::pair<std::string, std::string>> out;
  Scope scope(*this, &p, nullptr, dev);
  for (const auto& [k, e] : defines) {
    try {
      out.emplace_back(k, scope.eval(e).str());
    } catch (const ExprError&) {
      // a define that depends on a tunable: the reference does not use it
    }
  }
  out.emplace_back(dtype_macro(p.dtype), "1");
  return out;
}

Tolerances KernelSpec::tolerances(const Problem& p) const {
  Scope scope(*this, &p, nullptr, DeviceTraits{});
  Tolerances t;
  auto pick = [&](Expr ToleranceSpec::*field, double& out) {
    auto over = tolerance.find(to_string(p.dtype));
    if (over != tolerance.end() && !(over->second.*field).empty()) {
      out = scope.eval(over->second.*field).as_double();
      return;
    }
    auto base = tolerance.find("");
    if (base != tolerance.end() && !(base->second.*field).empty()) out = scope.eval(base->second.*field).as_double();
  };
  pick(&ToleranceSpec::max_abs, t.max_abs);
  pick(&ToleranceSpec::mean_abs, t.mean_abs);
  pick(&ToleranceSpec::atol, t.atol);
  pick(&ToleranceSpec::rtol, t.rtol);
  pick(&ToleranceSpec::max_bad_frac, t.max_bad_frac);
  return t;
}

std::optional<std::string> KernelSpec::gate_reason(const Resources& r, const Config& c, const Problem& p,
                                                   const DeviceTraits& dev) const {
  Scope scope(*this, &p, &c, dev);
  auto limit = [&](const Expr& e) -> std::optional<int64_t> {
    if (e.empty()) return std::nullopt;
    return scope.eval(e).as_int();
  };
  if (auto m = limit(gates.max_registers); m && r.registers > *m)
    return strfmt("%d registers > gate %lld", r.registers, static_cast<long long>(*m));
  if (auto m = limit(gates.max_smem); m && r.smem_total() > *m)
    return strfmt("%d bytes shared memory > gate %lld", r.smem_total(), static_cast<long long>(*m));
  if (auto m = limit(gates.max_spill_bytes); m && r.spill_bytes() > *m)
    return strfmt("%d bytes spilled > gate %lld", r.spill_bytes(), static_cast<long long>(*m));
  if (auto m = limit(gates.max_stack); m && r.stack_frame > *m)
    return strfmt("%d bytes stack frame > gate %lld", r.stack_frame, static_cast<long long>(*m));
  return std::nullopt;
}

double KernelSpec::flops_of(const Problem& p) const {
  if (flops.empty()) return 0;
  return Scope(*this, &p, nullptr, DeviceTraits{}).eval(flops).as_double();
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
      if (n.is_floating_point()) return Expr::constant(Value(*n.value<double>()));
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
      {"elem", ElemType::elem}, {"f16", ElemType::f16}, {"bf16", ElemType::bf16}, {"f32", ElemType::f32},
      {"i32", ElemType::i32},   {"u32", ElemType::u32}, {"u8", ElemType::u8}};
  auto it = names.find(s);
  if (it == names.end()) r.fail(where, "unknown buffer type '" + s + "*' (elem, f16, bf16, f32, i32, u32, u8)");
  return it->second;
}

}  // namespace

KernelSpec parse_spec(const std::string& text, const std::string& origin,
                      const std::function<std::string(const std::string&)>& read) {
  TomlReader r(origin);
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw SpecError(origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                    std::string(e.description()));
  }
  r.only_keys(
      root, "top level",
      {"kernel", "problem", "defines", "param", "lets", "space", "launch", "arg", "reference", "tolerance", "gates"});

  KernelSpec s;
  s.origin = origin;
  s.spec_text = text;

  auto read_or_fail = [&](const std::string& file, const std::string& where) {
    try {
      return read(file);
    } catch (const std::exception& e) {
      r.fail(where, e.what());
    }
  };

  const toml::table& k = *r.table(root, "kernel", true, "top level");
  r.only_keys(k, "[kernel]",
              {"name", "description", "source", "entry", "min_cc", "max_cc", "arch_specific", "options", "includes"});
  s.name = r.str(k, "name", "[kernel]", true);
  s.description = r.str(k, "description", "[kernel]", false);
  s.source_name = r.str(k, "source", "[kernel]", true);
  s.source_text = read_or_fail(s.source_name, "[kernel].source");
  s.entry = r.str(k, "entry", "[kernel]", true);
  s.min_cc = static_cast<int>(r.integer(k, "min_cc", "[kernel]").value_or(70));
  s.max_cc = static_cast<int>(r.integer(k, "max_cc", "[kernel]").value_or(0));
  s.arch_specific = r.boolean(k, "arch_specific", "[kernel]", false);
  s.options = r.strings(k, "options", "[kernel]");
  s.include_dirs = r.strings(k, "includes", "[kernel]");

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

  if (const toml::table* d = r.table(root, "defines", false, "top level")) {
    for (const auto& [name, v] : *d)
      s.defines.emplace_back(std::string(name.str()), r.expr_of(v, "[defines]." + std::string(name.str())));
  }

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
    if (std::find(s.dims.begin(), s.dims.end(), ps.name) != s.dims.end())
      r.fail(where, "a parameter cannot share its name with a dimension");
    s.params.push_back(ps);
  }

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

  const toml::table& l = *r.table(root, "launch", true, "top level");
  r.only_keys(l, "[launch]", {"grid", "block", "smem", "cluster"});
  s.launch = r.launch(l, "[launch]");

  const toml::node* args = root.get("arg");
  if (!args || !args->is_array_of_tables())
    r.fail("top level", "missing [[arg]] entries (the kernel's parameters, in order)");
  for (const auto& node : *args->as_array()) {
    const toml::table& t = *node.as_table();
    ArgSpec a;
    a.name = r.str(t, "name", "[[arg]]", true);
    std::string where = "[[arg]] " + a.name;
    r.only_keys(t, where,
                {"name", "type", "count", "value", "role", "init", "scale", "tensor", "dims", "strides", "box",
                 "swizzle", "l2_promotion", "enabled", "oob"});
    std::string type = r.str(t, "type", where, true);
    if (type == "tmap") {
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
    } else if (ends_with(type, "*")) {
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
        if (!sc->is_number()) r.fail(where, "scale must be a number");
        a.init_scale = sc->is_integer() ? static_cast<double>(*sc->value<int64_t>()) : *sc->value<double>();
      }
    } else {
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
    for (const auto& other : s.args)
      if (other.name == a.name) r.fail(where, "argument defined twice");
    s.args.push_back(a);
  }
  for (const auto& a : s.args) {
    if (!a.is_tmap) continue;
    bool ok = std::any_of(s.args.begin(), s.args.end(), [&](const ArgSpec& b) {
      return b.is_buffer && b.name == a.tmap.tensor && b.role != ArgRole::scratch;
    });
    if (!ok) r.fail("[[arg]] " + a.name, "tensor '" + a.tmap.tensor + "' is not an in or out buffer [[arg]]");
  }
  if (std::none_of(s.args.begin(), s.args.end(),
                   [](const ArgSpec& a) { return a.is_buffer && a.role == ArgRole::out; }))
    r.fail("[[arg]]", "no buffer has role = \"out\": nothing to verify");

  const toml::table& ref = *r.table(root, "reference", true, "top level");
  r.only_keys(ref, "[reference]", {"source", "entry", "grid", "block", "smem", "args"});
  s.reference.source_name = r.str(ref, "source", "[reference]", true);
  s.reference.source_text = read_or_fail(s.reference.source_name, "[reference].source");
  s.reference.entry = r.str(ref, "entry", "[reference]", true);
  s.reference.launch = r.launch(ref, "[reference]");
  s.reference.args = r.strings(ref, "args", "[reference]");
  for (const auto& n : s.reference.args) {
    bool known = std::any_of(s.args.begin(), s.args.end(), [&](const ArgSpec& a) { return a.name == n; });
    if (!known) r.fail("[reference].args", "'" + n + "' is not one of the kernel's [[arg]] names");
    for (const auto& a : s.args)
      if (a.name == n && a.is_tmap) r.fail("[reference].args", "the reference cannot take tensor map '" + n + "'");
  }

  if (const toml::table* tol = r.table(root, "tolerance", false, "top level")) {
    auto read_tol = [&](const toml::table& t, const std::string& where, bool allow_sub) {
      ToleranceSpec ts;
      for (const auto& [key, v] : t) {
        std::string kname(key.str());
        if (v.is_table()) {
          if (!allow_sub) r.fail(where, "nested table '" + kname + "'");
          continue;
        }
        Expr e = r.expr_of(v, where + "." + kname);
        if (kname == "max_abs")
          ts.max_abs = e;
        else if (kname == "mean_abs")
          ts.mean_abs = e;
        else if (kname == "atol")
          ts.atol = e;
        else if (kname == "rtol")
          ts.rtol = e;
        else if (kname == "max_bad_frac")
          ts.max_bad_frac = e;
        else
          r.fail(where, "unknown key '" + kname + "' (max_abs, mean_abs, atol, rtol, max_bad_frac)");
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

  if (const toml::table* g = r.table(root, "gates", false, "top level")) {
    r.only_keys(*g, "[gates]", {"max_registers", "max_smem", "max_spill_bytes", "max_stack"});
    s.gates.max_registers = r.expr(*g, "max_registers", "[gates]", false);
    s.gates.max_smem = r.expr(*g, "max_smem", "[gates]", false);
    s.gates.max_spill_bytes = r.expr(*g, "max_spill_bytes", "[gates]", false);
    s.gates.max_stack = r.expr(*g, "max_stack", "[gates]", false);
  }

  // Every name an expression uses must exist somewhere; catch typos now
  // rather than on the GPU.
  std::set<std::string> known(s.dims.begin(), s.dims.end());
  for (const auto& [kname, v] : s.dim_defaults) known.insert(kname);
  for (const auto& ps : s.params) known.insert(ps.name);
  for (const auto& [kname, e] : s.lets) known.insert(kname);
  for (const char* b : {"dtype_bytes", "is_bf16", "cc", "num_sms"}) known.insert(b);
  auto check = [&](const Expr& e, const std::string& where) {
    for (const auto& id : e.identifiers())
      if (!known.count(id)) r.fail(where, "expression \"" + e.text() + "\" uses unknown name '" + id + "'");
  };
  for (const auto& e : s.constraints) check(e, "[space].constraints");
  for (const auto& e : s.problem_constraints) check(e, "[problem].constraints");
  for (const auto& [kname, e] : s.lets) check(e, "[lets]." + kname);
  for (const auto& [kname, e] : s.defines) check(e, "[defines]." + kname);
  for (const auto& a : s.args) {
    if (!a.is_tmap) {
      check(a.is_buffer ? a.count : a.value, "[[arg]] " + a.name);
      continue;
    }
    for (const auto* list : {&a.tmap.dims, &a.tmap.strides, &a.tmap.box})
      for (const auto& e : *list) check(e, "[[arg]] " + a.name);
    for (const Expr* e : {&a.tmap.swizzle, &a.tmap.l2_promotion, &a.tmap.enabled})
      if (!e->empty()) check(*e, "[[arg]] " + a.name);
  }
  for (const LaunchSpec* ls : {&s.launch, &s.reference.launch}) {
    for (int i = 0; i < 3; ++i) {
      if (!ls->grid[i].empty()) check(ls->grid[i], "launch grid");
      if (!ls->block[i].empty()) check(ls->block[i], "launch block");
      if (!ls->cluster[i].empty()) check(ls->cluster[i], "launch cluster");
    }
    if (!ls->smem.empty()) check(ls->smem, "launch smem");
  }
  if (!s.flops.empty()) check(s.flops, "[problem].flops");

  return s;
}

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
  return s;
}

}  // namespace evotune
