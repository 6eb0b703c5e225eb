#include "export/cpp_text.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/strings.hpp"

namespace evotune {

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

std::string identifier_from(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "kernel_" + s;
  if (is_cpp_keyword(s)) s += '_';
  return s;
}

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

std::string cpp_int_type(int64_t lo, int64_t hi) {
  return lo >= -2147483648LL && hi <= 2147483647LL ? "int" : "long long";
}

}  // namespace evotune
