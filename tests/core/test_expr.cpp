#include <cmath>
#include <map>
#include <string>

#include "core/error.hpp"
#include "core/expr.hpp"
#include "tests/catch.hpp"

using evotune::Expr;
using evotune::ExprError;
using evotune::Value;

namespace {

Value eval(const char* text, std::map<std::string, int64_t> vars = {}) {
  return Expr::parse(text).eval([&](std::string_view n) -> std::optional<Value> {
    auto it = vars.find(std::string(n));
    if (it == vars.end()) return std::nullopt;
    return Value(it->second);
  });
}

}  // namespace

TEST_CASE("integer arithmetic follows C semantics", "[expr]") {
  CHECK(eval("7 / 2").as_int() == 3);
  CHECK(eval("-7 / 2").as_int() == -3);
  CHECK(eval("-7 % 3").as_int() == -1);
  CHECK(eval("2 + 3 * 4").as_int() == 14);
  CHECK(eval("(2 + 3) * 4").as_int() == 20);
  CHECK(eval("10 - 4 - 3").as_int() == 3);  // left associative
  CHECK(eval("0x80").as_int() == 128);
  CHECK(eval("-(3)").as_int() == -3);
  CHECK(eval("227*1024").as_int() == 232448);
}

TEST_CASE("doubles appear only from literals and functions", "[expr]") {
  CHECK_FALSE(eval("1.0/2").is_int());
  CHECK(eval("1.0/2").as_double() == Approx(0.5));
  CHECK(eval("1e-2").as_double() == Approx(0.01));
  CHECK(eval("1/sqrt(64)").as_double() == Approx(0.125));
  CHECK(eval("2.5e1").as_double() == Approx(25.0));
}

TEST_CASE("comparisons, logic and the ternary", "[expr]") {
  CHECK(eval("3 < 4 && 4 <= 4 && 5 > 4 && 4 >= 4 && 1 == 1 && 1 != 2").as_int() == 1);
  CHECK(eval("0 || 0").as_int() == 0);
  CHECK(eval("!0").as_int() == 1);
  CHECK(eval("1 ? 2 : 3").as_int() == 2);
  CHECK(eval("0 ? 2 : 1 ? 4 : 5").as_int() == 4);
  // Short-circuit: the division by zero is never evaluated.
  CHECK(eval("0 && 1/0").as_int() == 0);
  CHECK(eval("1 || 1/0").as_int() == 1);
  CHECK(eval("X > 1 ? 10 / X : 0", {{"X", 0}}).as_int() == 0);
}

TEST_CASE("functions", "[expr]") {
  CHECK(eval("cdiv(513, 128)").as_int() == 5);
  CHECK(eval("cdiv(512, 128)").as_int() == 4);
  CHECK(eval("align_up(100, 64)").as_int() == 128);
  CHECK(eval("min(3, 1, 2)").as_int() == 1);
  CHECK(eval("max(3, 1, 2)").as_int() == 3);
  CHECK(eval("ilog2(4096)").as_int() == 12);
  CHECK(eval("is_pow2(96)").as_int() == 0);
  CHECK(eval("is_pow2(64)").as_int() == 1);
  CHECK(eval("pow(2, 10)").as_int() == 1024);
  CHECK(eval("abs(-5)").as_int() == 5);
}

TEST_CASE("names resolve through the resolver", "[expr]") {
  CHECK(eval("BLOCK_M % (16 * WARPS) == 0", {{"BLOCK_M", 128}, {"WARPS", 4}}).as_int() == 1);
  CHECK(eval("BLOCK_M % (16 * WARPS) == 0", {{"BLOCK_M", 96}, {"WARPS", 4}}).as_int() == 0);
  auto ids = Expr::parse("cdiv(S, BLOCK_M) * B + max(H, 1)").identifiers();
  CHECK(ids == std::vector<std::string>{"B", "BLOCK_M", "H", "S"});
}

TEST_CASE("errors name the problem", "[expr]") {
  CHECK_THROWS_AS(Expr::parse("1 +"), ExprError);
  CHECK_THROWS_AS(Expr::parse("(1 + 2"), ExprError);
  CHECK_THROWS_AS(Expr::parse("1 $ 2"), ExprError);
  CHECK_THROWS_AS(Expr::parse("foo(1)"), ExprError);   // unknown function
  CHECK_THROWS_AS(Expr::parse("cdiv(1)"), ExprError);  // arity
  CHECK_THROWS_AS(Expr::parse("12abc"), ExprError);
  CHECK_THROWS_AS(eval("1 / 0"), ExprError);
  CHECK_THROWS_AS(eval("1 % 0"), ExprError);
  CHECK_THROWS_AS(eval("1.5 % 2"), ExprError);
  CHECK_THROWS_AS(eval("UNKNOWN + 1"), ExprError);
  CHECK_THROWS_AS(eval("9223372036854775807 + 1"), ExprError);  // overflow, not wrap
  try {
    eval("A + B", {{"A", 1}});
    FAIL("expected an error");
  } catch (const ExprError& e) {
    CHECK(std::string(e.what()).find("'B'") != std::string::npos);
  }
}

TEST_CASE("to_cpp gives equivalent C++", "[expr]") {
  CHECK(Expr::parse("cdiv(N, BLOCK_N)").to_cpp() == "evotune_cdiv(N, BLOCK_N)");
  CHECK(Expr::parse("a ? b : -c").to_cpp() == "(a ? b : (-c))");
  CHECK(Expr::parse("1 + 2 * 3").to_cpp() == "(1LL + (2LL * 3LL))");
}
