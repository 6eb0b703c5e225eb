// Timing summaries: the numbers every trial's p50 and the final ranking rest on.
#include <cmath>

#include "core/stats.hpp"
#include "core/types.hpp"
#include "tests/catch.hpp"

using namespace evotune;

TEST_CASE("median: the middle value, the mean of the two middle ones for an even count, 0 for none", "[stats]") {
  CHECK(median({}) == 0);
  CHECK(median({7}) == 7);
  CHECK(median({9, 1, 5}) == 5);
  CHECK(median({4, 1, 3, 2}) == 2.5);
}

TEST_CASE("summarize_times: p50, p90, min, mean and cv of unsorted samples", "[stats]") {
  // 1..10 µs, shuffled: p50 5.5, p90 the 9th smallest, mean 5.5,
  // sample standard deviation sqrt(55/6).
  Measurement m;
  summarize_times({10, 3, 7, 1, 9, 2, 8, 4, 6, 5}, m);
  CHECK(m.samples == 10);
  CHECK(m.p50_us == 5.5);
  CHECK(m.p90_us == 9);
  CHECK(m.min_us == 1);
  CHECK(m.mean_us == 5.5);
  CHECK(m.cv == Approx(std::sqrt(55.0 / 6.0) / 5.5));

  // Odd count: p90 of 5 samples is the 5th smallest (ceil(4.5)).
  Measurement o;
  summarize_times({20, 10, 30, 50, 40}, o);
  CHECK(o.p50_us == 30);
  CHECK(o.p90_us == 50);
  CHECK(o.samples == 5);

  // One sample: every statistic is that sample, no spread.
  Measurement one;
  summarize_times({12.5}, one);
  CHECK(one.p50_us == 12.5);
  CHECK(one.p90_us == 12.5);
  CHECK(one.cv == 0);

  // None: the measurement is left as it was.
  Measurement none;
  none.p50_us = 3;
  summarize_times({}, none);
  CHECK(none.p50_us == 3);
  CHECK(none.samples == 0);
}
