// A tuning run's plan: the user's options resolved once — the kernel and its
// problems, a resumed run's record and trials, the replay dataset, the GPUs
// or the target architecture, the sanitizer gate — and never changed after.
// Every check that can refuse a run happens here, before anything is recorded.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "core/types.hpp"
#include "engine/device_info.hpp"
#include "store/dataset.hpp"
#include "store/store.hpp"
#include "tune/options.hpp"

namespace evotune {

// Where configs are evaluated.
enum class Backend { gpu, replay, compile_only };

// How a GPU run uses compute-sanitizer.
struct SanitizePlan {
  std::string mode = "none";  // none | elites | all
  bool asked = false;         // --sanitize given: a sanitizer failure is an error, not a warning
  std::string path;           // compute-sanitizer
  std::string note;           // why the gate is off, for the run's header
};

struct TunePlan {
  TuneOptions options;  // with a resumed run's values adopted
  Backend backend = Backend::gpu;
  KernelSpec spec;
  std::vector<Problem> problems;      // the run's problems: timed
  std::vector<Problem> all_problems;  // the run's problems, then the check shapes (verified only)
  std::vector<bool> timed;            // per all_problems
  std::vector<Config> seeds;          // user configs to evaluate first (defaults filled in, each once)
  std::optional<RunInfo> resumed;
  std::vector<Trial> previous;  // the resumed run's trials
  std::shared_ptr<const Dataset> replay;
  std::vector<DeviceInfo> gpus;  // a GPU run's devices
  int slots = 1;                 // configs evaluated at once: GPUs, real or simulated
  int ranks = 1;                 // processes of the MPI job the run spans (1: this one)
  DeviceTraits dev;              // what the spec's expressions see
  DeviceRecord device;           // what the run records
  std::string arch;              // what candidates are compiled for
  SanitizePlan sanitize;
  unsigned compile_threads = 1;
  int window = 4;   // configs in flight: --window, else the most the search sizes it to (window.hpp)
  std::string exe;  // this binary, for worker processes

  int budget() const { return options.budget; }
  int spent() const;  // trials of a resumed run that spent budget
  bool gpu() const { return backend == Backend::gpu; }
};

// Throws UsageError, SpecError, StoreError or NoDeviceError: the run cannot
// be made as asked.
TunePlan resolve_plan(TuneOptions options);

// This executable's path (the default worker and the profile step's
// evaluator), or "evotune" where /proc does not tell.
std::string self_exe();

// Trials that spent budget (constraint rejections are free).
int evaluated(const std::vector<Trial>& trials);

}  // namespace evotune
