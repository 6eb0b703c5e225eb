// Kernel templates: the built-in tunable kernels (gemm, sdpa_fwd, ...), each a
// folder with kernel.cu, reference.cu and spec.toml in the same format a user
// writes for their own kernel. Their files are embedded in the binary at build
// time (cmake/embed_files.cmake), so evotune needs no install tree.
#pragma once

#include <string>
#include <vector>

#include "core/spec.hpp"

namespace evotune {

// Names of the built-in kernels, in listing order.
std::vector<std::string> builtin_kernel_names();
// A built-in kernel by name, or a user's spec file by path. Throws UsageError
// for an unknown name / missing file, SpecError for a malformed spec.
KernelSpec load_kernel(const std::string& name_or_path);
// The text of an embedded file ("kernel_templates/gemm/kernel.cu"), or empty.
std::string embedded_file(const std::string& relpath);

}  // namespace evotune
