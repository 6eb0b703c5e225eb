// Nsight Compute (ncu) for the profile step: where it is, the metrics it is
// asked for, and what its raw CSV page says per kernel launch.
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"

namespace evotune {

// ncu's path: $EVOTUNE_NCU, then PATH, $CUDA_HOME/bin, /usr/local/cuda/bin.
// Empty when there is none.
std::string locate_ncu();

// The --metrics argument: duration, SM, DRAM and memory throughput, L2 hit
// rate, achieved occupancy, SM clock, launch resources, the tensor pipe's
// busy cycles and the warp-stall ratios (regular expressions where ncu names
// a family).
std::string ncu_metrics();

// The kernels of `ncu --csv --page raw` output (ncu's own lines and the
// profiled program's output before the header are skipped; numbers may carry
// thousands separators). Throws EngineError when there is no header row, or
// a row lacks the duration.
std::vector<KernelProfile> parse_ncu_raw_csv(const std::string& text);

// The NVTX range around the first launch of each problem's timed series of a
// trial (the estimate launch; nothing else is in it): the profile step asks
// ncu for the kernels in such ranges, one per problem.
constexpr const char* kTimedRange = "evotune_timed";

// The NVTX range around one more launch of a baseline's kernels (the
// library's call, which may launch several) after it was measured, for the
// profile step: one name per baseline result and problem index.
std::string baseline_range(const std::string& name, int problem);

// Runs `ncu --target-processes all --clock-control none --nvtx --nvtx-include <range>/
// [--launch-count <launches>] --csv --page raw --metrics <ncu_metrics()>
// program...` (launches <= 0: every kernel in the range), its output (ncu's
// lines, the program's and the CSV) captured whole. Exit code -1: killed at
// the timeout. Throws EngineError when ncu cannot be started.
struct NcuOutput {
  int exit_code = 0;
  std::string text;
};
NcuOutput run_ncu(const std::string& ncu, const std::vector<std::string>& program, const std::string& range,
                  int launches, double timeout_s);

// The same launches into a report file for Nsight Compute's GUI and `ncu -i`:
// `... --set full --import-source yes -f -o <report> program...` (ncu adds
// ".ncu-rep"): every section, and source counters (warp stalls sampled per
// SASS instruction). ncu replays each kernel some 40 times for it.
NcuOutput run_ncu_report(const std::string& ncu, const std::vector<std::string>& program, const std::string& range,
                         int launches, const std::string& report, double timeout_s);

// "Nsight Compute 2025.3.1.0": the last line of `ncu --version` (its
// "Version ..." line), or "Nsight Compute" when it prints none.
std::string ncu_version(const std::string& ncu);

// What ncu's output says went wrong, or "" when nothing did: no permission
// to read the performance counters (ERR_NVGPUCTRPERM), or no kernel matched.
std::string ncu_failure(const std::string& output);

}  // namespace evotune
