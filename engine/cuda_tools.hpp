// Where the CUDA toolkit's command-line tools are (compute-sanitizer, ncu).
#pragma once

#include <string>

namespace evotune {

// The tool's path: the environment variable `env_var` when set (empty when
// that names no executable), else the first `name` found in PATH,
// $CUDA_HOME/bin, $CUDA_PATH/bin and /usr/local/cuda/bin; empty when none.
std::string locate_cuda_tool(const std::string& name, const char* env_var);

}  // namespace evotune
