// Test helpers for spec errors: what a SpecError says.
#pragma once

#include <string>

#include "core/error.hpp"
#include "tests/catch.hpp"

namespace evotune_test {

// The message of the SpecError `f` throws; another exception fails the test.
template <typename F>
std::string spec_error(F&& f) {
  try {
    f();
  } catch (const evotune::SpecError& e) {
    return e.what();
  }
  FAIL("expected a SpecError");
  return "";
}

inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace evotune_test
