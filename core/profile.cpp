#include "core/profile.hpp"

#include "core/strings.hpp"

namespace evotune {

namespace {

std::string top_stalls(const KernelProfile& p, size_t n) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < p.stalls.size() && i < n; ++i)
    parts.push_back(strfmt("%s %.2f", p.stalls[i].first.c_str(), p.stalls[i].second));
  return parts.empty() ? "no stall figures" : join(parts, ", ");
}

}  // namespace

std::string limiter(const KernelProfile& p) {
  const std::string figures =
      strfmt("tensor pipe %.0f%%, SM %.0f%%, DRAM %.0f%% of peak, L2 hit %.0f%%, occupancy %.0f%%", p.tensor_pct,
             p.sm_pct, p.dram_pct, p.l2_hit_pct, p.occupancy_pct);
  const std::string stalls = "; warps stalled per issued instruction: " + top_stalls(p, 3);
  if (p.tensor_pct >= 60) return "tensor-bound (" + figures + ")" + stalls;
  if (p.dram_pct >= 60) return "memory-bound (" + figures + ")" + stalls;
  if (p.sm_pct >= 60) return "compute-bound outside the tensor pipe (" + figures + ")" + stalls;
  return "latency-bound: no unit near its peak (" + figures + ")" + stalls;
}

}  // namespace evotune
