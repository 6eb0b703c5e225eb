// Launch plans: everything the GPU worker needs, already evaluated from the
// spec by the coordinator — buffers with their sizes and initialisation,
// launch geometry, typed argument values, tolerances. The worker never parses
// a spec, so it stays a small executor that can be killed and respawned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/spec.hpp"
#include "core/types.hpp"

namespace evotune {

// A buffer allocated once per problem and draw (inputs, outputs, reference outputs).
struct BufferPlan {
  std::string name;
  ElemType elem = ElemType::f32;  // concrete (never elem)
  int64_t count = 0;
  ArgRole role = ArgRole::in;
  InitKind init = InitKind::normal;
  double scale = 1.0;
  double offset = 0.0;  // added to normal and uniform values
  uint64_t salt = 0;    // mixed into the seed so each buffer differs
};

// A TMA tensor map to encode over one of the problem's buffers.
struct TensorMapPlan {
  std::string buffer;
  ElemType elem = ElemType::f16;
  std::vector<uint64_t> dims;           // elements, innermost first
  std::vector<uint64_t> strides_bytes;  // dims 1..rank-1
  std::vector<uint32_t> box;
  int swizzle = 0;         // bytes
  int l2_promotion = 128;  // bytes
  bool oob_nan = false;
  bool enabled = true;
};

// One kernel argument.
struct ArgPlan {
  enum class Kind { buffer, scratch, scalar, tmap } kind = Kind::scalar;
  TensorMapPlan tmap;  // Kind::tmap
  std::string buffer;  // Kind::buffer: a BufferPlan name of the problem
  int scratch = -1;    // Kind::scratch: index into LaunchPlan::scratch
  ScalarType type = ScalarType::i32;
  int64_t i = 0;  // integer scalars
  double f = 0;   // f32 scalars
};

// A scratch buffer allocated (zero-filled) for one trial: its contents carry
// over from one launch to the next, as they would in a product.
struct ScratchPlan {
  std::string name;
  ElemType elem = ElemType::f32;
  int64_t count = 0;
  InitKind init = InitKind::zero;
};

struct LaunchPlan {
  int cubin = 0;  // index into the request's cubins
  std::string entry;
  LaunchDims dims;
  std::vector<ArgPlan> args;
  std::vector<ScratchPlan> scratch;
};

// One problem as the worker sees it.
struct ProblemSetup {
  std::string label;                 // "M=4096,N=4096,K=4096 bf16"
  std::vector<BufferPlan> buffers;   // in + out buffers of the kernel
  LaunchPlan reference;              // `out` args point at "<name>.ref" (f32)
  std::vector<std::string> outputs;  // names of the out buffers to verify
  Tolerances tol;
  bool timed = true;  // false: a check shape, verified only
};

struct TimingOptions {
  // Warm-up: the timed loop itself (flushes included) for this much wall
  // time before sampling, so that every candidate is timed at the clocks its
  // own sustained load settles to. On an H200 a power-bound GEMM runs 6%
  // faster in 35 ms bursts than after ~150 ms of load, and its clocks recover
  // within 50 ms of idling; the search's short timings see boost clocks. 0
  // (the default, for search speed): the count-based warm-up below; the
  // tuner's final re-timing runs sustained (SustainedTiming) instead.
  double sustain_ms = 0;
  double warmup_ms = 25;  // launches before sampling, by time, when the GPU has been idle
  // While the GPU has been busy (the previous evaluation ended less than
  // busy_gap_ms ago) its clocks are up, and a short warm-up covers the new
  // module's first launches.
  double warmup_busy_ms = 3;
  double busy_gap_ms = 200;
  int min_samples = 10;
  int max_samples = 200;
  double target_ms = 100;           // stop sampling once kernel time summed reaches this
  bool flush_l2 = true;             // flush L2 before every timed launch
  double flush_bytes_factor = 2.0;  // flush buffer = factor × L2 size
};

struct SetupRequest {
  int device = 0;
  uint64_t seed = 1;
  // Canary regions before and after every buffer, checked after each
  // verification and after timing. Off under compute-sanitizer, whose
  // memcheck then sees each buffer as an allocation of its exact size.
  bool guard_buffers = true;
  TimingOptions timing;
  std::vector<std::string> cubins;  // support kernels [0] and references
  std::vector<ProblemSetup> problems;
};

struct SetupReply {
  bool ok = false;
  std::string error;
  double setup_ms = 0;
};

// Sustained timing (the tuner's final re-timing): the GPU is kept under this
// candidate's load, flushes included, for warmup_ms of wall time before
// sampling, whatever ran before, so that every elite is timed at the clocks
// its own power draw settles to, as a long benchmark or a product sees them;
// then it is sampled for target_ms of kernel time (at most max_samples).
struct SustainedTiming {
  double warmup_ms = 0;  // 0: the set-up's timing options apply
  double target_ms = 0;
  int max_samples = 0;
  bool on() const { return warmup_ms > 0; }
};

struct EvalRequest {
  std::vector<std::string> cubins;
  std::vector<LaunchPlan> launches;  // one per problem of the setup, same order
  std::vector<double> abort_us;      // per problem: stop timing once p50 exceeds this (0: never)
  SustainedTiming sustained;
};

struct EvalReply {
  TrialStatus status = TrialStatus::ok;
  std::string error;
  std::vector<Measurement> per_problem;  // verify errors for every problem, timing for timed ones
  double verify_ms = 0, bench_ms = 0;
  bool worker_must_restart = false;  // the context is poisoned
};

// A baseline the worker runs on one problem's buffers: the reference kernel
// ("reference") or a library it loads (engine/cublaslt.hpp). Timed as the
// candidates are, under `sustained` when on; its outputs are checked
// against the reference.
struct BaselineRequest {
  int problem = 0;
  std::string name;                            // as the spec names it
  std::string library;                         // "reference" or "cublaslt"
  std::map<std::string, std::string> buffers;  // the library's buffer keys → the problem's buffers
  std::map<std::string, int64_t> values;       // evaluated for this problem
  SustainedTiming sustained;
};

void to_json(nlohmann::json& j, const BaselineRequest& b);
void from_json(const nlohmann::json& j, BaselineRequest& b);
void to_json(nlohmann::json& j, const BufferPlan& b);
void from_json(const nlohmann::json& j, BufferPlan& b);
void to_json(nlohmann::json& j, const TensorMapPlan& t);
void from_json(const nlohmann::json& j, TensorMapPlan& t);
void to_json(nlohmann::json& j, const ArgPlan& a);
void from_json(const nlohmann::json& j, ArgPlan& a);
void to_json(nlohmann::json& j, const ScratchPlan& s);
void from_json(const nlohmann::json& j, ScratchPlan& s);
void to_json(nlohmann::json& j, const LaunchDims& d);
void from_json(const nlohmann::json& j, LaunchDims& d);
void to_json(nlohmann::json& j, const LaunchPlan& l);
void from_json(const nlohmann::json& j, LaunchPlan& l);
void to_json(nlohmann::json& j, const Tolerances& t);
void from_json(const nlohmann::json& j, Tolerances& t);
void to_json(nlohmann::json& j, const ProblemSetup& p);
void from_json(const nlohmann::json& j, ProblemSetup& p);
void to_json(nlohmann::json& j, const TimingOptions& t);
void from_json(const nlohmann::json& j, TimingOptions& t);
void to_json(nlohmann::json& j, const SustainedTiming& t);
void from_json(const nlohmann::json& j, SustainedTiming& t);
void to_json(nlohmann::json& j, const EvalReply& r);
void from_json(const nlohmann::json& j, EvalReply& r);

// Plans for one kernel. `problems` are the run's problems followed by the
// check shapes; `timed` marks which are timed.
class Planner {
 public:
  Planner(const KernelSpec& spec, const DeviceTraits& dev) : spec_(spec), dev_(dev) {}
  ProblemSetup problem_setup(const Problem& p, bool timed, int reference_cubin) const;
  LaunchPlan launch(const Config& c, const Problem& p, int cubin) const;

 private:
  ArgPlan scalar_arg(const ArgSpec& a, const Scope& scope) const;
  ArgPlan tmap_arg(const ArgSpec& a, const Scope& scope, Dtype dtype) const;
  const KernelSpec& spec_;
  DeviceTraits dev_;
};

}  // namespace evotune
