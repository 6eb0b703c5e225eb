// The GPU side of one worker process: owns the problems' buffers and
// reference outputs and evaluates candidates on them (poison, launch, verify,
// check inputs untouched, time). Runs in `evotune worker`, never in the
// coordinator, because a faulting kernel poisons the whole CUDA context.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cuda_api.hpp"
#include "engine/plan.hpp"

namespace evotune {

class GpuSession {
 public:
  // Selects the device, allocates and fills every problem's buffers and runs
  // the reference once per problem. Throws EngineError on failure.
  explicit GpuSession(const SetupRequest& req);
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  // Never throws for a candidate's failure: that is the reply's status. A
  // reply with worker_must_restart set leaves this session unusable.
  EvalReply evaluate(const EvalRequest& req);

 private:
  struct ProblemState {
    ProblemSetup setup;
    std::map<std::string, cuda::DeviceBuffer> buffers;
    std::map<std::string, unsigned long long> checksums;  // inputs and reference outputs
  };
  struct Launcher;

  void fill(const cuda::DeviceBuffer& buf, ElemType elem, int64_t count, InitKind init, double scale, uint64_t seed);
  void poison(const cuda::DeviceBuffer& buf, ElemType elem, int64_t count);
  unsigned long long checksum(const cuda::DeviceBuffer& buf);
  ErrorStats compare(const cuda::DeviceBuffer& out, ElemType elem, const cuda::DeviceBuffer& ref, int64_t count,
                     const Tolerances& tol);
  void sync(const char* what);

  SetupRequest setup_;
  int device_ = 0;
  std::unique_ptr<cuda::Stream> stream_;
  cuda::Module support_;
  CUfunction fill_fn_ = nullptr, poison_fn_ = nullptr, compare_fn_ = nullptr, checksum_fn_ = nullptr;
  cuda::DeviceBuffer flush_;
  cuda::DeviceBuffer stats_;  // compare / checksum accumulators
  std::vector<ProblemState> problems_;
  long long smem_optin_ = 0;
  // When the last timing finished: a GPU kept busy needs only a short warm-up.
  std::optional<std::chrono::steady_clock::time_point> last_timed_;
};

// Initialises the driver and creates the device's primary context (what a
// GpuSession does first), so that it can happen ahead of the set-up.
void prewarm_context(int device);

// Applies the tolerances to verification errors: empty when they pass, else
// why not (for the trial's error text).
std::string verdict(const ErrorStats& e, const Tolerances& tol, int64_t count);

}  // namespace evotune
