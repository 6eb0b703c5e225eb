// Store: every run and trial of evotune in one SQLite file (WAL mode), and
// nothing else — writing headers, JSON and reports from it is export/'s job.
// The schema is versioned with PRAGMA user_version and upgraded by forward
// migrations (schema.cpp); each trial is committed in its own transaction,
// together with the elite population it produced, so a kill at any moment
// loses at most the trial in flight. Users may query the file with the
// sqlite3 shell: docs/SCHEMA.md documents the tables and views. A run's trials
// also travel as a dataset file (dataset.hpp) that `run --replay` reads back.
// A Store is one connection: use it from one thread at a time (other
// processes may share the file).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/types.hpp"

struct sqlite3;

namespace evotune {

// Where and with what a run was made.
struct DeviceRecord {
  std::string name;  // "NVIDIA H200"
  std::string uuid;  // "GPU-..."
  int cc = 0;        // 90
  int num_sms = 0;
  int driver_version = 0;     // CUDA driver API version, e.g. 13000
  std::string driver_string;  // "580.159.04" when known
  int runtime_version = 0;    // cudart, e.g. 13000
  std::string nvrtc_version;  // "13.0"
  std::string arch;           // "sm_90a": what the kernels were compiled for
};

struct RunStats {
  int trials = 0;         // evaluated (budget spent)
  int invalid_draws = 0;  // configs the search drew and the constraints rejected
  double wall_s = 0;
  double compile_busy_s = 0;  // summed over compile threads
  double verify_s = 0, bench_s = 0, gpu_idle_s = 0;
  int compile_threads = 0;
  int cache_hits = 0;
};

struct RunInfo {
  int64_t id = 0;
  std::string kernel;       // spec name
  std::string spec_origin;  // "builtin" or a path
  std::string spec_hash;
  std::string spec_text;  // the spec as run (sources are hashed)
  std::vector<Problem> problems;
  std::string dtype;
  std::string strategy;  // evo | random | exhaustive | replay
  uint64_t seed = 0;
  int budget = 0;
  int elites_k = 0;
  std::string options_json;  // remaining options, as JSON
  DeviceRecord device;
  std::string evotune_version;
  std::string status;  // running | done | interrupted | failed
  std::string created_at, finished_at;
  bool compile_only = false;
  RunStats stats;
  std::optional<int64_t> default_trial_id;  // the template's default config
  std::optional<int64_t> best_trial_id;

  // What load_kernel takes to load this run's kernel again: the built-in's
  // name, or the spec file's path.
  std::string kernel_ref() const;
};

// One timed launch series of the final interleaved re-timing.
struct RetimeSample {
  int round = 0;
  int64_t trial_id = 0;
  int problem = 0;
  double p50_us = 0;
};

// A stored Nsight Compute profile of one trial, or one baseline, on one of
// its run's problems.
struct TrialProfile {
  int64_t trial_id = 0;  // 0 for a baseline's
  std::string baseline;  // the baseline's name (BaselineResult::name); empty for a trial's
  int problem = 0;
  KernelProfile profile;
  std::string tool;  // the profiler's version
  std::string created_at;
};

// Trials, newest schema. Trial.id and Trial.seq are assigned by the store.
class Store {
 public:
  enum class Mode { read_write, read_only };

  // Opens (and for read_write creates and migrates) the database at `path`.
  // Throws StoreError with a message a user can act on: unwritable directory,
  // a file that is not an SQLite database, a database of a newer evotune.
  // A new database appears whole (never empty or half made to other
  // processes); a read-only open in a directory the user cannot write reads
  // the file as it is when every commit is in it (no PATH-wal).
  static Store open(const std::string& path, Mode mode = Mode::read_write);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store();

  int schema_version() const;
  static int latest_schema_version();
  const std::string& path() const { return path_; }
  Mode mode() const { return mode_; }

  int64_t create_run(const RunInfo& run);  // returns the new id
  // Commits one trial, its measurements and the new elite population (trial
  // ids, best first) in one transaction. Fills t.id and t.seq (and t.run_id,
  // and t.created_at when empty). An id of 0 in elite_ids stands for the trial
  // being recorded, whose id is not known before. A config already stored in
  // the run throws StoreError and changes nothing.
  void record_trial(int64_t run_id, Trial& t, const std::vector<int64_t>& elite_ids);
  void set_default_trial(int64_t run_id, int64_t trial_id);
  // Stores the final re-timing in one transaction: every sample, each
  // re-timed trial's final_us, the elites in their new order (ids, best
  // first) and the run's best trial.
  void record_retime(int64_t run_id, const std::vector<RetimeSample>& samples,
                     const std::vector<std::pair<int64_t, double>>& final_us, const std::vector<int64_t>& elite_order);
  // The compute-sanitizer gate's verdicts: a trial the tools passed names
  // them; one they found a fault in gets the finding's status and report,
  // loses its fitness, and the run's elite population (ids, best first) is
  // replaced, in one transaction.
  void record_sanitized(int64_t trial_id, const std::string& tools);
  void record_sanitizer_finding(int64_t run_id, int64_t trial_id, TrialStatus status, const std::string& error,
                                const std::vector<int64_t>& elite_ids);
  // A baseline on one problem; replaces an earlier one of the same name.
  void record_baseline(int64_t run_id, const BaselineResult& b);
  // The run's baselines by problem and name (none in a database older than
  // the baselines).
  std::vector<BaselineResult> baselines(int64_t run_id) const;
  // A trial's or a baseline's profile on one problem; replaces an earlier
  // one of the same.
  void record_profile(int64_t run_id, const TrialProfile& p);
  void update_stats(int64_t run_id, const RunStats& stats);
  void finish_run(int64_t run_id, const std::string& status, const RunStats& stats);
  // Marks a run as running again (resume), with a new budget if given: stored
  // before the first trial, so an extension killed part-way stays on record.
  void reopen_run(int64_t run_id, std::optional<int> budget = std::nullopt);

  std::vector<RunInfo> runs() const;  // newest first
  std::optional<RunInfo> run(int64_t id) const;
  // Trials of a run in seq order, optionally of one status.
  std::vector<Trial> trials(int64_t run_id, std::optional<TrialStatus> status = std::nullopt) const;
  std::optional<Trial> trial(int64_t trial_id) const;
  // The stored elite population, best first.
  std::vector<Trial> elites(int64_t run_id) const;
  int64_t last_run_id() const;  // 0 when there are none
  // The run's profiles: the trials' in trial order, then the baselines' by
  // name, each by problem (none in a database older than the profiles).
  std::vector<TrialProfile> profiles(int64_t run_id) const;

 private:
  Store(sqlite3* db, std::string path);
  void require_writable(const char* what) const;
  sqlite3* db_ = nullptr;
  std::string path_;
  Mode mode_ = Mode::read_write;
  int version_ = 0;  // read-only opens of an older schema read it as it is
};

void to_json(nlohmann::json& j, const RunInfo& r);
void to_json(nlohmann::json& j, const DeviceRecord& d);
void to_json(nlohmann::json& j, const RunStats& s);
void from_json(const nlohmann::json& j, RunInfo& r);
void from_json(const nlohmann::json& j, DeviceRecord& d);
void from_json(const nlohmann::json& j, RunStats& s);

}  // namespace evotune
