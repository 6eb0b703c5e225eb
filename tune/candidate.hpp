// Staging a config without a GPU: compile it for every problem of the run
// (one cubin per distinct set of defines: problems that differ only in
// runtime dimensions share one), gate it on resources per problem, and plan
// its launches. Also the reference kernels the GPU workers set up with.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "engine/compile_service.hpp"
#include "tune/evaluator.hpp"
#include "tune/plan.hpp"

namespace evotune {

class CandidateBuilder {
 public:
  // `smem_optin`: the device's shared memory per block (0: no device, only
  // the spec's gates apply).
  CandidateBuilder(const TunePlan& plan, CompileService& compiler, long long smem_optin);

  // A finished trial (compile error, resources rejected; in a compile-only
  // run, also one that passes), or a job for the GPU. Stops compiling when
  // `stop` is set (the trial is then a cancelled compile). A define or launch
  // geometry the spec cannot evaluate for this config throws SpecError.
  Staged stage(const Config& c, const std::atomic<bool>& stop) const;

 private:
  const TunePlan& plan_;
  CompileService& compiler_;
  long long smem_optin_;
};

// The reference's cubins, one per distinct set of defines, and for each
// problem the index of its own among them.
struct ReferenceCubins {
  std::vector<std::string> cubins;
  std::vector<int> of_problem;
};

// Throws SpecError with the compiler's log when the reference does not
// compile: that is the spec's fault, found before anything is run.
ReferenceCubins compile_references(const TunePlan& plan, CompileService& compiler);

}  // namespace evotune
