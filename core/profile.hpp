// What Nsight Compute measured of one kernel launch, and what it says limits
// the kernel. The profile step (engine/ncu.hpp) fills it, the store keeps
// it, the report shows it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace evotune {

struct KernelProfile {
  std::string kernel;             // the kernel's name as ncu reports it
  double duration_us = 0;         // gpu__time_duration
  double sm_pct = 0;              // SM throughput, % of peak (sm__throughput)
  double tensor_pct = 0;          // tensor pipe (HMMA/HGMMA) busy, % of the active cycles' peak
  double occupancy_pct = 0;       // achieved occupancy: active warps, % of the SM's maximum
  double dram_pct = 0;            // DRAM throughput, % of peak
  double l2_hit_pct = 0;          // L2 sector hit rate, %
  double sm_clock_mhz = 0;        // SM clock during the launch
  int registers = 0;              // per thread
  long long smem_bytes = 0;       // per block, static and dynamic
  long long grid = 0, block = 0;  // CTAs, threads per CTA
  // Warp stall reasons (ncu's names, e.g. "long_scoreboard"), warps stalled
  // per issued instruction, largest first; "selected" (issuing) is not one.
  std::vector<std::pair<std::string, double>> stalls;
};

// One line on what limits the kernel, from its figures: tensor-bound
// (tensor pipe >= 60% busy), memory-bound (DRAM >= 60% of peak),
// compute-bound (SM >= 60%), else latency-bound with the stall reasons that
// dominate.
std::string limiter(const KernelProfile& p);

}  // namespace evotune
