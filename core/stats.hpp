// Summaries of timing samples, one definition for the timing loop, the
// final re-timing and the report.
#pragma once

#include <vector>

namespace evotune {

struct Measurement;

// The middle value (for an even count, the mean of the two middle ones); 0
// for no values.
double median(std::vector<double> v);

// Per-launch times in µs as a measurement: the count, p50 (the median), p90
// (the ceil(0.9 n)-th smallest), min, mean and the coefficient of variation
// (sample standard deviation over the mean; 0 for one sample). No samples
// leave m as it was.
void summarize_times(std::vector<double> us, Measurement& m);

}  // namespace evotune
