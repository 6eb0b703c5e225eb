// Device kernels evotune runs around every candidate: seeded random fill of
// inputs, NaN poisoning of outputs (a payload no arithmetic produces, so an
// unwritten element is told apart from a computed NaN), the comparison with
// the reference, checksums that catch a kernel writing into its inputs, and
// canary guard regions that catch one writing past a buffer's ends.
// Compiled with NVRTC for the device (and cached) like any candidate.
#pragma once

#include <string>

namespace evotune {

const char* support_kernels_source();
constexpr const char* kSupportKernelsName = "evotune_support.cu";

// Poison bit patterns, also used on the host to count unwritten elements.
constexpr unsigned short kPoisonF16 = 0xFE5A;
constexpr unsigned short kPoisonBF16 = 0xFFDA;
constexpr unsigned kPoisonF32 = 0xFFC0DEADu;

}  // namespace evotune
