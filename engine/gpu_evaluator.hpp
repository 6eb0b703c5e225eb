// The GPU side of one worker process: owns the problems' buffers and
// reference outputs and evaluates candidates on them (poison, launch, check
// the guards around every buffer, verify, check inputs untouched, time,
// verify again after the timed launches). Runs in `evotune worker`, never in the
// coordinator, because a faulting kernel poisons the whole CUDA context.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cuda_api.hpp"
#include "engine/plan.hpp"

namespace evotune {

// A device allocation with canary guard regions before and after the bytes
// a kernel may use (data() points past the first guard, 256-byte aligned).
struct GuardedBuffer {
  cuda::DeviceBuffer mem;
  size_t guard = 0;  // bytes on each side
  size_t bytes = 0;
  uint64_t salt = 0;  // the canary pattern's seed
  void* data() const { return static_cast<char*>(mem.get()) + guard; }
};

class GpuSession {
 public:
  // Selects the device, allocates and fills two draws of every problem's
  // buffers and runs the reference on each. Throws EngineError on failure.
  explicit GpuSession(const SetupRequest& req);
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  // Verifies the candidate on every problem, times the timed ones, then
  // verifies a launch made after the timed launches on a second draw of the
  // inputs (a kernel that keeps state between launches must be right on
  // every one, on any inputs: a stale counter or a result kept in scratch
  // would give the first draw's answer there). Never throws for a
  // candidate's failure: that is the reply's status. A reply with
  // worker_must_restart set leaves this session unusable.
  EvalReply evaluate(const EvalRequest& req);
  // Times a baseline on one problem's buffers (the reference kernel, or a
  // library's: several results when it offers several algorithms). Never
  // throws for the library's failure or absence: that is the status.
  std::vector<BaselineResult> baseline(const BaselineRequest& req);

 private:
  struct Launcher;
  // One draw of a problem's data: its buffers (inputs from one seed, the
  // outputs, the reference's outputs) and the reference launched over them.
  struct DataSet {
    std::map<std::string, GuardedBuffer> buffers;
    std::map<std::string, unsigned long long> checksums;  // inputs and reference outputs
    std::unique_ptr<Launcher> reference;
  };
  // Draw 0 serves the checks, the timing and the baselines; draw 1 only the
  // check after the timed launches.
  static constexpr size_t kDraws = 2;
  struct ProblemState {
    ProblemSetup setup;
    std::array<DataSet, kDraws> draws;
  };
  struct Candidate;

  GuardedBuffer allocate(size_t bytes, uint64_t salt);
  void fill(void* p, ElemType elem, int64_t count, InitKind init, double scale, double offset, uint64_t seed);
  void poison(void* p, ElemType elem, int64_t count);
  unsigned long long checksum(const GuardedBuffer& buf);
  // Why a guard of `buf` changed ("wrote 4 bytes past the end of ..."), or empty.
  std::string guard_damage(const GuardedBuffer& buf, const std::string& name);
  ErrorStats compare(const GuardedBuffer& out, ElemType elem, const GuardedBuffer& ref, int64_t count,
                     const Tolerances& tol);
  void sync(const char* what);

  // Allocates and fills one draw of a problem's buffers and runs the reference on them.
  DataSet draw_data(const ProblemSetup& ps, uint64_t seed_base);
  const BufferPlan& buffer_plan(size_t pi, const std::string& name) const;
  void poison_outputs(size_t pi, size_t draw = 0);
  // Every output of the problem against its reference; the elements compared.
  ErrorStats compare_outputs(size_t pi, int64_t& total_count, size_t draw = 0);
  Candidate load(const EvalRequest& req);
  ErrorStats verify_launch(size_t pi, Candidate& cand, bool after_timing);
  void time_problem(size_t pi, Candidate& cand, const EvalRequest& req, Measurement& m);
  // The timing method, for any launch (a candidate's, a baseline's): an
  // estimate, a warm-up, then launches each after an L2 flush between CUDA
  // events, until target_ms of kernel time; p50, p90, min, mean, cv. The
  // estimate launch is in the NVTX range `nvtx_range` where one is given.
  void time_series(const std::string& label, const std::function<void(cudaStream_t)>& launch,
                   const SustainedTiming& sustained, double abort_us, Measurement& m, const char* nvtx_range = nullptr);
  // One more launch of a measured baseline, alone in its NVTX range
  // (baseline_range), where the profile step's ncu finds it.
  void profiled_launch(const BaselineResult& r, const std::function<void(cudaStream_t)>& launch);
  BaselineResult reference_baseline(const BaselineRequest& req);
  std::vector<BaselineResult> cublaslt_baseline(const BaselineRequest& req);
  // Poisons the problem's outputs, launches once, compares with the reference.
  ErrorStats check_baseline(size_t pi, const std::function<void(cudaStream_t)>& launch, std::string& verdict_text);

  SetupRequest setup_;
  int device_ = 0;
  std::unique_ptr<cuda::Stream> stream_;
  cuda::Module support_;
  CUfunction fill_fn_ = nullptr, poison_fn_ = nullptr, compare_fn_ = nullptr, checksum_fn_ = nullptr;
  CUfunction guard_fill_fn_ = nullptr, guard_check_fn_ = nullptr;
  cuda::DeviceBuffer flush_;
  cuda::DeviceBuffer stats_;  // compare / checksum / guard accumulators
  std::vector<ProblemState> problems_;
  std::vector<cuda::Module> reference_modules_;
  long long smem_optin_ = 0;
  int num_sms_ = 132;
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
