// A GPU's peak arithmetic rate for a run's dtype, from NVIDIA's datasheets:
// what the report's "% of peak" divides by. Dense (no 2:4 sparsity) tensor
// math at the boost clock for fp16 and bf16 (fp32 accumulation); CUDA-core
// fp32 for fp32. Known models only: a GPU not in the table has no peak, and
// the report says so rather than guess.
#pragma once

#include <string>

namespace evotune {

struct Peak {
  double tflops = 0;  // 0: not known
  std::string what;   // "dense bf16 tensor, H100 SXM datasheet"
};

// `device_name` as CUDA reports it ("NVIDIA H100 80GB HBM3"), `dtype` a run's
// ("fp16", "bf16", "fp32").
Peak peak_tflops(const std::string& device_name, const std::string& dtype);

}  // namespace evotune
