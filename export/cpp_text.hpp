// C++ source text from evotune's data, for the exported header: names that
// compile, comments that stay one line, literals that read back exactly.
// Internal to export/.
#pragma once

#include <cstdint>
#include <string>

namespace evotune {

bool is_identifier(const std::string& s);
bool is_cpp_keyword(const std::string& s);
// A C++ identifier made from a kernel name: "sdpa-fwd" → "sdpa_fwd".
std::string identifier_from(const std::string& name);
// One line of a // comment: no line breaks from user-provided text.
std::string one_line(const std::string& s);
// A C++ string literal: "say \"hi\"\n".
std::string cpp_string(const std::string& s);
// A double as a C++ literal that reads back as the same value.
std::string cpp_double(double v);
// "int" when every value in [lo, hi] fits one, else "long long".
std::string cpp_int_type(int64_t lo, int64_t hi);

}  // namespace evotune
