// Where the tests find the evotune binary and the source tree: the build's
// paths, unless EVOTUNE_BINARY / EVOTUNE_SOURCE_DIR say otherwise (a build
// copied to another machine).
#pragma once

#include <cstdlib>
#include <string>

namespace evotune_test {

inline std::string binary() {
  const char* e = std::getenv("EVOTUNE_BINARY");
  return e && *e ? e : EVOTUNE_BINARY;
}

inline std::string source_dir() {
  const char* e = std::getenv("EVOTUNE_SOURCE_DIR");
  return e && *e ? e : EVOTUNE_SOURCE_DIR;
}

}  // namespace evotune_test
