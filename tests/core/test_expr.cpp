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

namespace {

// The ExprError `text` gives (parsing or evaluating with `vars`), or "" when
// it gives a value.
std::string error_of(const std::string& text, std::map<std::string, int64_t> vars = {}) {
  try {
    eval(text.c_str(), std::move(vars));
  } catch (const ExprError& e) {
    return e.what();
  }
  return "";
}

// `head` followed by `s` n times.
std::string repeat(const std::string& s, int n, const std::string& head = "") {
  std::string r = head;
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

}  // namespace

TEST_CASE("integer overflow is an error naming the expression, never a trap", "[expr]") {
  const std::string min = "(-9223372036854775807 - 1)";
  for (const std::string& text : std::vector<std::string>{
           min + " / -1", min + " % -1", "abs" + min, "-" + min, "0 - " + min, "9223372036854775807 * 2",
           "9223372036854775807 + 1", min + " - 1", "pow(2, 63)", "pow(-3, 40)", "align_up(9223372036854775807, 2)"}) {
    INFO(text);
    std::string why = error_of(text);
    CHECK(why.find("overflow") != std::string::npos);
    CHECK(why.find(text) != std::string::npos);
  }
  CHECK(eval((min + " / 1").c_str()).as_int() == INT64_MIN);
  CHECK(eval((min + " % 1").c_str()).as_int() == 0);
  CHECK(eval("abs(-9223372036854775807)").as_int() == INT64_MAX);
  // cdiv never forms x + y - 1.
  CHECK(eval("cdiv(9223372036854775807, 2)").as_int() == 4611686018427387904);
  CHECK(eval("cdiv(-7, 2)").as_int() == -3);
  CHECK(eval("cdiv(7, 2)").as_int() == 4);
  // pow takes O(log n) steps: huge exponents of 0, 1, -1 neither hang nor fail.
  CHECK(eval("pow(1, 9223372036854775807)").as_int() == 1);
  CHECK(eval("pow(-1, 9223372036854775807)").as_int() == -1);
  CHECK(eval("pow(0, 9223372036854775807)").as_int() == 0);
  CHECK(eval("pow(0, 0)").as_int() == 1);
  CHECK(eval("pow(-2, 63)").as_int() == INT64_MIN);
  CHECK(eval("pow(3, 39)").as_int() == 4052555153018976267);
  CHECK(!error_of("9223372036854775808").empty());  // literal out of range
}

TEST_CASE("a double that is not a finite number, or does not fit an integer, is an error", "[expr]") {
  for (const char* text :
       {"sqrt(-1)", "log2(0)", "log2(-1)", "1e308 * 10", "pow(2.0, 5000.0)", "1e999", "floor(1e300)", "ceil(-1e300)",
        "round(1e19)", "int(1e19)", "0.0 / 0.0", "1.0 / 0", "cdiv(1e300, 2)", "pow(-8.0, 0.5)"}) {
    INFO(text);
    std::string why = error_of(text);
    CHECK_FALSE(why.empty());
    CHECK(why.find(text) != std::string::npos);
  }
  CHECK(eval("sqrt(0)").as_double() == 0.0);
  CHECK(eval("log2(8)").as_double() == Approx(3.0));
  CHECK(eval("floor(-2.5)").as_int() == -3);
  CHECK(eval("round(2.5)").as_int() == 3);
}

TEST_CASE("errors point at the failing part of a longer expression", "[expr]") {
  std::string why = error_of("1 + N / BLOCK", {{"N", 1000}, {"BLOCK", 0}});
  CHECK(why.find("division by zero") != std::string::npos);
  CHECK(why.find("\"N / BLOCK\"") != std::string::npos);
  CHECK(why.find("1 + N / BLOCK") != std::string::npos);
  why = error_of("max(1, sqrt(2 - X))", {{"X", 3}});
  CHECK(why.find("sqrt(2 - X)") != std::string::npos);
}

TEST_CASE("deep nesting is an error and long chains evaluate, without recursing per term", "[expr]") {
  // Nesting: parentheses, unary operators, ternaries, calls.
  for (const std::string& text : std::vector<std::string>{
           repeat("(", 5000) + "1" + repeat(")", 5000), repeat("-", 50000) + "1", repeat("!", 50000) + "1",
           repeat("1 ? 2 : ", 5000) + "3", repeat("abs(", 5000) + "1" + repeat(")", 5000)}) {
    std::string why = error_of(text);
    CHECK(why.find("nest") != std::string::npos);
    CHECK(why.size() < 400);  // the message quotes a long expression in part only
  }
  CHECK(eval((repeat("(", 100) + "7" + repeat(")", 100)).c_str()).as_int() == 7);
  CHECK(eval((repeat("- ", 100) + "7").c_str()).as_int() == 7);
  // Chains of one precedence level are flat: any length evaluates.
  std::string sum = repeat(" + 1", 49999, "1");
  CHECK(eval(sum.c_str()).as_int() == 50000);
  CHECK(eval(repeat(" * X", 61, "X").c_str(), {{"X", 2}}).as_int() == int64_t{1} << 62);
  CHECK(eval(repeat(" < 2", 50000, "1").c_str()).as_int() == 1);
  CHECK(eval(repeat(" && 1", 50000, "1").c_str()).as_int() == 1);
  CHECK(eval(repeat(" || 0", 50000, "0").c_str()).as_int() == 0);
  CHECK(eval(repeat(" - 1", 50000, "1").c_str()).as_int() == -49999);
  CHECK(eval(repeat("*2 + 1", 30000, "1").c_str()).as_int() == 60001);
  Expr e = Expr::parse(sum);
  CHECK(e.identifiers().empty());
  CHECK(e.to_cpp().size() > 50000);
  std::string mixed = repeat(" + A * 2", 20000, "A");
  CHECK(Expr::parse(mixed).identifiers() == std::vector<std::string>{"A"});
  CHECK(eval(mixed.c_str(), {{"A", 3}}).as_int() == 3 + 20000 * 6);
}

TEST_CASE("integer literals are decimal or 0x hex, never octal", "[expr]") {
  CHECK(eval("0").as_int() == 0);
  CHECK(eval("512").as_int() == 512);
  CHECK(eval("0x200").as_int() == 512);
  CHECK(eval("0.5").as_double() == Approx(0.5));
  CHECK(eval("0e3").as_double() == 0.0);
  for (const char* text : {"0512", "010 + 1", "08", "00", "-007", "00.5", "0x", "0x1g"}) {
    INFO(text);
    std::string why = error_of(text);
    CHECK_FALSE(why.empty());
  }
  CHECK(error_of("0512").find("leading zero") != std::string::npos);
}
