#include "store/export.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

namespace {

// ------------------------------------------------------------ small helpers

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

bool is_cpp_keyword(const std::string& s) {
  static const std::set<std::string> kw = {
      "alignas",  "alignof", "and",      "asm",       "auto",     "bool",      "break",     "case",     "catch",
      "char",     "class",   "const",    "constexpr", "continue", "default",   "delete",    "do",       "double",
      "else",     "enum",    "explicit", "export",    "extern",   "false",     "float",     "for",      "friend",
      "goto",     "if",      "inline",   "int",       "long",     "mutable",   "namespace", "new",      "noexcept",
      "not",      "nullptr", "operator", "or",        "private",  "protected", "public",    "register", "return",
      "short",    "signed",  "sizeof",   "static",    "struct",   "switch",    "template",  "this",     "throw",
      "true",     "try",     "typedef",  "typename",  "union",    "unsigned",  "using",     "virtual",  "void",
      "volatile", "while",   "xor"};
  return kw.count(s) != 0;
}

// A C++ identifier made from a kernel name: "sdpa-fwd" → "sdpa_fwd".
std::string sanitize(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "kernel_" + s;
  if (is_cpp_keyword(s)) s += '_';
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// One line of a // comment: no line breaks from user-provided text.
std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}

std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// A double as a C++ literal that reads back as the same value.
std::string cpp_double(double v) {
  if (!std::isfinite(v)) return "0.0";
  std::string s;
  for (int prec = 6; prec <= 17; ++prec) {  // the shortest text that reads back exactly
    s = strfmt("%.*g", prec, v);
    if (std::strtod(s.c_str(), nullptr) == v) break;
  }
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string fmt_us(double v) {
  return std::isfinite(v) ? strfmt("%.3f us", v) : std::string("n/a");
}
std::string fmt_err(double v) {
  return std::isfinite(v) ? strfmt("%.3g", v) : std::string("NaN");
}

// 13000 → "13.0"; CUDA encodes versions as 1000*major + 10*minor.
std::string cuda_version(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cc_string(int cc) {
  return cc > 0 ? std::to_string(cc / 10) + "." + std::to_string(cc % 10) : "unknown";
}

std::string int_type(int64_t lo, int64_t hi) {
  return lo >= -2147483648LL && hi <= 2147483647LL ? "int" : "long long";
}

const Measurement* measurement_on(const Trial& t, int problem) {
  for (const auto& m : t.per_problem)
    if (m.problem == problem) return &m;
  return nullptr;
}

bool usable_p50(const Measurement* m) {
  return m && std::isfinite(m->p50_us) && m->p50_us > 0;
}

// ------------------------------------------------------------ translation

// Expr::to_cpp, tokenised: prints integers with an LL suffix and doubles bare,
// so a double that happens to be integral ("2") is given its ".0" back here,
// or C++ would divide it as an integer where evotune divides as a double.
struct Translated {
  std::string code;
  std::vector<std::string> names;  // identifiers, functions excluded
  bool has_double = false;         // a double literal or float()
  std::string unsupported;         // a function without a constexpr version
  bool uses_pow = false;
};

Translated translate(const Expr& e) {
  Translated t;
  const std::string src = e.to_cpp();
  size_t i = 0;
  auto ident_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while (i < src.size()) {
    char c = src[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && ident_char(src[j])) ++j;
      std::string id = src.substr(i, j - i);
      size_t k = j;
      while (k < src.size() && src[k] == ' ') ++k;
      bool call = k < src.size() && src[k] == '(' && starts_with(id, "evotune_");
      if (call) {
        std::string fn = id.substr(8);
        if (fn == "sqrt" || fn == "log2") t.unsupported = fn + "()";
        if (fn == "float") t.has_double = true;
        if (fn == "pow") t.uses_pow = true;
      } else {
        t.names.push_back(id);
      }
      t.code += id;
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < src.size() && std::isdigit(static_cast<unsigned char>(src[i + 1])))) {
      size_t j = i;
      bool hex = src.compare(i, 2, "0x") == 0 || src.compare(i, 2, "0X") == 0;
      if (hex) {
        j += 2;
        while (j < src.size() && std::isxdigit(static_cast<unsigned char>(src[j]))) ++j;
      } else {
        while (j < src.size() && (std::isdigit(static_cast<unsigned char>(src[j])) || src[j] == '.')) ++j;
        if (j < src.size() && (src[j] == 'e' || src[j] == 'E')) {
          ++j;
          if (j < src.size() && (src[j] == '+' || src[j] == '-')) ++j;
          while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
        }
      }
      std::string body = src.substr(i, j - i);
      size_t k = j;
      while (k < src.size() && ident_char(src[k])) ++k;
      std::string suffix = src.substr(j, k - j);
      if (suffix != "LL") {
        t.has_double = true;
        if (!hex && body.find_first_of(".eE") == std::string::npos) body += ".0";
      }
      t.code += body + suffix;
      i = k;
    } else {
      t.code += c;
      ++i;
    }
  }
  return t;
}

std::string device_traits_note(const DeviceTraits& d) {
  return "cc " + std::to_string(d.cc) + ", num_sms " + std::to_string(d.num_sms);
}

// Everything both writers compute from the input.
struct Facts {
  const RunInfo& run;
  const KernelSpec& spec;
  const Trial& winner;
  DeviceTraits dev;
  std::vector<std::string> dim_names;                // spec dims, then optional dims with defaults
  std::vector<const Trial*> best_on;                 // per problem: ok trial with the lowest p50 there
  std::map<std::string, std::string> define_values;  // [defines] on problem 0
  std::vector<std::pair<std::string, std::string>> define_errors;
};

Facts gather(const ExportInput& in) {
  if (!in.run || !in.spec) throw UsageError("export needs a run and its kernel spec");
  if (!in.winner) throw UsageError("run " + std::to_string(in.run->id) + " has no ok trial to export");
  if (!in.winner->ok())
    throw UsageError("trial " + std::to_string(in.winner->id) + " is " + to_string(in.winner->status) +
                     ", not ok: only a correct config can be exported");
  if (in.run->problems.empty()) throw UsageError("run " + std::to_string(in.run->id) + " has no problems");
  Facts f{*in.run, *in.spec, *in.winner, {}, {}, {}, {}, {}};
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
    } catch (const std::exception& ex) {
      f.define_errors.emplace_back(name, ex.what());
    }
  }
  return f;
}

std::string dtype_macro(Dtype d) {
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

std::optional<double> speedup_on(const ExportInput& in, const Trial& t, int problem) {
  if (!in.default_trial) return std::nullopt;
  const Measurement* d = measurement_on(*in.default_trial, problem);
  const Measurement* w = measurement_on(t, problem);
  if (!usable_p50(d) || !usable_p50(w)) return std::nullopt;
  return d->p50_us / w->p50_us;
}

// ------------------------------------------------------------ helpers in C++

// Generates constexpr functions of the problem dims from spec expressions,
// with the [lets] they use as locals and a static_assert per problem that the
// function agrees with the tuner's own evaluation.
class HelperWriter {
 public:
  HelperWriter(const Facts& f, std::set<std::string> macros) : f_(f), macros_(std::move(macros)) {
    for (const auto& p : f.spec.params) params_.insert(p.name);
  }

  // `scale` multiplies the result (bytes of a buffer from its element count).
  void function(const std::string& name, const Expr& e, const std::string& what, int64_t scale = 1) {
    Plan plan;
    std::string why = plan_expr(e, plan);
    std::string header = "// " + what + (e.text().empty() ? "" : ": " + one_line(e.text()));
    if (why.empty()) why = check_names(plan);
    if (!why.empty()) {
      out_ << header << "\n// " << name << "() not generated: " << why << "\n";
      return;
    }
    std::vector<std::string> params;
    for (const auto& d : f_.dim_names)
      params.push_back(plan.dims.count(d) ? "long long " + d : "long long /*" + d + "*/");
    if (plan.cc) params.push_back("long long cc");
    if (plan.num_sms) params.push_back("long long num_sms");
    out_ << header << "\nEVOTUNE_TUNED_HD constexpr long long " << name << "(" << join(params, ", ") << ") {\n";
    if (plan.dtype_bytes) out_ << "  const long long dtype_bytes = " << dtype_bytes(f_.run.problems[0].dtype) << ";\n";
    if (plan.is_bf16)
      out_ << "  const long long is_bf16 = " << (f_.run.problems[0].dtype == Dtype::bf16 ? 1 : 0) << ";\n";
    for (const auto& let : plan.lets)
      out_ << "  const auto " << let << " = " << translate(f_.spec.lets.at(let)).code << ";\n";
    std::string body = translate(e).code;
    out_ << "  return static_cast<long long>(" << body << ")"
         << (scale != 1 ? " * " + std::to_string(scale) + "LL" : "") << ";\n}\n";
    // Self-check on every problem of the run, with the tuner's own evaluator.
    for (size_t p = 0; p < f_.run.problems.size(); ++p) {
      const Problem& prob = f_.run.problems[p];
      std::vector<std::string> args;
      bool ok = true;
      for (const auto& d : f_.dim_names) {
        auto v = prob.find(d);
        if (!v)
          ok = false;
        else
          args.push_back(std::to_string(*v) + "LL");
      }
      if (plan.cc) args.push_back(std::to_string(f_.dev.cc) + "LL");
      if (plan.num_sms) args.push_back(std::to_string(f_.dev.num_sms) + "LL");
      if (!ok) continue;
      try {
        Value v = Scope(f_.spec, &prob, &f_.winner.config, f_.dev).eval(e);
        if (!v.is_int()) continue;  // a double result is truncated; nothing exact to compare
        int64_t expect = 0;
        if (__builtin_mul_overflow(v.as_int(), scale, &expect)) continue;
        asserts_ << "static_assert(" << name << "(" << join(args, ", ") << ") == " << expect
                 << "LL, \"evotune: " << name << "() disagrees with the tuner on problem " << p << "\");\n";
      } catch (const std::exception&) {
        // The expression fails on this problem (the tuner would reject it too).
      }
    }
  }

  void raw(const std::string& s) { out_ << s; }
  std::string text() const { return out_.str(); }
  std::string asserts() const { return asserts_.str(); }

 private:
  struct Plan {
    std::set<std::string> dims;
    std::vector<std::string> lets;  // in dependency order
    bool cc = false, num_sms = false, dtype_bytes = false, is_bf16 = false;
    bool has_double = false, uses_pow = false;
  };

  // Resolves names in the order Scope does: params, dims, built-ins, [lets].
  std::string plan_expr(const Expr& e, Plan& plan) {
    std::vector<std::string> stack;
    std::string why = visit(e, plan, stack);
    if (why.empty() && plan.uses_pow && plan.has_double) why = "pow() of doubles has no constexpr version here";
    return why;
  }

  std::string visit(const Expr& e, Plan& plan, std::vector<std::string>& stack) {
    Translated t = translate(e);
    if (!t.unsupported.empty()) return "uses " + t.unsupported + ", which has no constexpr version";
    plan.has_double = plan.has_double || t.has_double;
    plan.uses_pow = plan.uses_pow || t.uses_pow;
    for (const auto& n : t.names) {
      if (params_.count(n)) continue;
      if (std::find(f_.dim_names.begin(), f_.dim_names.end(), n) != f_.dim_names.end()) {
        plan.dims.insert(n);
      } else if (n == "dtype_bytes") {
        plan.dtype_bytes = true;
      } else if (n == "is_bf16") {
        plan.is_bf16 = true;
      } else if (n == "cc") {
        plan.cc = true;
      } else if (n == "num_sms") {
        plan.num_sms = true;
      } else if (f_.spec.lets.count(n)) {
        if (std::find(plan.lets.begin(), plan.lets.end(), n) != plan.lets.end()) continue;
        if (std::find(stack.begin(), stack.end(), n) != stack.end()) return "[lets] " + n + " refers to itself";
        stack.push_back(n);
        std::string why = visit(f_.spec.lets.at(n), plan, stack);
        stack.pop_back();
        if (!why.empty()) return why + " (via [lets] " + n + ")";
        plan.lets.push_back(n);
      } else {
        return "unknown name '" + n + "'";
      }
    }
    return {};
  }

  // A local or parameter named like one of the header's macros would be
  // rewritten by the preprocessor.
  std::string check_names(const Plan& plan) const {
    std::vector<std::string> names(plan.dims.begin(), plan.dims.end());
    names.insert(names.end(), plan.lets.begin(), plan.lets.end());
    for (const auto& n : names) {
      if (macros_.count(n)) return "'" + n + "' is also the name of a macro this header defines";
      if (!is_identifier(n) || is_cpp_keyword(n)) return "'" + n + "' is not usable as a C++ name";
    }
    return {};
  }

  const Facts& f_;
  std::set<std::string> macros_;
  std::set<std::string> params_;
  std::ostringstream out_;
  std::ostringstream asserts_;
};

const char* const kHelpers = R"cpp(#ifndef EVOTUNE_TUNED_HELPERS_
#define EVOTUNE_TUNED_HELPERS_
#if defined(__CUDACC__)
#define EVOTUNE_TUNED_HD __host__ __device__
#else
#define EVOTUNE_TUNED_HD
#endif
                                   namespace evotune_tuned {
                                   // evotune's expression functions with its semantics: C integer division,
                                   // cdiv rounding up for non-negative numerators, min/max keeping the first of
                                   // equals. The launch helpers below call them.
                                   template <class A, class B>
                                   EVOTUNE_TUNED_HD constexpr auto evotune_cdiv(A a, B b) -> decltype(a / b) {
                                     return a >= 0 ? (a + b - 1) / b : a / b;
                                   }
                                   template <class A, class B>
                                   EVOTUNE_TUNED_HD constexpr auto evotune_align_up(A a, B b) -> decltype(a / b) {
                                     return evotune_cdiv(a, b) * b;
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr A evotune_min(A a) {
                                     return a;
                                   }
                                   template <class A, class B, class... R>
                                   EVOTUNE_TUNED_HD constexpr auto evotune_min(A a, B b, R... r) {
                                     return evotune_min(b < a ? b : a, r...);
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr A evotune_max(A a) {
                                     return a;
                                   }
                                   template <class A, class B, class... R>
                                   EVOTUNE_TUNED_HD constexpr auto evotune_max(A a, B b, R... r) {
                                     return evotune_max(b > a ? b : a, r...);
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr A evotune_abs(A a) {
                                     return a < 0 ? -a : a;
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr long long evotune_ilog2(A x) {
                                     long long r = -1;
                                     for (long long v = x; v > 0; v /= 2) ++r;
                                     return r;
                                   }
                                   // Integer powers only (non-negative exponent), as launch geometry uses them.
                                   template <class A, class B>
                                   EVOTUNE_TUNED_HD constexpr long long evotune_pow(A b, B e) {
                                     long long r = 1;
                                     for (B i = 0; i < e; ++i) r *= b;
                                     return r;
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr long long evotune_is_pow2(A x) {
                                     return x > 0 && (x & (x - 1)) == 0 ? 1 : 0;
                                   }
                                   EVOTUNE_TUNED_HD constexpr long long evotune_floor(double x) {
                                     return static_cast<double>(static_cast<long long>(x)) > x ? static_cast<long long>(x) - 1 : static_cast<long long>(x);
                                   }
                                   EVOTUNE_TUNED_HD constexpr long long evotune_ceil(double x) {
                                     return static_cast<double>(static_cast<long long>(x)) < x ? static_cast<long long>(x) + 1 : static_cast<long long>(x);
                                   }
                                   EVOTUNE_TUNED_HD constexpr long long evotune_round(double x) {
                                     return x >= 0 ? evotune_floor(x + 0.5) : -evotune_floor(0.5 - x);
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr double evotune_float(A x) {
                                     return static_cast<double>(x);
                                   }
                                   template <class A>
                                   EVOTUNE_TUNED_HD constexpr long long evotune_int(A x) {
                                     return static_cast<long long>(static_cast<double>(x));
                                   }
                                   }       // namespace evotune_tuned
#endif  // EVOTUNE_TUNED_HELPERS_
)cpp";

}  // namespace

// ------------------------------------------------------------ header

std::string export_header(const ExportInput& in) {
  Facts f = gather(in);
  const RunInfo& run = f.run;
  const KernelSpec& spec = f.spec;
  const Trial& w = f.winner;
  const std::string ns = sanitize(spec.name.empty() ? run.kernel : spec.name);
  const std::string guard = "EVOTUNE_TUNED_" + upper(ns) + "_H_";
  const Dtype dtype = run.problems[0].dtype;
  std::ostringstream o;

  // Provenance.
  o << "// " << one_line(spec.name) << ": the configuration evotune found fastest (run " << run.id << ").\n";
  o << "// Generated by evotune" << (run.evotune_version.empty() ? "" : " " + one_line(run.evotune_version)) << " on "
    << utc_now_iso() << "; re-create it with `evotune export " << run.id << "`.\n//\n";
  if (!spec.description.empty()) o << "// Kernel:    " << one_line(spec.description) << "\n";
  o << "// Spec:      " << one_line(run.spec_origin.empty() ? spec.origin : run.spec_origin) << " (hash "
    << (run.spec_hash.empty() ? spec.content_hash() : run.spec_hash) << "), entry " << spec.entry << "\n";
  o << "// Run:       " << run.id << ", strategy " << run.strategy << ", seed " << run.seed << ", budget " << run.budget
    << ", elites " << run.elites_k << ", status " << run.status << "\n";
  o << "// Tuned:     " << run.created_at << (run.finished_at.empty() ? "" : " to " + run.finished_at) << "\n";
  o << "// GPU:       " << one_line(run.device.name.empty() ? "unknown" : run.device.name) << ", cc "
    << cc_string(run.device.cc) << (run.device.arch.empty() ? "" : " (" + run.device.arch + ")") << ", "
    << run.device.num_sms << " SMs" << (run.device.uuid.empty() ? "" : ", " + one_line(run.device.uuid)) << "\n";
  o << "// CUDA:      driver " << (run.device.driver_string.empty() ? "" : one_line(run.device.driver_string) + " ")
    << "(API " << cuda_version(run.device.driver_version) << "), runtime " << cuda_version(run.device.runtime_version)
    << ", NVRTC " << (run.device.nvrtc_version.empty() ? "unknown" : one_line(run.device.nvrtc_version)) << "\n";
  o << "// Trials:    " << run.stats.trials << " evaluated, " << in.ok_trials.size() << " correct\n";
  o << "// Winner:    trial " << w.id << " (#" << w.seq << "): " << w.config.canonical() << "\n";
  o << "//            fitness " << fmt_us(w.fitness) << " (geomean of p50 over " << run.problems.size()
    << (run.problems.size() == 1 ? " problem" : " problems") << ")";
  if (in.default_trial && in.default_trial->ok() && in.default_trial->fitness > 0 && w.fitness > 0)
    o << ", " << strfmt("%.2fx", in.default_trial->fitness / w.fitness) << " over the default config ("
      << fmt_us(in.default_trial->fitness) << ")";
  o << "\n";
  o << "// Checked:   verified on the check shapes, after the timed launches too; "
    << (w.sanitized.empty() ? std::string("no compute-sanitizer run")
                            : "compute-sanitizer " + one_line(w.sanitized) + " found nothing")
    << "\n";
  o << "// Resources: " << w.res.registers << " registers, shared memory " << w.res.smem_static << " B static + "
    << w.res.smem_dynamic << " B dynamic, spills " << w.res.spill_bytes() << " B, stack " << w.res.stack_frame
    << " B\n//\n";
  for (size_t p = 0; p < run.problems.size(); ++p) {
    const Problem& prob = run.problems[p];
    o << "// Problem " << p << ": " << prob.canonical() << " " << to_string(prob.dtype) << "\n";
    const Measurement* m = measurement_on(w, static_cast<int>(p));
    if (m) {
      o << "//   p50 " << fmt_us(m->p50_us) << " (p90 " << fmt_us(m->p90_us) << ", min " << fmt_us(m->min_us)
        << "), max abs err " << fmt_err(m->err.max_abs) << ", mean abs err " << fmt_err(m->err.mean_abs);
      if (auto s = speedup_on(in, w, static_cast<int>(p)))
        o << ", " << strfmt("%.2fx", *s) << " over the default ("
          << fmt_us(measurement_on(*in.default_trial, static_cast<int>(p))->p50_us) << ")";
      o << "\n";
    } else {
      o << "//   not measured\n";
    }
    try {
      LaunchDims d = spec.launch_dims(w.config, prob, f.dev);
      o << "//   launch: grid (" << d.grid[0] << ", " << d.grid[1] << ", " << d.grid[2] << "), block (" << d.block[0]
        << ", " << d.block[1] << ", " << d.block[2] << "), " << d.smem << " B dynamic shared memory";
      if (spec.launch.has_cluster())
        o << ", cluster (" << d.cluster[0] << ", " << d.cluster[1] << ", " << d.cluster[2] << ")";
      o << "\n";
    } catch (const std::exception& e) {
      o << "//   launch: not evaluated (" << one_line(e.what()) << ")\n";
    }
  }
  o << "\n#ifndef " << guard << "\n#define " << guard << "\n\n";

  // Macros, as the kernel template reads them when evotune compiles it.
  std::set<std::string> macros;
  o << "// The winning parameters: the macros the kernel reads (evotune passed -DNAME=VALUE).\n";
  for (const auto& p : spec.params) {
    auto it = w.config.values.find(p.name);
    if (it == w.config.values.end()) {
      o << "// " << p.name << ": not in the winning config\n";
      continue;
    }
    if (!is_identifier(p.name)) {
      o << "// " << p.name << " = " << it->second << ": not a valid macro name\n";
      continue;
    }
    o << "#define " << p.name << " " << it->second << (p.help.empty() ? "" : "  // " + one_line(p.help)) << "\n";
    macros.insert(p.name);
  }
  o << "// The run's element type.\n#define " << dtype_macro(dtype) << " 1\n";
  macros.insert(dtype_macro(dtype));
  if (!spec.defines.empty()) {
    o << "// [defines] of the spec, evaluated for problem 0 (" << run.problems[0].canonical() << ").\n";
    for (const auto& [name, e] : spec.defines) {
      auto v = f.define_values.find(name);
      if (v == f.define_values.end() || !is_identifier(name)) {
        o << "// " << name << " = " << one_line(e.text()) << ": not evaluated\n";
        continue;
      }
      o << "#define " << name << " " << v->second << "\n";
      macros.insert(name);
      // A macro holds one value: say where the other problems differ.
      for (size_t p = 1; p < run.problems.size(); ++p) {
        try {
          std::string other = Scope(spec, &run.problems[p], &w.config, f.dev).eval(e).str();
          if (other != v->second) o << "//   (problem " << p << " needs " << name << " " << other << ")\n";
        } catch (const std::exception&) {
        }
      }
    }
  }
  o << "\n" << kHelpers << "\n";

  o << "namespace evotune_tuned {\nnamespace " << ns << " {\n\n";
  o << "constexpr const char* kKernel = " << cpp_string(spec.name) << ";\n";
  o << "constexpr const char* kEntry = " << cpp_string(spec.entry) << ";\n";
  o << "constexpr const char* kDtype = " << cpp_string(to_string(dtype)) << ";\n";
  o << "constexpr const char* kArch = " << cpp_string(run.device.arch) << ";\n";
  o << "constexpr long long kRunId = " << run.id << ";\n";
  o << "constexpr long long kTrialId = " << w.id << ";\n";
  o << "constexpr const char* kConfig = " << cpp_string(w.config.canonical()) << ";\n";
  o << "constexpr double kFitnessUs = " << cpp_double(w.fitness) << ";  // geomean of p50 over the run's problems\n\n";
  o << "// The winning parameters as values (k-prefixed: the macros keep the bare names).\n";
  std::map<std::string, std::string> param_type;
  for (const auto& p : spec.params) {
    auto it = w.config.values.find(p.name);
    if (it == w.config.values.end() || !is_identifier(p.name)) continue;
    int64_t lo = it->second, hi = it->second;
    for (int64_t v : p.values) lo = std::min(lo, v), hi = std::max(hi, v);
    param_type[p.name] = int_type(lo, hi);
    o << "constexpr " << param_type[p.name] << " k" << p.name << " = " << it->second << ";\n";
  }
  for (const auto& [name, e] : spec.defines) {
    auto v = f.define_values.find(name);
    if (v == f.define_values.end() || !is_identifier(name)) continue;
    bool is_int = v->second.find_first_of(".eEn") == std::string::npos;
    o << "constexpr " << (is_int ? "long long" : "double") << " k" << name << " = "
      << (is_int ? v->second : cpp_double(std::stod(v->second))) << ";  // [defines], problem 0\n";
  }

  // Launch geometry and buffer sizes as functions of the problem dims.
  HelperWriter hw(f, macros);
  hw.raw(
      "\n// Launch geometry for the winning parameters, as functions of the problem's\n"
      "// dimensions (" +
      join(f.dim_names, ", ") + "), translated from the spec's [launch].\n");
  static const char* axes[] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    const Expr& e = spec.launch.grid[i];
    hw.function(std::string("grid_") + axes[i], e.empty() ? Expr::constant(Value(int64_t{1})) : e,
                std::string("gridDim.") + axes[i]);
  }
  for (int i = 0; i < 3; ++i) {
    const Expr& e = spec.launch.block[i];
    hw.function(std::string("block_") + axes[i], e.empty() ? Expr::constant(Value(int64_t{1})) : e,
                std::string("blockDim.") + axes[i]);
  }
  hw.function("dynamic_smem_bytes", spec.launch.smem.empty() ? Expr::constant(Value(int64_t{0})) : spec.launch.smem,
              "dynamic shared memory, bytes");
  if (spec.launch.has_cluster()) {
    for (int i = 0; i < 3; ++i) {
      const Expr& e = spec.launch.cluster[i];
      hw.function(std::string("cluster_") + axes[i], e.empty() ? Expr::constant(Value(int64_t{1})) : e,
                  std::string("cluster dim ") + axes[i]);
    }
  }
  bool any_buffer = false;
  for (const auto& a : spec.args) {
    if (!a.is_buffer || a.role == ArgRole::in) continue;
    if (!any_buffer) hw.raw("\n// Output and scratch buffers the kernel needs: element counts and bytes.\n");
    any_buffer = true;
    std::string base = sanitize(a.name);
    int eb = elem_bytes(a.elem, dtype);
    std::string what =
        to_string(a.role) + " buffer " + a.name + " (" + to_string(resolve_elem(a.elem, dtype)) +
        (a.role == ArgRole::scratch ? ", zero-filled once before first use; the kernel leaves it zeroed" : "") + ")";
    hw.function(base + "_count", a.count, what + ", elements");
    hw.function(base + "_bytes", a.count, what + ", bytes", eb);
  }
  o << hw.text();

  // Multi-problem runs: the best config measured on each problem.
  std::string lookup_asserts;
  if (run.problems.size() > 1) {
    o << "\n// The best correct config measured on each problem of the run (lowest p50\n"
         "// there). The macros above hold the overall winner (best geomean).\n";
    o << "struct TunedProblem {\n";
    std::vector<std::string> field;
    for (const auto& d : f.dim_names) {
      std::string fld = macros.count(d) || !is_identifier(d) || is_cpp_keyword(d) ? "dim_" + sanitize(d) : d;
      field.push_back(fld);
      o << "  long long " << fld << ";\n";
    }
    for (const auto& p : spec.params)
      if (param_type.count(p.name)) o << "  " << param_type[p.name] << " k" << p.name << ";\n";
    o << "  long long trial_id;\n  double p50_us;\n};\n";
    o << "constexpr TunedProblem kTunedProblems[] = {\n";
    for (size_t p = 0; p < run.problems.size(); ++p) {
      const Trial& t = *f.best_on[p];
      std::vector<std::string> vals;
      for (const auto& d : f.dim_names) vals.push_back(std::to_string(run.problems[p].find(d).value_or(0)) + "LL");
      for (const auto& prm : spec.params)
        if (param_type.count(prm.name))
          vals.push_back(std::to_string(t.config.values.count(prm.name) ? t.config.values.at(prm.name) : 0));
      vals.push_back(std::to_string(t.id) + "LL");
      const Measurement* m = measurement_on(t, static_cast<int>(p));
      vals.push_back(cpp_double(m ? m->p50_us : 0.0));
      o << "    {" << join(vals, ", ") << "},  // " << run.problems[p].canonical() << ": " << t.config.canonical()
        << "\n";
    }
    o << "};\n";
    o << "constexpr int kNumTunedProblems = " << run.problems.size() << ";\n";
    std::vector<std::string> params, conds;
    for (size_t i = 0; i < f.dim_names.size(); ++i) {
      std::string arg = macros.count(f.dim_names[i]) || !is_identifier(f.dim_names[i]) || is_cpp_keyword(f.dim_names[i])
                            ? "dim_" + sanitize(f.dim_names[i])
                            : f.dim_names[i];
      params.push_back("long long " + arg);
      conds.push_back("kTunedProblems[i]." + field[i] + " == " + arg);
    }
    o << "// Index into kTunedProblems of the problem with these dims, or -1 (host code).\n";
    o << "constexpr int lookup(" << join(params, ", ") << ") {\n"
      << "  for (int i = 0; i < kNumTunedProblems; ++i)\n"
      << "    if (" << join(conds, " && ") << ") return i;\n"
      << "  return -1;\n}\n";
    std::ostringstream la;
    for (size_t p = 0; p < run.problems.size(); ++p) {
      std::vector<std::string> args;
      for (const auto& d : f.dim_names) args.push_back(std::to_string(run.problems[p].find(d).value_or(0)) + "LL");
      // Two equal problems map to the first; the assert checks the first match.
      size_t first = p;
      for (size_t q = 0; q < p; ++q)
        if (run.problems[q].dims == run.problems[p].dims) {
          first = q;
          break;
        }
      la << "static_assert(lookup(" << join(args, ", ") << ") == " << first << ", \"evotune: lookup table\");\n";
    }
    lookup_asserts = la.str();
  }

  std::string asserts = hw.asserts() + lookup_asserts;
  if (!asserts.empty())
    o << "\n// Self-check: the helpers agree with evotune's own evaluation on the run's problems\n"
         "// ("
      << device_traits_note(f.dev) << ").\n"
      << asserts;
  o << "\n}  // namespace " << ns << "\n}  // namespace evotune_tuned\n\n#endif  // " << guard << "\n";
  return o.str();
}

// ------------------------------------------------------------ JSON

std::string export_json(const ExportInput& in) {
  Facts f = gather(in);
  const RunInfo& run = f.run;
  const KernelSpec& spec = f.spec;
  const Trial& w = f.winner;
  using nlohmann::json;

  auto measurement_json = [](const Measurement& m) { return json(m); };
  json problems = json::array();
  for (size_t p = 0; p < run.problems.size(); ++p) {
    const Problem& prob = run.problems[p];
    json pj = {{"index", p}, {"shape", prob.canonical()}, {"dims", json::object()}, {"dtype", to_string(prob.dtype)}};
    for (const auto& [k, v] : prob.dims) pj["dims"][k] = v;
    const Measurement* m = measurement_on(w, static_cast<int>(p));
    pj["winner"] = m ? measurement_json(*m) : json(nullptr);
    if (in.default_trial) {
      const Measurement* d = measurement_on(*in.default_trial, static_cast<int>(p));
      pj["default_p50_us"] = usable_p50(d) ? json(d->p50_us) : json(nullptr);
    }
    auto s = speedup_on(in, w, static_cast<int>(p));
    pj["speedup_over_default"] = s ? json(*s) : json(nullptr);
    try {
      LaunchDims d = spec.launch_dims(w.config, prob, f.dev);
      pj["launch"] = {{"grid", d.grid}, {"block", d.block}, {"smem", d.smem}};
      if (spec.launch.has_cluster()) pj["launch"]["cluster"] = d.cluster;
    } catch (const std::exception& e) {
      pj["launch"] = {{"error", e.what()}};
    }
    json buffers = json::array();
    Scope scope(spec, &prob, &w.config, f.dev);
    for (const auto& a : spec.args) {
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
    pj["buffers"] = buffers;
    json defines = json::object();
    for (const auto& [name, e] : spec.defines) {
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
    problems.push_back(pj);
  }

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
  json lets = json::object();
  for (const auto& [k, e] : spec.lets) lets[k] = e.text();

  json params = json::array();
  for (const auto& p : spec.params) {
    auto it = w.config.values.find(p.name);
    params.push_back({{"name", p.name},
                      {"value", it == w.config.values.end() ? json(nullptr) : json(it->second)},
                      {"default", p.default_value},
                      {"values", p.values},
                      {"help", p.help}});
  }

  json winner = {{"trial_id", w.id},          {"seq", w.seq},
                 {"config", w.config},        {"config_str", w.config.canonical()},
                 {"fitness_us", w.fitness},   {"resources", w.res},
                 {"compile_ms", w.compile_ms}};
  json macros = json::object();
  for (const auto& [k, v] : w.config.values) macros[k] = v;
  macros[dtype_macro(run.problems[0].dtype)] = 1;
  for (const auto& [name, text] : f.define_values) {  // [defines] as the header has them (problem 0)
    auto v = parse_int(text);
    macros[name] = v ? json(*v) : json(std::strtod(text.c_str(), nullptr));
  }

  json doc = {{"format", "evotune-export"},
              {"format_version", 1},
              {"exported_at", utc_now_iso()},
              {"kernel",
               {{"name", spec.name},
                {"description", spec.description},
                {"entry", spec.entry},
                {"origin", run.spec_origin.empty() ? spec.origin : run.spec_origin},
                {"spec_hash", run.spec_hash.empty() ? spec.content_hash() : run.spec_hash},
                {"arch_specific", spec.arch_specific},
                {"dims", f.dim_names}}},
              {"run",
               {{"id", run.id},
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
                {"ok_trials", in.ok_trials.size()}}},
              {"device", run.device},
              {"winner", winner},
              {"params", params},
              {"macros", macros},
              {"launch_exprs", launch_exprs},
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
