#include "core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/types.hpp"

namespace evotune {

namespace {

double sorted_median(const std::vector<double>& v) {
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return sorted_median(v);
}

void summarize_times(std::vector<double> us, Measurement& m) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  m.samples = static_cast<int>(n);
  m.p50_us = sorted_median(us);
  m.p90_us = us[std::min(n - 1, static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1)];
  m.min_us = us.front();
  m.mean_us = std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double x : us) var += (x - m.mean_us) * (x - m.mean_us);
  m.cv = n > 1 && m.mean_us > 0 ? std::sqrt(var / static_cast<double>(n - 1)) / m.mean_us : 0;
}

}  // namespace evotune
