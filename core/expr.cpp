#include "core/expr.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace evotune {

int64_t Value::as_int() const {
  if (is_int()) return std::get<int64_t>(v_);
  double d = std::get<double>(v_);
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
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

enum class Op {
  Num,
  Ident,
  Call,
  Neg,
  Not,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
  Cond,
};

struct ExprNode {
  Op op = Op::Num;
  Value num;
  std::string name;  // identifier or function name
  std::vector<std::shared_ptr<const ExprNode>> kids;
};

using NodePtr = std::shared_ptr<const ExprNode>;

namespace {

struct Token {
  enum Kind { End, Num, Ident, Sym } kind = End;
  std::string text;
  Value num;
  size_t pos = 0;
};

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
    throw ExprError("in expression \"" + std::string(src_) + "\" at column " + std::to_string(tok_.pos + 1) + ": " +
                    what);
  }

  static bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

  // Integers (decimal or 0x hex) stay exact; a '.' or an exponent makes a double.
  void lex_number() {
    size_t start = i_;
    bool is_float = false;
    auto digits = [&] {
      while (i_ < src_.size() && digit(src_[i_])) ++i_;
    };
    if (src_.substr(i_, 2) == "0x" || src_.substr(i_, 2) == "0X") {
      i_ += 2;
      while (i_ < src_.size() && std::isxdigit(static_cast<unsigned char>(src_[i_]))) ++i_;
    } else {
      digits();
      if (i_ < src_.size() && src_[i_] == '.') {
        is_float = true;
        ++i_;
        digits();
      }
      if (i_ < src_.size() && (src_[i_] == 'e' || src_[i_] == 'E')) {
        is_float = true;
        ++i_;
        if (i_ < src_.size() && (src_[i_] == '+' || src_[i_] == '-')) ++i_;
        digits();
      }
    }
    if (i_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[i_])) || src_[i_] == '_'))
      fail("malformed number '" + std::string(src_.substr(start, i_ - start + 1)) + "'");
    std::string text(src_.substr(start, i_ - start));
    tok_.kind = Token::Num;
    tok_.text = text;
    char* end = nullptr;
    if (is_float) {
      tok_.num = Value(std::strtod(text.c_str(), &end));
    } else {
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 0);
      if (errno == ERANGE) fail("integer literal out of range: " + text);
      tok_.num = Value(static_cast<int64_t>(v));
    }
    if (end == nullptr || *end != '\0') fail("malformed number '" + text + "'");
  }

  void next() {
    while (i_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[i_]))) ++i_;
    tok_ = Token{};
    tok_.pos = i_;
    if (i_ >= src_.size()) return;
    char c = src_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i_ + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i_ + 1])))) {
      lex_number();
      return;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i_;
      while (i_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[i_])) || src_[i_] == '_')) ++i_;
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

  static NodePtr make(Op op, std::vector<NodePtr> kids) {
    auto n = std::make_shared<ExprNode>();
    n->op = op;
    n->kids = std::move(kids);
    return n;
  }

  NodePtr ternary() {
    NodePtr c = binary(0);
    if (accept("?")) {
      NodePtr a = ternary();
      expect(":");
      NodePtr b = ternary();
      return make(Op::Cond, {c, a, b});
    }
    return c;
  }

  // Precedence climbing over the binary operators, loosest first.
  NodePtr binary(int level) {
    struct Level {
      std::vector<std::pair<const char*, Op>> ops;
    };
    static const std::vector<Level> levels = {
        {{{"||", Op::Or}}},
        {{{"&&", Op::And}}},
        {{{"==", Op::Eq}, {"!=", Op::Ne}}},
        {{{"<=", Op::Le}, {">=", Op::Ge}, {"<", Op::Lt}, {">", Op::Gt}}},
        {{{"+", Op::Add}, {"-", Op::Sub}}},
        {{{"*", Op::Mul}, {"/", Op::Div}, {"%", Op::Mod}}},
    };
    if (level == static_cast<int>(levels.size())) return unary();
    NodePtr lhs = binary(level + 1);
    for (;;) {
      bool matched = false;
      for (const auto& [sym, op] : levels[level].ops) {
        if (accept(sym)) {
          lhs = make(op, {lhs, binary(level + 1)});
          matched = true;
          break;
        }
      }
      if (!matched) return lhs;
    }
  }

  NodePtr unary() {
    if (accept("-")) return make(Op::Neg, {unary()});
    if (accept("+")) return unary();
    if (accept("!")) return make(Op::Not, {unary()});
    return primary();
  }

  NodePtr primary() {
    if (tok_.kind == Token::Num) {
      auto n = std::make_shared<ExprNode>();
      n->op = Op::Num;
      n->num = tok_.num;
      next();
      return n;
    }
    if (tok_.kind == Token::Ident) {
      auto n = std::make_shared<ExprNode>();
      n->name = tok_.text;
      next();
      if (accept("(")) {
        n->op = Op::Call;
        if (!accept(")")) {
          do n->kids.push_back(ternary());
          while (accept(","));
          expect(")");
        }
        check_call(*n);
      } else {
        n->op = Op::Ident;
      }
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
  Token tok_;
};

// The builtin writes `r`; it must run before `r` is read (argument
// evaluation order is unspecified, so never pass both to one call).
template <typename F>
int64_t checked(F op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) throw ExprError("integer overflow");
  return r;
}

Value arith(Op op, const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) {
    int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case Op::Add:
        return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_add_overflow(p, q, r); }, x, y);
      case Op::Sub:
        return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_sub_overflow(p, q, r); }, x, y);
      case Op::Mul:
        return checked([](int64_t p, int64_t q, int64_t* r) { return __builtin_mul_overflow(p, q, r); }, x, y);
      case Op::Div:
        if (y == 0) throw ExprError("division by zero");
        return x / y;
      case Op::Mod:
        if (y == 0) throw ExprError("modulo by zero");
        return x % y;
      default:
        break;
    }
  }
  double x = a.as_double(), y = b.as_double();
  switch (op) {
    case Op::Add:
      return x + y;
    case Op::Sub:
      return x - y;
    case Op::Mul:
      return x * y;
    case Op::Div:
      if (y == 0) throw ExprError("division by zero");
      return x / y;
    case Op::Mod:
      throw ExprError("% needs integers");
    default:
      throw ExprError("internal: bad arithmetic operator");
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  double x = a.as_double(), y = b.as_double();
  return x < y ? -1 : (x > y ? 1 : 0);
}

Value call(const ExprNode& n, const std::vector<Value>& a) {
  const std::string& f = n.name;
  if (f == "cdiv" || f == "align_up") {
    int64_t x = a[0].as_int(), y = a[1].as_int();
    if (y <= 0) throw ExprError(f + "() needs a positive divisor");
    int64_t q = x >= 0 ? (x + y - 1) / y : x / y;
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
  if (f == "abs")
    return a[0].is_int() ? Value(static_cast<int64_t>(std::llabs(a[0].as_int()))) : Value(std::fabs(a[0].as_double()));
  if (f == "sqrt") return std::sqrt(a[0].as_double());
  if (f == "log2") return std::log2(a[0].as_double());
  if (f == "ilog2") {
    int64_t x = a[0].as_int();
    if (x <= 0) throw ExprError("ilog2() needs a positive argument");
    return static_cast<int64_t>(63 - __builtin_clzll(static_cast<uint64_t>(x)));
  }
  if (f == "pow") {
    if (a[0].is_int() && a[1].is_int() && a[1].as_int() >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < a[1].as_int(); ++i) r = arith(Op::Mul, r, a[0]).as_int();
      return r;
    }
    return std::pow(a[0].as_double(), a[1].as_double());
  }
  if (f == "is_pow2") {
    int64_t x = a[0].as_int();
    return static_cast<int64_t>(x > 0 && (x & (x - 1)) == 0);
  }
  if (f == "floor") return static_cast<int64_t>(std::floor(a[0].as_double()));
  if (f == "ceil") return static_cast<int64_t>(std::ceil(a[0].as_double()));
  if (f == "round") return static_cast<int64_t>(std::llround(a[0].as_double()));
  if (f == "float") return a[0].as_double();
  if (f == "int") return static_cast<int64_t>(a[0].as_double());
  throw ExprError("unknown function " + f + "()");
}

Value eval_node(const ExprNode& n, const Resolver& resolve) {
  switch (n.op) {
    case Op::Num:
      return n.num;
    case Op::Ident: {
      std::optional<Value> v = resolve ? resolve(n.name) : std::nullopt;
      if (!v) throw ExprError("unknown name '" + n.name + "'");
      return *v;
    }
    case Op::Call: {
      std::vector<Value> args;
      args.reserve(n.kids.size());
      for (const auto& k : n.kids) args.push_back(eval_node(*k, resolve));
      return call(n, args);
    }
    case Op::Neg: {
      Value v = eval_node(*n.kids[0], resolve);
      return v.is_int() ? arith(Op::Sub, int64_t{0}, v) : Value(-v.as_double());
    }
    case Op::Not:
      return static_cast<int64_t>(!eval_node(*n.kids[0], resolve).truthy());
    case Op::And:
      return static_cast<int64_t>(eval_node(*n.kids[0], resolve).truthy() && eval_node(*n.kids[1], resolve).truthy());
    case Op::Or:
      return static_cast<int64_t>(eval_node(*n.kids[0], resolve).truthy() || eval_node(*n.kids[1], resolve).truthy());
    case Op::Cond:
      return eval_node(*n.kids[0], resolve).truthy() ? eval_node(*n.kids[1], resolve) : eval_node(*n.kids[2], resolve);
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne: {
      int c = compare(eval_node(*n.kids[0], resolve), eval_node(*n.kids[1], resolve));
      bool r = n.op == Op::Lt   ? c < 0
               : n.op == Op::Le ? c <= 0
               : n.op == Op::Gt ? c > 0
               : n.op == Op::Ge ? c >= 0
               : n.op == Op::Eq ? c == 0
                                : c != 0;
      return static_cast<int64_t>(r);
    }
    default:
      return arith(n.op, eval_node(*n.kids[0], resolve), eval_node(*n.kids[1], resolve));
  }
}

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
    default:
      return "(" + cpp(*n.kids[0]) + " " + op_text(n.op) + " " + cpp(*n.kids[1]) + ")";
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
  e.root_ = n;
  e.text_ = v.str();
  return e;
}

Value Expr::eval(const Resolver& resolve) const {
  if (!root_) throw ExprError("empty expression");
  try {
    return eval_node(*root_, resolve);
  } catch (const ExprError& e) {
    throw ExprError(std::string(e.what()) + " (evaluating \"" + text_ + "\")");
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
