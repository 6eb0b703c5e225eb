#include "export/expr_cpp.hpp"

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "export/cpp_text.hpp"

namespace evotune {

namespace {

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

}  // namespace

// Not R"cpp(: clang-format would re-indent it, and it is written out as it is.
const char* const kExprFunctionsCpp = R"text(#ifndef EVOTUNE_TUNED_HELPERS_
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
)text";

HelperWriter::HelperWriter(const ExportFacts& f, std::set<std::string> macros) : f_(f), macros_(std::move(macros)) {
  for (const auto& p : f.spec.params) params_.insert(p.name);
}

void HelperWriter::function(const std::string& name, const Expr& e, const std::string& what, int64_t scale) {
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
  out_ << "  return static_cast<long long>(" << body << ")" << (scale != 1 ? " * " + std::to_string(scale) + "LL" : "")
       << ";\n}\n";
  write_self_checks(name, e, plan, scale);
}

// On every problem of the run, with the tuner's own evaluator.
void HelperWriter::write_self_checks(const std::string& name, const Expr& e, const Plan& plan, int64_t scale) {
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
      asserts_ << "static_assert(" << name << "(" << join(args, ", ") << ") == " << expect << "LL, \"evotune: " << name
               << "() disagrees with the tuner on problem " << p << "\");\n";
    } catch (const std::exception&) {
      // The expression fails on this problem (the tuner would reject it too).
    }
  }
}

std::string HelperWriter::plan_expr(const Expr& e, Plan& plan) {
  std::vector<std::string> stack;
  std::string why = visit(e, plan, stack);
  if (why.empty() && plan.uses_pow && plan.has_double) why = "pow() of doubles has no constexpr version here";
  return why;
}

std::string HelperWriter::visit(const Expr& e, Plan& plan, std::vector<std::string>& stack) {
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

std::string HelperWriter::check_names(const Plan& plan) const {
  std::vector<std::string> names(plan.dims.begin(), plan.dims.end());
  names.insert(names.end(), plan.lets.begin(), plan.lets.end());
  for (const auto& n : names) {
    if (macros_.count(n)) return "'" + n + "' is also the name of a macro this header defines";
    if (!is_identifier(n) || is_cpp_keyword(n)) return "'" + n + "' is not usable as a C++ name";
  }
  return {};
}

}  // namespace evotune
