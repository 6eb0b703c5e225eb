// Export: what leaves evotune for other programs and for people. A run's
// winner as a self-contained C/C++ header, as JSON for other tools, as a
// launch document (its cubins, geometry and arguments per problem) for
// launchers outside evotune, and the whole run as a Markdown report. It reads
// runs from the store and writes text; it never changes the database. A
// dataset (every trial, for `run --replay`) is the store's own file format
// (store/dataset.hpp); export_run writes one too.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "core/types.hpp"
#include "store/store.hpp"

namespace evotune {

enum class ExportFormat { header, json, launch, dataset };

// The run's export in `format`, read from `s`. Throws UsageError when the run
// has nothing to export (no trials; no measured winner, as in a compile-only
// run), and for a launch document when the kernel changed since the run.
std::string export_run(const Store& s, const RunInfo& run, ExportFormat format);

// A report of a run: the run's facts, the top line (default config and
// elites: latency, TFLOP/s, speedup, errors, resources), convergence, the
// parameters that mattered and the failed trials by status, in Markdown;
// with a plot stem, also its plots as SVG documents (`STEM-convergence.svg`,
// every trial by its order coloured by status with the best so far;
// `STEM-elites.svg`, the elites against the default config), which the
// Markdown links by those names: written beside it, they show where it is
// rendered.
struct Report {
  std::string markdown;
  std::vector<std::pair<std::string, std::string>> plots;  // file name, SVG text
};
Report make_report(const Store& s, const RunInfo& run, const std::string& plot_stem);
// The Markdown alone (no plots).
std::string report_markdown(const Store& s, const RunInfo& run);

struct ExportInput {
  const RunInfo* run = nullptr;
  const KernelSpec* spec = nullptr;
  const Trial* winner = nullptr;          // best ok trial
  std::vector<Trial> ok_trials;           // every ok trial (per-problem lookup)
  std::optional<Trial> default_trial;     // the template's default config, if measured
  std::vector<BaselineResult> baselines;  // measured beside the run
};

// A header that compiles on its own with g++ and nvcc: provenance comment,
// the winning parameters as #defines (the names the template reads) and as
// constexpr values, launch-geometry helpers, and for multi-problem runs a
// constexpr lookup from problem to the best config measured on it.
std::string export_header(const ExportInput& in);
// The same content as JSON.
std::string export_json(const ExportInput& in);
// The winner compiled for the run's architecture, with everything a launcher
// outside evotune needs per problem: geometry and each argument's plan. Needs
// the kernel's sources as they were tuned (load_run_spec).
std::string export_launch(const RunInfo& run, const Trial& winner);

}  // namespace evotune
