// The tuning session: evotune's heart. A run is a straight line of named
// steps over the resolved plan — open the run, search (propose, stage, run,
// record in order), put the elites under compute-sanitizer, re-time them,
// finish — with evaluation behind one interface (evaluator.hpp): GPU worker
// processes, a compile-only pool, or a replayed dataset.
//
//   tune/options.hpp    what a user asks (TuneOptions) and gets (TuneResult)
//   tune/plan.hpp       the options resolved once, checked before anything is recorded
//   tune/evaluator.hpp  where configs are evaluated; gpu_pool, compiling, replay
//   tune/candidate.hpp  compiling and gating one config
//   tune/search.hpp     the window of configs in flight; a free GPU runs the best-ranked staged one
//   tune/recorder.hpp   the run's record in the store
//   tune/elites.hpp     the sanitizer gate and the re-timing after the search
//   tune/progress.hpp   what the session reports as it goes
#pragma once

#include "tune/options.hpp"
#include "tune/progress.hpp"

namespace evotune {

// Runs (or resumes) one tuning run. Throws UsageError, SpecError, StoreError,
// NoDeviceError or EngineError for failures of the run itself (a run already
// recorded is then marked failed, its trials kept); a candidate's failure is
// a trial status.
TuneResult tune(const TuneOptions& options, Progress& progress);

}  // namespace evotune
