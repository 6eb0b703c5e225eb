// PyTorch's attention as a baseline: python3 runs an embedded script
// (engine/torch_sdpa.py) that times scaled_dot_product_attention on one
// backend with evotune's timing method on the same GPU, and checks its
// output against fp32 attention on the same inputs. Used where PyTorch is
// what is installed; without python3 or torch the baseline is skipped.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/types.hpp"
#include "engine/plan.hpp"

namespace evotune {

struct TorchSdpaRequest {
  std::string name;                       // the baseline's, as the spec names it
  int problem = 0;                        // index into the run's problems
  int device = 0;                         // CUDA ordinal
  uint64_t seed = 1;                      // inputs: N(0,1) from this seed
  std::string dtype;                      // fp16 | bf16
  std::string backend;                    // cudnn | flash | efficient | math
  std::map<std::string, int64_t> values;  // b, h, hkv, s, skv, d, causal
  TimingOptions timing;
  SustainedTiming sustained;
  Tolerances tol;  // the problem's: max_abs and mean_abs decide "wrong"
};

// $EVOTUNE_PYTHON, else python3 on PATH; empty when there is none.
std::string locate_python();

// Never throws for torch's absence or refusal: that is the result's status
// (skipped), as is a missing python3; a script that fails or runs past
// timeout_s is "failed" with what it printed.
BaselineResult torch_sdpa_baseline(const TorchSdpaRequest& request, double timeout_s);

}  // namespace evotune
