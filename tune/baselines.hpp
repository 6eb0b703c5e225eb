// The baselines step, after the re-timing: the template's reference kernel
// and the vendor libraries its spec names ([[baseline]]) measured on every
// timed problem of the run, on the same GPU with the same timing method as
// the elites' final re-timing, and stored beside the run. A library that is
// not installed is recorded as skipped with the reason, never a failure.
#pragma once

#include <vector>

#include "core/types.hpp"
#include "store/store.hpp"
#include "tune/gpu_pool.hpp"
#include "tune/progress.hpp"

namespace evotune {

// The baselines `--baselines` selects, each result recorded as it comes.
std::vector<BaselineResult> measure_baselines(const TunePlan& plan, GpuPool& gpu, Store& store, int64_t run_id,
                                              Progress& progress);

// Whether `--baselines` (all, none, or names: "cudnn,reference") selects the
// baseline named `name` (a cuBLASLt top-N result goes with its base name).
bool baseline_selected(const std::string& selection, const std::string& name);

}  // namespace evotune
