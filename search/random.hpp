// Draws from std::mt19937_64 that give the same numbers with every standard
// library (the std:: distributions are implementation-defined), so a seed
// reproduces a run on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

namespace evotune {

// Uniform in [0, n), n > 0 (multiply-shift; bias below n / 2^64).
__extension__ typedef unsigned __int128 uint128_for_draws;
inline size_t uniform_index(std::mt19937_64& rng, size_t n) {
  return static_cast<size_t>((static_cast<uint128_for_draws>(rng()) * n) >> 64);
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform_unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

inline bool chance(std::mt19937_64& rng, double p) {
  return uniform_unit(rng) < p;
}

}  // namespace evotune
