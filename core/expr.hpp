// Expressions over kernel parameters and problem dimensions.
//
// Spec files describe constraints, launch geometry, buffer sizes and
// tolerances as small C-like expressions ("BLOCK_M % (16*WARPS) == 0",
// "cdiv(S, BLOCK_M)"). Integers are exact int64 with C semantics for / and %,
// so grid sizes never suffer floating-point rounding; a double appears only
// where a literal or a function (sqrt) makes one. Whatever the input, parsing
// and evaluation give a value or an ExprError that quotes the expression:
// integer overflow, division by zero, a double that is not finite, nesting
// deeper than kMaxExprDepth. Chains of one precedence level ("1+2+...+n") are
// flat, so their length costs no stack.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace evotune {

// A value is an exact integer or a double.
class Value {
 public:
  Value() = default;
  Value(int64_t i) : v_(i) {}  // NOLINT: implicit by design
  Value(double d) : v_(d) {}   // NOLINT
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  // An int, or a double with an exact int64 value.
  bool is_integral() const;
  int64_t as_int() const;  // throws ExprError if not integral
  double as_double() const;
  bool truthy() const { return is_int() ? std::get<int64_t>(v_) != 0 : std::get<double>(v_) != 0.0; }
  std::string str() const;

 private:
  std::variant<int64_t, double> v_{int64_t{0}};
};

// Parentheses, unary operators, ternaries and calls nest at most this deep.
constexpr int kMaxExprDepth = 256;

// Looks a name up; returns nullopt when the name is unknown.
using Resolver = std::function<std::optional<Value>(std::string_view)>;

struct ExprNode;

// A parsed expression. Cheap to copy (shares the tree).
class Expr {
 public:
  Expr() = default;
  // Parses `text`; throws ExprError with the position of the problem.
  static Expr parse(std::string_view text);
  // A constant expression.
  static Expr constant(Value v);

  // Throws ExprError naming the failing part of the expression; an ExprError
  // the resolver throws passes through unchanged.
  Value eval(const Resolver& resolve) const;
  // Every identifier the expression refers to (function names excluded).
  std::vector<std::string> identifiers() const;
  // The expression as C++ source, for exported headers (cdiv → evotune_cdiv).
  std::string to_cpp() const;
  const std::string& text() const { return text_; }
  bool empty() const { return root_ == nullptr; }

 private:
  std::shared_ptr<const ExprNode> root_;
  std::string text_;
};

}  // namespace evotune
