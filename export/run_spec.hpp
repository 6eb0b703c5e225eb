// A run's kernel spec, two ways: as the run stored it (the spec text, no
// sources: enough to describe and report the run) and loaded again from its
// built-in or file (with sources: what compiling needs).
#pragma once

#include "core/spec.hpp"
#include "store/store.hpp"

namespace evotune {

// The spec exactly as the run used it, parsed from the database; sources are
// left empty. Throws SpecError when the stored text no longer parses.
KernelSpec stored_run_spec(const RunInfo& run);
// The run's kernel loaded again by RunInfo::kernel_ref(), sources included.
// Throws UsageError or SpecError when it is gone or no longer loads; compare
// its content_hash() with run.spec_hash to know whether it changed.
KernelSpec load_run_spec(const RunInfo& run);

}  // namespace evotune
