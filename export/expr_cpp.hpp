// Spec expressions as constexpr C++ for the exported header: each launch
// dimension or buffer size becomes a function of the problem's dimensions
// (with the [lets] it reads as locals), followed by static_asserts that it
// agrees with evotune's own evaluation on every problem of the run. Internal
// to export/.
#pragma once

#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/expr.hpp"
#include "export/facts.hpp"

namespace evotune {

// evotune's expression functions (evotune_cdiv, evotune_min, ...) in C++ with
// its semantics, guarded so several exported headers can be included
// together. The generated functions call them.
extern const char* const kExprFunctionsCpp;

class HelperWriter {
 public:
  // `macros`: the names the header #defines, which no generated local may take.
  HelperWriter(const ExportFacts& f, std::set<std::string> macros);

  // Writes `name`(dims...) computing `e`, or a comment saying why it cannot
  // be generated. `scale` multiplies the result (bytes of a buffer from its
  // element count).
  void function(const std::string& name, const Expr& e, const std::string& what, int64_t scale = 1);
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

  void write_self_checks(const std::string& name, const Expr& e, const Plan& plan, int64_t scale);
  // Resolves names in the order Scope does: params, dims, built-ins, [lets].
  std::string plan_expr(const Expr& e, Plan& plan);
  std::string visit(const Expr& e, Plan& plan, std::vector<std::string>& stack);
  // A local or parameter named like one of the header's macros would be
  // rewritten by the preprocessor.
  std::string check_names(const Plan& plan) const;

  const ExportFacts& f_;
  std::set<std::string> macros_;
  std::set<std::string> params_;
  std::ostringstream out_;
  std::ostringstream asserts_;
};

}  // namespace evotune
