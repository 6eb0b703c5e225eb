// A spec for the search's tests: a name, a kernel that is never compiled,
// and the dims, parameters and constraints a test gives.
#pragma once

#include <string>

#include "core/spec.hpp"

namespace evotune_test {

inline evotune::KernelSpec spec_from(const std::string& toml) {
  return evotune::parse_spec(toml, "inline.toml", [](const std::string&) { return std::string("// source"); });
}

// Everything a spec needs besides its parameters and constraints.
inline std::string spec_text(const std::string& dims, const std::string& params_and_space) {
  return R"toml(
[kernel]
name = "synthetic"
source = "k.cu"
entry = "k"

[problem]
dims = )toml" +
         dims + "\n" + params_and_space + R"toml(
[launch]
grid = ["1"]
block = ["32"]

[[arg]]
name = "out"
type = "f32*"
count = "1024"
role = "out"

[reference]
source = "ref.cu"
entry = "ref"
grid = ["1"]
block = ["1"]
)toml";
}

}  // namespace evotune_test
