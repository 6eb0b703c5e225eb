// Export writers: the winner of a run as a self-contained C/C++ header, as
// JSON for other tools, and every measured trial as a dataset.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "core/types.hpp"
#include "store/store.hpp"

namespace evotune {

struct ExportInput {
  const RunInfo* run = nullptr;
  const KernelSpec* spec = nullptr;
  const Trial* winner = nullptr;       // best ok trial
  std::vector<Trial> ok_trials;        // every ok trial (per-problem lookup)
  std::optional<Trial> default_trial;  // the template's default config, if measured
};

// A header that compiles on its own with g++ and nvcc: provenance comment,
// the winning parameters as #defines (the names the template reads) and as
// constexpr values, launch-geometry helpers, and for multi-problem runs a
// constexpr lookup from problem to the best config measured on it.
std::string export_header(const ExportInput& in);
// The same content as JSON.
std::string export_json(const ExportInput& in);

}  // namespace evotune
