#include "export/run_spec.hpp"

#include "kernel_templates/registry.hpp"

namespace evotune {

KernelSpec stored_run_spec(const RunInfo& run) {
  return parse_spec(run.spec_text, run.spec_origin, [](const std::string&) { return std::string(); });
}

KernelSpec load_run_spec(const RunInfo& run) {
  return load_kernel(run.kernel_ref());
}

}  // namespace evotune
