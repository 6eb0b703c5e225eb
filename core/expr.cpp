#include "core/expr.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

bool Value::is_integral() const {
  if (is_int()) return true;
  double d = std::get<double>(v_);
  return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18;
}

int64_t Value::as_int() const {
  if (is_int()) return std::get<int64_t>(v_);
  if (is_integral()) return static_cast<int64_t>(std::get<double>(v_));
  throw ExprError("expected an integer, got " + str());
}

double Value::as_double() const {
  return is_int() ? static_cast<double>(std::get<int64_t>(v_)) : std::get<double>(v_);
}

std::string Value::str() const {
  if (is_int()) return std::to_string(std::get<int64_t>(v_));
  std::ostringstream os;
  os.precision(17);
  os << std::get<double>(v_);
  return os.str();
}

// ---------------------------------------------------------------- tree

enum class Op { Num, Ident, Call, Neg, Not, Cond, Chain, Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or };

struct ExprNode {
  Op op = Op::Num;
  Value num;
  std::string name;  // identifier or function name
  std::vector<std::shared_ptr<const ExprNode>> kids;
  // Chain: kids[0] ops[0] kids[1] ops[1] ... of one precedence level, left
  // to right; ends[i] is where kids[i] ends in the text.
  std::vector<Op> ops;
  std::vector<size_t> ends;
  size_t begin = 0, end = 0;  // the node's part of the text
};

using NodePtr = std::shared_ptr<const ExprNode>;

namespace {

struct Token {
  enum Kind { End, Num, Ident, Sym } kind = End;
  std::string text;
  Value num;
  size_t pos = 0;
};

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool is_word(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// The binary operators by precedence level, loosest first.
const std::vector<std::vector<std::pair<const char*, Op>>>& levels() {
  static const std::vector<std::vector<std::pair<const char*, Op>>> table = {
      {{"||", Op::Or}},
      {{"&&", Op::And}},
      {{"==", Op::Eq}, {"!=", Op::Ne}},
      {{"<=", Op::Le}, {">=", Op::Ge}, {"<", Op::Lt}, {">", Op::Gt}},
      {{"+", Op::Add}, {"-", Op::Sub}},
      {{"*", Op::Mul}, {"/", Op::Div}, {"%", Op::Mod}},
  };
  return table;
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) { next(); }

  NodePtr parse_all() {
    NodePtr n = ternary();
    if (tok_.kind != Token::End) fail("unexpected '" + tok_.text + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ExprError("in expression " + in_quotes(src_) + " at column " + std::to_string(tok_.pos + 1) + ": " + what);
  }

  // Counts the nesting of the recursive productions: past kMaxExprDepth the
  // expression is refused before it can exhaust the stack.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxExprDepth) p_.fail("nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
    }
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  // Integers are decimal or 0x hex and stay exact; a '.' or an exponent
  // makes a double. A leading zero is refused: C would read it as octal.
  void lex_number() {
    const size_t start = i_;
    const bool hex = src_.substr(i_, 2) == "0x" || src_.substr(i_, 2) == "0X";
    bool is_float = false;
    auto skip = [&](auto pred) {
      while (i_ < src_.size() && pred(src_[i_])) ++i_;
    };
    if (hex) {
      i_ += 2;
      skip([](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    } else {
      skip(is_digit);
      if (i_ < src_.size() && src_[i_] == '.') {
        is_float = true;
        ++i_;
        skip(is_digit);
      }
      if (i_ < src_.size() && (src_[i_] == 'e' || src_[i_] == 'E')) {
        is_float = true;
        ++i_;
        if (i_ < src_.size() && (src_[i_] == '+' || src_[i_] == '-')) ++i_;
        skip(is_digit);
      }
    }
    if (i_ < src_.size() && (is_word(src_[i_]) || src_[i_] == '.'))
      fail("malformed number '" + std::string(src_.substr(start, i_ - start + 1)) + "'");
    const std::string text(src_.substr(start, i_ - start));
    tok_.kind = Token::Num;
    tok_.text = text;
    if (!hex && text.size() > 1 && text[0] == '0' && is_digit(text[1]))
      fail("number '" + text + "' has a leading zero (numbers are decimal; hex is written 0x...)");
    if (is_float) {
      char* end = nullptr;
      double d = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size()) fail("malformed number '" + text + "'");
      if (!std::isfinite(d)) fail("number out of range: " + text);
      tok_.num = Value(d);
      return;
    }
    const char* first = text.data() + (hex ? 2 : 0);
    const char* last = text.data() + text.size();
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(first, last, v, hex ? 16 : 10);
    if (ec == std::errc::result_out_of_range) fail("integer literal out of range: " + text);
    if (ec != std::errc() || ptr != last) fail("malformed number '" + text + "'");
    tok_.num = Value(v);
  }

  void next() {
    prev_end_ = i_;
    while (i_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[i_]))) ++i_;
    tok_ = Token{};
    tok_.pos = i_;
    if (i_ >= src_.size()) return;
    char c = src_[i_];
    if (is_digit(c) || (c == '.' && i_ + 1 < src_.size() && is_digit(src_[i_ + 1]))) {
      lex_number();
      return;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i_;
      while (i_ < src_.size() && is_word(src_[i_])) ++i_;
      tok_.kind = Token::Ident;
      tok_.text = std::string(src_.substr(start, i_ - start));
      return;
    }
    static const char* two[] = {"<=", ">=", "==", "!=", "&&", "||"};
    for (const char* t : two) {
      if (src_.substr(i_, 2) == t) {
        tok_.kind = Token::Sym;
        tok_.text = t;
        i_ += 2;
        return;
      }
    }
    if (std::string_view("+-*/%<>!?:(),").find(c) != std::string_view::npos) {
      tok_.kind = Token::Sym;
      tok_.text = std::string(1, c);
      ++i_;
      return;
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  bool accept(const char* sym) {
    if (tok_.kind == Token::Sym && tok_.text == sym) {
      next();
      return true;
    }
    return false;
  }
  void expect(const char* sym) {
    if (!accept(sym))
      fail(std::string("expected '") + sym + "'" +
           (tok_.kind == Token::End ? " before the end" : ", got '" + tok_.text + "'"));
  }

  // A node spanning the text from `begin` to the last token consumed.
  std::shared_ptr<ExprNode> make(Op op, std::vector<NodePtr> kids, size_t begin) const {
    auto n = std::make_shared<ExprNode>();
    n->op = op;
    n->kids = std::move(kids);
    n->begin = begin;
    n->end = prev_end_;
    return n;
  }

  NodePtr ternary() {
    Nest nest(*this);
    const size_t begin = tok_.pos;
    NodePtr c = binary(0);
    if (!accept("?")) return c;
    NodePtr a = ternary();
    expect(":");
    NodePtr b = ternary();
    return make(Op::Cond, {c, a, b}, begin);
  }

  // One precedence level: its operands are parsed in a loop into one flat
  // chain, so a long chain costs no stack here nor when evaluated.
  NodePtr binary(size_t level) {
    if (level == levels().size()) return unary();
    const size_t begin = tok_.pos;
    NodePtr first = binary(level + 1);
    const size_t first_end = prev_end_;
    std::shared_ptr<ExprNode> chain;
    for (;;) {
      std::optional<Op> op;
      for (const auto& [sym, o] : levels()[level]) {
        if (accept(sym)) {
          op = o;
          break;
        }
      }
      if (!op) break;
      if (!chain) {
        chain = make(Op::Chain, {first}, begin);
        chain->ends.push_back(first_end);
      }
      chain->ops.push_back(*op);
      chain->kids.push_back(binary(level + 1));
      chain->ends.push_back(prev_end_);
    }
    if (!chain) return first;
    chain->end = prev_end_;
    return chain;
  }

  NodePtr unary() {
    const size_t begin = tok_.pos;
    for (const auto& [sym, op] : {std::pair{"-", Op::Neg}, std::pair{"!", Op::Not}, std::pair{"+", Op::Num}}) {
      if (!accept(sym)) continue;
      Nest nest(*this);
      NodePtr operand = unary();
      return op == Op::Num ? operand : make(op, {operand}, begin);
    }
    return primary();
  }

  NodePtr primary() {
    const size_t begin = tok_.pos;
    if (tok_.kind == Token::Num) {
      Value v = tok_.num;
      next();
      auto n = make(Op::Num, {}, begin);
      n->num = v;
      return n;
    }
    if (tok_.kind == Token::Ident) {
      std::string name = tok_.text;
      next();
      if (!accept("(")) {
        auto n = make(Op::Ident, {}, begin);
        n->name = name;
        return n;
      }
      std::vector<NodePtr> args;
      if (!accept(")")) {
        do args.push_back(ternary());
        while (accept(","));
        expect(")");
      }
      auto n = make(Op::Call, std::move(args), begin);
      n->name = name;
      check_call(*n);
      return n;
    }
    if (accept("(")) {
      NodePtr n = ternary();
      expect(")");
      return n;
    }
    fail(tok_.kind == Token::End ? "unexpected end of expression" : "unexpected '" + tok_.text + "'");
  }

  void check_call(const ExprNode& n) const {
    struct Arity {
      const char* name;
      size_t min, max;
    };
    static const Arity table[] = {
        {"cdiv", 2, 2},  {"align_up", 2, 2}, {"min", 2, 16},  {"max", 2, 16},  {"abs", 1, 1},
        {"sqrt", 1, 1},  {"log2", 1, 1},     {"ilog2", 1, 1}, {"pow", 2, 2},   {"is_pow2", 1, 1},
        {"floor", 1, 1}, {"ceil", 1, 1},     {"round", 1, 1}, {"float", 1, 1}, {"int", 1, 1},
    };
    for (const auto& a : table) {
      if (n.name == a.name) {
        if (n.kids.size() < a.min || n.kids.size() > a.max)
          fail("function " + n.name + "() takes " + std::to_string(a.min) +
               (a.max != a.min ? " to " + std::to_string(a.max) : "") + " arguments");
        return;
      }
    }
    fail("unknown function " + n.name + "()");
  }

  std::string_view src_;
  size_t i_ = 0;
  size_t prev_end_ = 0;  // where the last consumed token ends
  int depth_ = 0;
  Token tok_;
};

// ---------------------------------------------------------------- evaluation

// An operation that failed, with the part of the text it covers; Expr::eval
// turns it into the ExprError the caller sees.
struct Failure {
  std::string what;
  size_t begin, end;
};

Value finite(double d, const char* what) {
  if (!std::isfinite(d)) throw ExprError(std::string(what) + " is not a finite number");
  return d;
}

// A double as an exact integer; floor, ceil, round and int need one.
int64_t to_int(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
    throw ExprError("the result " + Value(d).str() + " does not fit a 64-bit integer");
  return static_cast<int64_t>(d);
}

template <typename F>
int64_t checked(F overflows, int64_t x, int64_t y, const char* sym) {
  int64_t r = 0;
  if (overflows(x, y, &r))
    throw ExprError("integer overflow (" + std::to_string(x) + " " + sym + " " + std::to_string(y) + ")");
  return r;
}

Value arith(Op op, const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) {
    int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case Op::Add:
        return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_add_overflow(p, q, r); }, x, y, "+");
      case Op::Sub:
        return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_sub_overflow(p, q, r); }, x, y, "-");
      case Op::Mul:
        return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_mul_overflow(p, q, r); }, x, y, "*");
      case Op::Div:
      case Op::Mod:
        if (y == 0) throw ExprError(op == Op::Div ? "division by zero" : "modulo by zero");
        // The one quotient that does not fit: C leaves both / and % undefined (x86 traps).
        if (x == INT64_MIN && y == -1)
          throw ExprError("integer overflow (" + std::to_string(x) + (op == Op::Div ? " / " : " % ") + "-1)");
        return op == Op::Div ? x / y : x % y;
      default:
        break;
    }
  }
  double x = a.as_double(), y = b.as_double();
  switch (op) {
    case Op::Add:
      return finite(x + y, "the sum");
    case Op::Sub:
      return finite(x - y, "the difference");
    case Op::Mul:
      return finite(x * y, "the product");
    case Op::Div:
      if (y == 0) throw ExprError("division by zero");
      return finite(x / y, "the quotient");
    case Op::Mod:
      throw ExprError("% needs integers");
    default:
      throw ExprError("internal: bad arithmetic operator");
  }
}

Value negate(const Value& v) {
  if (!v.is_int()) return -v.as_double();
  if (v.as_int() == INT64_MIN) throw ExprError("integer overflow (-(" + v.str() + "))");
  return -v.as_int();
}

int compare(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  double x = a.as_double(), y = b.as_double();
  return x < y ? -1 : (x > y ? 1 : 0);
}

Value binary_op(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::Lt:
      return static_cast<int64_t>(compare(a, b) < 0);
    case Op::Le:
      return static_cast<int64_t>(compare(a, b) <= 0);
    case Op::Gt:
      return static_cast<int64_t>(compare(a, b) > 0);
    case Op::Ge:
      return static_cast<int64_t>(compare(a, b) >= 0);
    case Op::Eq:
      return static_cast<int64_t>(compare(a, b) == 0);
    case Op::Ne:
      return static_cast<int64_t>(compare(a, b) != 0);
    default:
      return arith(op, a, b);
  }
}

// Exponentiation by squaring: O(log e) steps, each checked for overflow. A
// square is formed only when a later bit needs it, so it never exceeds the
// result and never overflows where the result fits.
int64_t ipow(int64_t base, int64_t e) {
  int64_t r = 1;
  for (;;) {
    if (e & 1) r = arith(Op::Mul, r, base).as_int();
    e >>= 1;
    if (e == 0) return r;
    base = arith(Op::Mul, base, base).as_int();
  }
}

Value call(const std::string& f, const std::vector<Value>& a) {
  if (f == "cdiv" || f == "align_up") {
    int64_t x = a[0].as_int(), y = a[1].as_int();
    if (y <= 0) throw ExprError(f + "() needs a positive divisor, got " + std::to_string(y));
    int64_t q = x / y + (x % y > 0 ? 1 : 0);  // never forms x + y - 1, which can overflow
    return f == "cdiv" ? Value(q) : arith(Op::Mul, q, y);
  }
  if (f == "min" || f == "max") {
    Value best = a[0];
    for (size_t i = 1; i < a.size(); ++i) {
      int c = compare(a[i], best);
      if ((f == "min" && c < 0) || (f == "max" && c > 0)) best = a[i];
    }
    return best;
  }
  if (f == "abs") return compare(a[0], int64_t{0}) < 0 ? negate(a[0]) : a[0];
  if (f == "sqrt") {
    if (a[0].as_double() < 0) throw ExprError("sqrt() of a negative number (" + a[0].str() + ")");
    return std::sqrt(a[0].as_double());
  }
  if (f == "log2") {
    if (a[0].as_double() <= 0) throw ExprError("log2() of a number that is not positive (" + a[0].str() + ")");
    return std::log2(a[0].as_double());
  }
  if (f == "ilog2") {
    int64_t x = a[0].as_int();
    if (x <= 0) throw ExprError("ilog2() needs a positive argument, got " + std::to_string(x));
    return static_cast<int64_t>(63 - __builtin_clzll(static_cast<uint64_t>(x)));
  }
  if (f == "pow") {
    if (a[0].is_int() && a[1].is_int() && a[1].as_int() >= 0) return ipow(a[0].as_int(), a[1].as_int());
    return finite(std::pow(a[0].as_double(), a[1].as_double()), "pow()'s result");
  }
  if (f == "is_pow2") {
    int64_t x = a[0].as_int();
    return static_cast<int64_t>(x > 0 && (x & (x - 1)) == 0);
  }
  if (f == "floor") return to_int(std::floor(a[0].as_double()));
  if (f == "ceil") return to_int(std::ceil(a[0].as_double()));
  if (f == "round") return to_int(std::round(a[0].as_double()));
  if (f == "float") return a[0].as_double();
  if (f == "int") return a[0].is_int() ? a[0] : Value(to_int(std::trunc(a[0].as_double())));
  throw ExprError("unknown function " + f + "()");
}

class Evaluator {
 public:
  explicit Evaluator(const Resolver& resolve) : resolve_(resolve) {}

  // Recursion follows the tree, whose depth the parser bounds: chains are flat.
  Value eval(const ExprNode& n) const {
    switch (n.op) {
      case Op::Num:
        return n.num;
      case Op::Ident: {
        std::optional<Value> v = resolve_ ? resolve_(n.name) : std::nullopt;
        if (!v) throw Failure{"unknown name '" + n.name + "'", n.begin, n.end};
        return *v;
      }
      case Op::Call: {
        std::vector<Value> args;
        args.reserve(n.kids.size());
        for (const auto& k : n.kids) args.push_back(eval(*k));
        return at(n.begin, n.end, [&] { return call(n.name, args); });
      }
      case Op::Neg: {
        Value v = eval(*n.kids[0]);
        return at(n.begin, n.end, [&] { return negate(v); });
      }
      case Op::Not:
        return static_cast<int64_t>(!eval(*n.kids[0]).truthy());
      case Op::Cond:
        return eval(*n.kids[0]).truthy() ? eval(*n.kids[1]) : eval(*n.kids[2]);
      case Op::Chain:
        return chain(n);
      default:
        throw Failure{"internal: bad expression node", n.begin, n.end};
    }
  }

 private:
  // One operation on evaluated operands; its ExprError becomes a Failure
  // over [begin, end). Name lookups stay outside: a resolver's error passes.
  template <typename F>
  static Value at(size_t begin, size_t end, F&& op) {
    try {
      return op();
    } catch (const ExprError& e) {
      throw Failure{e.what(), begin, end};
    }
  }

  Value chain(const ExprNode& n) const {
    Value acc = eval(*n.kids[0]);
    for (size_t i = 1; i < n.kids.size(); ++i) {
      const Op op = n.ops[i - 1];
      if (op == Op::And || op == Op::Or) {
        // C's short circuit: the right operand is evaluated only when it decides.
        const bool decided = acc.truthy() == (op == Op::Or);
        acc = static_cast<int64_t>(decided ? op == Op::Or : eval(*n.kids[i]).truthy());
        continue;
      }
      Value rhs = eval(*n.kids[i]);
      acc = at(n.begin, n.ends[i], [&] { return binary_op(op, acc, rhs); });
    }
    return acc;
  }

  const Resolver& resolve_;
};

void collect(const ExprNode& n, std::set<std::string>& out) {
  if (n.op == Op::Ident) out.insert(n.name);
  for (const auto& k : n.kids) collect(*k, out);
}

const char* op_text(Op op) {
  switch (op) {
    case Op::Add:
      return "+";
    case Op::Sub:
      return "-";
    case Op::Mul:
      return "*";
    case Op::Div:
      return "/";
    case Op::Mod:
      return "%";
    case Op::Lt:
      return "<";
    case Op::Le:
      return "<=";
    case Op::Gt:
      return ">";
    case Op::Ge:
      return ">=";
    case Op::Eq:
      return "==";
    case Op::Ne:
      return "!=";
    case Op::And:
      return "&&";
    case Op::Or:
      return "||";
    default:
      return "?";
  }
}

std::string cpp(const ExprNode& n) {
  switch (n.op) {
    case Op::Num: {
      if (n.num.is_int()) return n.num.str() + "LL";
      std::string d = n.num.str();  // keep a double a double in C++: "2" → "2.0"
      if (d.find_first_of(".eEni") == std::string::npos) d += ".0";
      return d;
    }
    case Op::Ident:
      return n.name;
    case Op::Call: {
      std::string s = "evotune_" + n.name + "(";
      for (size_t i = 0; i < n.kids.size(); ++i) s += (i ? ", " : "") + cpp(*n.kids[i]);
      return s + ")";
    }
    case Op::Neg:
      return "(-" + cpp(*n.kids[0]) + ")";
    case Op::Not:
      return "(!" + cpp(*n.kids[0]) + ")";
    case Op::Cond:
      return "(" + cpp(*n.kids[0]) + " ? " + cpp(*n.kids[1]) + " : " + cpp(*n.kids[2]) + ")";
    case Op::Chain: {
      // Left-associative, as C++ reads it: "((a + b) + c)".
      std::string s(n.kids.size() - 1, '(');
      s += cpp(*n.kids[0]);
      for (size_t i = 1; i < n.kids.size(); ++i)
        s += std::string(" ") + op_text(n.ops[i - 1]) + " " + cpp(*n.kids[i]) + ")";
      return s;
    }
    default:
      return "?";
  }
}

}  // namespace

Expr Expr::parse(std::string_view text) {
  Expr e;
  e.text_ = std::string(text);
  e.root_ = Parser(text).parse_all();
  return e;
}

Expr Expr::constant(Value v) {
  Expr e;
  auto n = std::make_shared<ExprNode>();
  n->op = Op::Num;
  n->num = v;
  e.text_ = v.str();
  n->end = e.text_.size();
  e.root_ = n;
  return e;
}

Value Expr::eval(const Resolver& resolve) const {
  if (!root_) throw ExprError("empty expression");
  try {
    return Evaluator(resolve).eval(*root_);
  } catch (const Failure& f) {
    const std::string part = text_.substr(f.begin, f.end - f.begin);
    throw ExprError(f.what + " in " + in_quotes(part) + (part == text_ ? "" : ", part of " + in_quotes(text_)));
  }
}

std::vector<std::string> Expr::identifiers() const {
  std::set<std::string> names;
  if (root_) collect(*root_, names);
  return {names.begin(), names.end()};
}

std::string Expr::to_cpp() const {
  return root_ ? cpp(*root_) : std::string();
}

}  // namespace evotune
