// What happens to the elites after the search, on a real GPU: each runs once
// under compute-sanitizer (a finding drops it and the next one moves up),
// then the survivors are re-timed interleaved, each under its own sustained
// load, and re-ranked, so that noise does not crown a winner.
#pragma once

#include "engine/sanitizer.hpp"
#include "tune/gpu_pool.hpp"
#include "tune/plan.hpp"
#include "tune/progress.hpp"
#include "tune/recorder.hpp"

namespace evotune {

// Rounds until every elite has passed the gate; each round checks all the
// elites not checked yet at once. A sanitizer that cannot run ends the gate
// with a warning, or throws EngineError when --sanitize asked for it.
void sanitize_elites(const TunePlan& plan, GpuPool& gpu, const SanitizerGate& gate, RunRecorder& recorder,
                     Progress& progress);

// --retime rounds over the elites (at least two), recorded with the new order.
void retime_elites(const TunePlan& plan, GpuPool& gpu, RunRecorder& recorder, Store& store, Progress& progress);

}  // namespace evotune
