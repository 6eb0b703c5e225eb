// Randomized inputs for the expression engine and the spec loader. Whatever
// they are given, they give a value or throw one of the project's errors with
// a message: never another exception, a crash or a hang (which the test's
// time limit would show). Seeds are fixed, so every run tries the same inputs.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/error.hpp"
#include "core/expr.hpp"
#include "core/spec.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"

using namespace evotune;

namespace {

__extension__ typedef __int128 i128;  // the reference arithmetic: no int64 overflow is possible in it

// Runs `f`; an error of the project's must carry a message, any other
// exception fails the test. Returns whether `f` finished without error.
template <typename F>
bool outcome(const std::string& input, F&& f) {
  try {
    f();
    return true;
  } catch (const ExprError& e) {
    INFO(input);
    CHECK(std::string(e.what()).size() > 0);
  } catch (const SpecError& e) {
    INFO(input);
    CHECK(std::string(e.what()).size() > 0);
  } catch (const UsageError& e) {
    INFO(input);
    CHECK(std::string(e.what()).size() > 0);
  } catch (const std::exception& e) {
    INFO(input);
    FAIL("unexpected " << typeid(e).name() << ": " << e.what());
  }
  return false;
}

size_t pick(std::mt19937_64& rng, size_t n) {
  return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}

// A random integer expression and its value under C semantics with int64
// overflow as an error (nullopt), computed independently in 128 bits.
class ExprGen {
 public:
  explicit ExprGen(uint64_t seed) : rng_(seed) {}

  const std::map<std::string, int64_t> vars = {{"A", 3}, {"B", -7}, {"C", INT64_MAX}, {"D", INT64_MIN}, {"Z", 0}};

  struct Out {
    std::string text;
    std::optional<int64_t> value;  // nullopt: the evaluation must fail
  };

  Out gen(int depth) {
    if (depth == 0 || pick(rng_, 4) == 0) return leaf();
    switch (pick(rng_, 8)) {
      case 0:
        return chain(depth, {"+", "-"});
      case 1:
        return chain(depth, {"*", "/", "%"});
      case 2:
        return chain(depth, {"<", "<=", ">", ">="});
      case 3:
        return chain(depth, {"==", "!="});
      case 4:
        return logic(depth);
      case 5:
        return unary(depth);
      case 6:
        return ternary(depth);
      default:
        return call(depth);
    }
  }

 private:
  static std::optional<int64_t> fit(i128 v) {
    if (v < INT64_MIN || v > INT64_MAX) return std::nullopt;
    return static_cast<int64_t>(v);
  }

  static std::string paren(const std::string& s) { return "(" + s + ")"; }

  Out leaf() {
    static const char* literals[] = {
        "0",    "1",         "2", "7", "3037000499", "3037000500", "4611686018427387904", "9223372036854775807",
        "0x10", "0xFFFFFFFF"};
    if (pick(rng_, 3) == 0) {
      auto it = std::next(vars.begin(), static_cast<long>(pick(rng_, vars.size())));
      return {it->first, it->second};
    }
    if (pick(rng_, 40) == 0) return {"Q", std::nullopt};  // unknown name
    if (pick(rng_, 10) == 0) return {"-1", -1};
    if (pick(rng_, 10) == 0) return {"(-9223372036854775807 - 1)", INT64_MIN};
    std::string t = literals[pick(rng_, std::size(literals))];
    return {t, static_cast<int64_t>(std::stoull(t, nullptr, 0))};
  }

  static std::optional<int64_t> apply(const std::string& op, int64_t x, int64_t y) {
    const i128 a = x, b = y;
    if (op == "+") return fit(a + b);
    if (op == "-") return fit(a - b);
    if (op == "*") return fit(a * b);
    if (op == "/" || op == "%") {
      // INT64_MIN % -1 is 0, but C leaves it undefined with the quotient: an error too.
      if (y == 0 || (x == INT64_MIN && y == -1)) return std::nullopt;
      return fit(op == "/" ? a / b : a % b);
    }
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    if (op == ">=") return x >= y;
    if (op == "==") return x == y;
    return x != y;
  }

  // Operators of one precedence level, unparenthesized: left to right.
  Out chain(int depth, const std::vector<std::string>& ops) {
    Out first = gen(depth - 1);
    Out r{paren(first.text), first.value};
    const size_t n = 1 + pick(rng_, 4);
    for (size_t i = 0; i < n; ++i) {
      const std::string& op = ops[pick(rng_, ops.size())];
      Out k = gen(depth - 1);
      r.text += " " + op + " " + paren(k.text);
      r.value = r.value && k.value ? apply(op, *r.value, *k.value) : std::nullopt;
    }
    return r;
  }

  // C's short circuit: an operand that is not evaluated cannot fail.
  Out logic(int depth) {
    const bool is_and = pick(rng_, 2) == 0;
    Out a = gen(depth - 1), b = gen(depth - 1);
    Out r{paren(a.text) + (is_and ? " && " : " || ") + paren(b.text), std::nullopt};
    if (!a.value) return r;
    if ((*a.value != 0) != is_and) return {r.text, static_cast<int64_t>(!is_and)};
    if (b.value) r.value = static_cast<int64_t>(*b.value != 0);
    return r;
  }

  Out unary(int depth) {
    Out a = gen(depth - 1);
    switch (pick(rng_, 3)) {
      case 0:
        return {"-" + paren(a.text), a.value ? fit(-static_cast<i128>(*a.value)) : std::nullopt};
      case 1:
        return {"!" + paren(a.text), a.value ? std::optional<int64_t>(*a.value == 0) : std::nullopt};
      default:
        return {"abs" + paren(a.text),
                a.value ? fit(*a.value < 0 ? -static_cast<i128>(*a.value) : *a.value) : std::nullopt};
    }
  }

  Out ternary(int depth) {
    Out c = gen(depth - 1), a = gen(depth - 1), b = gen(depth - 1);
    std::string text = paren(c.text) + " ? " + paren(a.text) + " : " + paren(b.text);
    if (!c.value) return {text, std::nullopt};
    return {text, *c.value != 0 ? a.value : b.value};
  }

  Out call(int depth) {
    Out a = gen(depth - 1), b = gen(depth - 1);
    const std::string args = "(" + a.text + ", " + b.text + ")";
    const bool both = a.value && b.value;
    switch (pick(rng_, 4)) {
      case 0:
        return {"min" + args, both ? std::optional<int64_t>(std::min(*a.value, *b.value)) : std::nullopt};
      case 1:
        return {"max" + args, both ? std::optional<int64_t>(std::max(*a.value, *b.value)) : std::nullopt};
      case 2: {
        if (!both || *b.value <= 0) return {"cdiv" + args, std::nullopt};
        const i128 x = *a.value, y = *b.value;
        return {"cdiv" + args, fit(x >= 0 ? (x + y - 1) / y : x / y)};
      }
      default: {
        // A small exponent, so that the reference can multiply step by step.
        const int64_t e = static_cast<int64_t>(pick(rng_, 70));
        std::string text = "pow(" + a.text + ", " + std::to_string(e) + ")";
        if (!a.value) return {text, std::nullopt};
        i128 r = 1;
        for (int64_t i = 0; i < e; ++i) {
          r *= *a.value;
          if (r > i128{1} << 64 || r < -(i128{1} << 64)) return {text, std::nullopt};
        }
        return {text, fit(r)};
      }
    }
  }

  std::mt19937_64 rng_;
};

// Text built from pieces of the expression language and some that are not.
std::string noise(std::mt19937_64& rng) {
  static const char* pieces[] = {"0",     "1",    "07",  "0x",   "0x1F",     "9223372036854775808",
                                 "1e999", ".5",   "1.",  "e",    "A",        "B",
                                 "_x",    "cdiv", "min", "pow",  "sqrt",     "log2",
                                 "foo",   "(",    ")",   ",",    "+",        "-",
                                 "*",     "/",    "%",   "<",    "<=",       "==",
                                 "!=",    "&&",   "||",  "!",    "?",        ":",
                                 " ",     "$",    "\t",  "\xff", "\xc3\xa9", "#",
                                 "[",     "\"",   "'",   "=",    "@"};
  std::string s;
  const size_t n = pick(rng, 40);
  for (size_t i = 0; i < n; ++i) s += pieces[pick(rng, std::size(pieces))];
  if (pick(rng, 20) == 0) s.push_back('\0');
  return s;
}

std::string repeat(const std::string& s, size_t n) {
  std::string r;
  for (size_t i = 0; i < n; ++i) r += s;
  return r;
}

std::optional<Value> resolve(std::string_view n) {
  if (n == "A") return Value(int64_t{3});
  if (n == "B") return Value(int64_t{-7});
  if (n == "C") return Value(INT64_MAX);
  if (n == "D") return Value(INT64_MIN);
  if (n == "Z") return Value(int64_t{0});
  if (n == "F") return Value(0.5);
  return std::nullopt;
}

// Parses and evaluates `text` the ways a spec's user would; checks that an
// evaluated double is finite. Returns the value's text, or the error's.
std::string exercise(const std::string& text) {
  std::string result;
  bool ok = outcome(text, [&] {
    Expr e = Expr::parse(text);
    e.identifiers();
    e.to_cpp();
    Value v = e.eval(resolve);
    CHECK(std::isfinite(v.as_double()));
    result = v.str();
  });
  if (!ok) {
    try {
      Expr::parse(text).eval(resolve);
    } catch (const ExprError& e) {
      result = std::string("error: ") + e.what();
    }
  }
  return result;
}

}  // namespace

TEST_CASE("random integer expressions evaluate as 128-bit arithmetic says, or fail where it overflows", "[fuzz]") {
  ExprGen gen(20250117);
  int values = 0, errors = 0;
  for (int i = 0; i < 3000; ++i) {
    ExprGen::Out want = gen.gen(1 + i % 6);
    INFO(want.text);
    std::optional<int64_t> got;
    std::string why;
    outcome(want.text, [&] {
      try {
        got = Expr::parse(want.text).eval(resolve).as_int();
      } catch (const ExprError& e) {
        why = e.what();
        throw;
      }
    });
    if (want.value) {
      CHECK(why == "");
      CHECK(got == want.value);
      ++values;
    } else {
      CHECK_FALSE(got);
      CHECK(why != "");
      ++errors;
    }
  }
  // Both outcomes are common, so each comparison above was made often.
  CHECK(values > 500);
  CHECK(errors > 300);
}

TEST_CASE("random text gives a value or an ExprError, the same each time", "[fuzz]") {
  std::mt19937_64 rng(424242);
  for (int i = 0; i < 4000; ++i) {
    const std::string text = noise(rng);
    CHECK(exercise(text) == exercise(text));
  }
  // Every construct that nests, up to the limit and past it, and chains,
  // which do not nest however long: never a stack overflow.
  for (const std::string unit : {"(", "-", "!", "+", "abs(", "min(1,", "1?2:"}) {
    for (size_t n : {255, 257, 5000, 50000}) {
      const std::string text = repeat(unit, n) + "1" + repeat(")", unit.back() == '(' || unit.back() == ',' ? n : 0);
      INFO(unit << " x " << n);
      CHECK((exercise(text).find("nested deeper than") != std::string::npos) == (n > 256));
    }
  }
  for (const std::string unit : {"A+", "A-", "A*", "A/", "A&&", "A||", "A<", "A==", "(A)+"}) {
    INFO(unit);
    CHECK(exercise(repeat(unit, 50000) + "1").find("nested") == std::string::npos);
  }
  CHECK(exercise(repeat("A+", 50000) + "1") == "150001");
}

namespace {

// The spec texts the mutations start from: the built-ins, the example and
// the faulty test kernel.
std::vector<std::string> seed_specs() {
  std::vector<std::string> out;
  for (const char* rel :
       {"kernel_templates/gemm/spec.toml", "kernel_templates/gemm_sm90/spec.toml",
        "kernel_templates/sdpa_fwd/spec.toml", "examples/transpose/spec.toml", "tests/data/faulty/spec.toml"}) {
    std::ifstream in(evotune_test::source_dir() + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    REQUIRE(ss.str().size() > 100);
    out.push_back(ss.str());
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  return lines;
}

enum class Kind { number, quoted, word };
using Span = std::pair<size_t, size_t>;  // [begin, end) in a line

// Where the decimal numbers, the "strings" or the names of a line are.
std::vector<Span> spans(const std::string& line, Kind kind) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  std::vector<Span> out;
  for (size_t i = 0; i < line.size();) {
    if (kind == Kind::quoted) {
      const size_t open = line.find('"', i), close = open == std::string::npos ? open : line.find('"', open + 1);
      if (close == std::string::npos) break;
      out.emplace_back(open, close + 1);
      i = close + 1;
      continue;
    }
    if (!word_char(line[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < line.size() && word_char(line[end])) ++end;
    const bool number = std::all_of(line.begin() + static_cast<long>(i), line.begin() + static_cast<long>(end), digit);
    const bool name = !digit(line[i]);
    if ((kind == Kind::number && number) || (kind == Kind::word && name)) out.emplace_back(i, end);
    i = end;
  }
  return out;
}

// One random edit of the kind a hand-edited spec goes wrong by.
std::string mutate(const std::string& text, std::mt19937_64& rng) {
  static const char* numbers[] = {
      "0",   "-1",  "9223372036854775807", "99999999999999999999", "0x10", "010", "1e308", "-0", "2147483648", "0.5",
      "nan", "-inf"};
  static const char* inserts[] = {" / 0",
                                  " % 0",
                                  " - 9223372036854775807 - 2",
                                  "sqrt(-1) + ",
                                  " * 9223372036854775807",
                                  "(",
                                  ")",
                                  " +",
                                  "threads + ",
                                  "0512 + ",
                                  "1e999 + "};
  std::vector<std::string> lines = lines_of(text);
  if (lines.empty()) return text;
  const size_t at = pick(rng, lines.size());
  std::string& line = lines[at];
  auto nth = [&](Kind kind) -> std::optional<Span> {
    std::vector<Span> all = spans(line, kind);
    if (all.empty()) return std::nullopt;
    return all[pick(rng, all.size())];
  };
  // The first span of `kind` on another line, or "".
  auto elsewhere = [&](Kind kind) {
    const std::string& other = lines[pick(rng, lines.size())];
    std::vector<Span> all = spans(other, kind);
    return all.empty() ? std::string() : other.substr(all[0].first, all[0].second - all[0].first);
  };
  switch (pick(rng, 8)) {
    case 0:
      lines.erase(lines.begin() + static_cast<long>(at));
      break;
    case 1:
      lines.insert(lines.begin() + static_cast<long>(at), line);
      break;
    case 2:
      std::swap(line, lines[pick(rng, lines.size())]);
      break;
    case 3:
      if (auto m = nth(Kind::number))
        line.replace(m->first, m->second - m->first, numbers[pick(rng, std::size(numbers))]);
      break;
    case 4:  // a string from elsewhere in the file: names become other names, cycles, shadows
      if (auto m = nth(Kind::quoted)) {
        const std::string other = elsewhere(Kind::quoted);
        if (!other.empty()) line.replace(m->first, m->second - m->first, other);
      }
      break;
    case 5:
      if (auto m = nth(Kind::word)) {
        const std::string other = elsewhere(Kind::word);
        if (!other.empty()) line.replace(m->first, m->second - m->first, other);
      }
      break;
    case 6:
      if (auto m = nth(Kind::quoted))
        line.insert(m->first + 1 + pick(rng, m->second - m->first - 1), inserts[pick(rng, std::size(inserts))]);
      break;
    default: {
      std::string out;
      for (const auto& l : lines) out += l + "\n";
      return out.substr(0, pick(rng, out.size() + 1));  // truncated anywhere
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Everything a run evaluates for a loaded spec, on its example problem and a
// few random configs.
void exercise(const KernelSpec& s, const std::string& text, std::mt19937_64& rng) {
  std::optional<Problem> p;
  outcome(text, [&] { p = s.parse_problem(s.example.empty() ? "1,1,1,1" : s.example, s.dtypes.front()); });
  if (!p) return;
  const DeviceTraits dev = DeviceTraits::for_arch(90);
  outcome(text, [&] { s.check_binding({*p}, dev); });
  outcome(text, [&] {
    s.tolerances(*p);
    s.flops_of(*p);
    s.reference_launch_dims(*p, dev);
    s.reference_defines(*p, dev);
  });
  for (int i = 0; i < 4; ++i) {
    Config c = s.default_config();
    for (const ParamSpec& ps : s.params)
      if (pick(rng, 2)) c.values[ps.name] = ps.values[pick(rng, ps.values.size())];
    outcome(text, [&] {
      if (s.invalid_reason(c, {*p}, dev)) return;
      s.launch_dims(c, *p, dev);
      s.compile_defines(c, *p, dev);
      s.gate_reason(Resources{}, c, *p, dev);
    });
  }
}

}  // namespace

TEST_CASE("mutated specs load or fail with a spec error, and what loads evaluates or fails clearly", "[fuzz]") {
  std::mt19937_64 rng(777);
  auto read = [](const std::string& f) { return "// " + f; };
  int loaded = 0, refused = 0;
  for (const std::string& seed : seed_specs()) {
    for (int i = 0; i < 100; ++i) {
      std::string text = seed;
      for (size_t edits = 1 + pick(rng, 2); edits > 0; --edits) text = mutate(text, rng);
      std::optional<KernelSpec> s;
      if (outcome(text, [&] { s = parse_spec(text, "fuzz.toml", read); })) {
        ++loaded;
        exercise(*s, text, rng);
      } else {
        ++refused;
      }
    }
  }
  // Both sides of the loader are reached often.
  CHECK(loaded > 100);
  CHECK(refused > 100);
}

TEST_CASE("random shapes and configs parse or give a usage error", "[fuzz]") {
  std::mt19937_64 rng(99);
  KernelSpec s = parse_spec(seed_specs()[3], "transpose.toml", [](const std::string&) { return std::string("//"); });
  static const char* pieces[] = {"0", "1", "8", "0512", "0x10", "-3", "+4",
                                 "M", "N", "=", ",",    " ",    "",   "99999999999999999999"};
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (size_t n = pick(rng, 8); n > 0; --n) text += pieces[pick(rng, std::size(pieces))];
    outcome(text, [&] { s.parse_problem(text, Dtype::fp32); });
    outcome(text, [&] { Config::parse(text); });
  }
}
