// compute-sanitizer as a gate for the winners: a candidate is evaluated once,
// verification only, in a worker process started under one of the
// sanitizer's tools, on problems set up without guard regions (memcheck then
// sees each buffer as an allocation of its exact size). The tool's first
// report is the finding. Each tool gets its own process, so a report belongs
// to exactly one candidate.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "engine/plan.hpp"

namespace evotune {

// The status a finding of each tool (core/spec.hpp: sanitizer_tools) gives
// a trial: memcheck (out-of-bounds or misaligned accesses) -> crashed;
// racecheck (shared-memory hazards) and synccheck (invalid barrier use) ->
// incorrect.
TrialStatus sanitizer_finding_status(const std::string& tool);

// compute-sanitizer's path: $EVOTUNE_SANITIZER, then PATH, $CUDA_HOME/bin,
// /usr/local/cuda/bin. Empty when there is none.
std::string locate_compute_sanitizer();

struct SanitizerFinding {
  std::string tool;
  TrialStatus status = TrialStatus::crashed;
  std::string report;  // the tool's first report, a few lines
};

// What a sanitizer log says: the first report of an error, or nullopt when
// its summary counts none. Throws EngineError when the log has no summary
// (the tool did not finish).
std::optional<std::string> first_sanitizer_report(const std::string& log);

class SanitizerGate {
 public:
  // `setup` is the tuner's set-up; `problems` the indices of the problems to
  // check under the sanitizer (the check shapes), which are verified only.
  SanitizerGate(std::string sanitizer, std::string exe, const SetupRequest& setup, const std::vector<size_t>& problems,
                std::vector<std::string> tools);

  // Runs the candidate (a request for every problem of the tuner's set-up)
  // under each tool, on `device`; the finding of the first tool (in the
  // spec's order) that has one, or nullopt when every tool is clean. Throws
  // EngineError when the sanitizer itself fails.
  std::optional<SanitizerFinding> check(const EvalRequest& req, int device, double timeout_s) const;
  // The same for several candidates. Every (candidate, tool) pair is a
  // process of its own, up to `parallel` at a time: the sanitizer's start-up
  // (about a second) dominates on small check shapes.
  std::vector<std::optional<SanitizerFinding>> check_all(const std::vector<EvalRequest>& reqs, int device,
                                                         double timeout_s, int parallel = 8) const;

  const std::vector<std::string>& tools() const { return tools_; }
  const std::string& path() const { return sanitizer_; }

 private:
  std::optional<SanitizerFinding> run_tool(const std::string& tool, const EvalRequest& req, int device,
                                           double timeout_s) const;
  std::string sanitizer_, exe_;
  SetupRequest setup_;
  std::vector<size_t> problems_;
  std::vector<std::string> tools_;
};

}  // namespace evotune
