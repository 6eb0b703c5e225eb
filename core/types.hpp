// Core: the plain data every other folder shares — configs, problems, trials,
// element types (dtype.hpp), kernel specs and the expression language they
// are written in — and the helpers more than one folder needs: strings
// (strings.hpp), numbers as people read them (format.hpp) and summaries of
// timing samples (stats.hpp). Nothing here
// touches CUDA, SQLite or the file system beyond reading a spec file, so every
// other folder depends on core/ and on nothing else of the project's for these.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.hpp"

namespace evotune {

// A point of the search space: parameter name → integer value.
struct Config {
  std::map<std::string, int64_t> values;

  // "BLOCK_M=128,BLOCK_N=64,..." with names sorted; the identity of a config.
  std::string canonical() const;
  // FNV-1a 64 of canonical(): stable across runs and machines.
  uint64_t hash() const;
  // Parses canonical() form (whitespace around '=' and ',' allowed).
  static Config parse(const std::string& text);
  int64_t at(const std::string& name) const;
  bool operator==(const Config& o) const { return values == o.values; }
  bool operator<(const Config& o) const { return values < o.values; }
};

// The named dimensions of one call of a kernel plus the element type.
struct Problem {
  std::vector<std::pair<std::string, int64_t>> dims;  // in the spec's order
  Dtype dtype = Dtype::fp16;

  std::optional<int64_t> find(const std::string& name) const;
  int64_t at(const std::string& name) const;
  void set(const std::string& name, int64_t v);
  // "B=2,H=8,S=512,D=64" (dims only, spec order).
  std::string canonical() const;
};

enum class TrialStatus { ok, invalid, compile_error, resource_rejected, launch_error, crashed, timeout, incorrect };
std::string to_string(TrialStatus s);
TrialStatus parse_status(const std::string& s);  // throws UsageError
const std::vector<TrialStatus>& all_statuses();

// What the compiler reports about one compiled kernel.
struct Resources {
  int registers = 0;
  int smem_static = 0;   // bytes, from ptxas
  int smem_dynamic = 0;  // bytes, from the spec's launch geometry
  int spill_stores = 0;  // bytes
  int spill_loads = 0;   // bytes
  int stack_frame = 0;   // bytes of local memory per thread
  // ptxas's advisory number (C7512 -> 7512) where it serialised the
  // kernel's wgmma instructions (each waits for the one before: a
  // performance loss, not an error), else 0.
  int wgmma_serialized = 0;
  int spill_bytes() const { return spill_stores + spill_loads; }
  int smem_total() const { return smem_static + smem_dynamic; }
};

// Verification errors of one kernel output against the reference.
struct ErrorStats {
  double max_abs = 0, mean_abs = 0, bad_frac = 0, rel_l2 = 0;
  int64_t nan_count = 0;
  int64_t unwritten = 0;  // elements still holding the poison value
};

// Verification and timing of one config on one problem.
struct Measurement {
  int problem = 0;  // index into the run's problems
  double p50_us = 0, p90_us = 0, min_us = 0, mean_us = 0, cv = 0;
  int samples = 0;
  bool aborted_early = false;  // timing stopped because it was far slower than the elite
  ErrorStats err;
};

// A vendor library's kernel (or the template's reference kernel) measured on
// one problem of a run, with the candidates' timing method.
struct BaselineResult {
  int64_t id = 0, run_id = 0;
  int problem = 0;            // index into the run's problems
  std::string name;           // "cublaslt", "cublaslt-top8", "cudnn", "reference"
  std::string library;        // "cublaslt", "torch_sdpa", "reference"
  std::string status = "ok";  // ok | wrong (its output fails the tolerances) | skipped (not installed) | failed
  std::string reason;         // why not ok
  std::string detail;         // library version, algorithm
  Measurement m;              // timing, and errors against the reference
  bool ok() const { return status == "ok"; }
};

// One config evaluated on every problem of a run.
struct Trial {
  int64_t id = 0;
  int64_t run_id = 0;
  int seq = 0;  // 1-based order within the run
  Config config;
  TrialStatus status = TrialStatus::ok;
  std::string error;  // compiler log, launch error, verification failure...
  double compile_ms = 0, verify_ms = 0, bench_ms = 0;
  bool cache_hit = false;  // cubin came from the compile cache
  Resources res;
  std::vector<Measurement> per_problem;
  double fitness = 0;   // geometric mean of p50 over problems (µs); only for ok
  double final_us = 0;  // the same after the final interleaved re-timing; 0 if not re-timed
  int device = -1;      // GPU ordinal that measured it, -1 if none
  std::string host;     // the host whose GPU measured it (empty: none, or recorded before hosts were)
  std::string created_at;
  std::string sanitized;  // compute-sanitizer tools it passed ("memcheck,racecheck"), empty if none ran

  bool ok() const { return status == TrialStatus::ok; }
};

void to_json(nlohmann::json& j, const Config& c);
void from_json(const nlohmann::json& j, Config& c);
void to_json(nlohmann::json& j, const Problem& p);
void from_json(const nlohmann::json& j, Problem& p);
void to_json(nlohmann::json& j, const Resources& r);
void from_json(const nlohmann::json& j, Resources& r);
void to_json(nlohmann::json& j, const ErrorStats& e);
void from_json(const nlohmann::json& j, ErrorStats& e);
void to_json(nlohmann::json& j, const Measurement& m);
void from_json(const nlohmann::json& j, Measurement& m);
void to_json(nlohmann::json& j, const BaselineResult& b);
void from_json(const nlohmann::json& j, BaselineResult& b);
void to_json(nlohmann::json& j, const Trial& t);
void from_json(const nlohmann::json& j, Trial& t);

// Geometric mean of positive values; 0 for an empty list.
double geomean(const std::vector<double>& xs);

// One baseline over a run's problems: the geomean of its p50s (0 unless it
// was measured ok on every problem) and its results by problem.
struct BaselineSummary {
  std::string name, library, detail;
  double us = 0;
  std::vector<const BaselineResult*> per_problem;  // null where not measured
  // The first result that is not ok (its status and reason), or null.
  const BaselineResult* not_ok() const;
};
// In the order first measured.
std::vector<BaselineSummary> summarize_baselines(const std::vector<BaselineResult>& results, size_t problems);
// A trial's time as the views show it (its re-timed geomean, else its
// fitness) over the baseline's: > 1 when the trial is faster; 0 for none.
double speedup_over(const Trial& t, const BaselineSummary& b);

}  // namespace evotune
