#include "store/store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "store/schema.hpp"

namespace evotune {

namespace {

namespace fs = std::filesystem;

// Versions this build reads without migrating (read-only opens of old files).
constexpr int kOldestReadable = 1;

// Runs `f`, prefixing any SQLite error with the database path and the action.
template <class F>
auto guarded(const std::string& path, const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const sql::SqlError& e) {
    throw sql::SqlError(path + ": " + what + ": " + e.what(), e.code);
  }
}

std::string not_evotune(const std::string& path, const std::string& why) {
  return path + " is not an evotune database (" + why + ")";
}

// Refuses anything that is not an SQLite file before SQLite sees it, so a
// mistyped --db pointing at a source file is never touched.
void check_sqlite_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StoreError("cannot read " + path + ": " + std::strerror(errno));
  char head[16] = {};
  in.read(head, sizeof head);
  std::streamsize n = in.gcount();
  if (n == 0) return;  // an empty file is an empty database to SQLite
  static const char kMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
  if (n < static_cast<std::streamsize>(sizeof head) || std::memcmp(head, kMagic, sizeof head) != 0)
    throw StoreError(not_evotune(path, "file is not a database"));
}

// Whether the file is an SQLite database in WAL mode (header bytes 18-19).
bool wal_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[20] = {};
  return in.read(head, sizeof head) && head[18] == 2 && head[19] == 2;
}

std::string unreadable_wal(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return "cannot read " + path + ": its write-ahead log " + path +
         "-wal holds commits that are not in the file yet, and SQLite cannot create " + path + "-shm in " +
         dir.string() + " to read them (the directory is not writable). Copy " + path + " and " + path +
         "-wal together to a writable directory and read the copy, or, where the directory is writable, run "
         "`sqlite3 " +
         path + " 'PRAGMA wal_checkpoint(TRUNCATE)'` to move the log into the file";
}

// Creates the database at `path` whole: the schema is built in a file of its
// own beside it, which is then linked to `path` (a link, unlike a rename,
// never replaces a file). Another process opening `path` meanwhile finds no
// file or a database at the latest schema, never an empty file or part of a
// schema; when two processes create `path` at once, one file wins and both
// use it.
void create_database(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (!fs::exists(st))
    throw StoreError("cannot create database " + path + ": directory " + dir.string() + " does not exist");
  if (!fs::is_directory(st))
    throw StoreError("cannot create database " + path + ": " + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw StoreError("cannot create database " + path + ": directory " + dir.string() + " is not writable (" +
                     std::strerror(errno) + ")");
  // access() says yes to root everywhere; creating the file says what the
  // file system thinks (SQLite's own error would report its read-only retry).
  std::string tmp;
  for (int i = 0;; ++i) {
    tmp = path + ".new-" + std::to_string(::getpid()) + "-" + std::to_string(i);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    if (errno != EEXIST) throw StoreError("cannot create database " + path + ": " + std::strerror(errno));
  }
  struct Remove {
    const std::string& tmp;
    ~Remove() {
      for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((tmp + suffix).c_str());
    }
  } remove{tmp};
  try {
    sql::Db db = sql::open(tmp, false, false);
    schema::configure_read_write(db.get());
    schema::migrate(db.get(), schema::latest_version());
    // Every commit into the file itself, which is all that is linked.
    sql::exec(db.get(), "PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing");
    int rc = sqlite3_close(db.release());
    if (rc != SQLITE_OK) throw StoreError(sqlite3_errstr(rc));
  } catch (const StoreError& e) {
    throw StoreError("cannot create database " + path + " (building it in " + tmp + "): " + e.what());
  }
  if (::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST) return;
  const int link_errno = errno;
  // File systems without hard links (FAT) can still rename without replacing.
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0 || errno == EEXIST) return;
  throw StoreError("cannot create database " + path + ": " + std::strerror(link_errno));
}

void check_can_write(const std::string& path) {
  if (::access(path.c_str(), W_OK) != 0)
    throw StoreError("cannot open database " + path + " for writing: " + std::strerror(errno) +
                     " (commands that only read it, such as `evotune runs`, still work)");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  // WAL mode keeps PATH-wal and PATH-shm next to the database.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw StoreError("cannot open database " + path + " for writing: directory " + dir.string() + " is not writable (" +
                     std::strerror(errno) + "), and SQLite keeps its write-ahead log there");
}

std::string shapes_of(const std::vector<Problem>& problems) {
  std::vector<std::string> parts;
  for (const auto& p : problems) parts.push_back(p.canonical());
  return join(parts, "; ");
}

bool valid_run_status(const std::string& s) {
  return s == "running" || s == "done" || s == "interrupted" || s == "failed";
}

// Column lists per schema version: read-only opens of a version-1 file read
// the columns version 2 added as their defaults.
std::string run_columns(int version) {
  std::string cols =
      "id, kernel, spec_origin, spec_hash, spec_text, problems_json, dtype, strategy, seed, budget, elites_k, "
      "options_json, device_name, device_uuid, device_cc, device_num_sms, driver_version, driver_string, "
      "runtime_version, nvrtc_version, arch, evotune_version, status, created_at, finished_at, compile_only, "
      "trials_evaluated, invalid_draws, wall_s, ";
  cols += version >= 2 ? "compile_busy_s, verify_s, bench_s, gpu_idle_s, compile_threads, cache_hits, "
                       : "0, 0, 0, 0, 0, 0, ";
  cols += "default_trial_id, best_trial_id";
  return cols;
}

RunInfo read_run(const sql::Stmt& st) {
  RunInfo r;
  int c = 0;
  r.id = st.i64(c++);
  r.kernel = st.text(c++);
  r.spec_origin = st.text(c++);
  r.spec_hash = st.text(c++);
  r.spec_text = st.text(c++);
  std::string problems = st.text(c++);
  try {
    r.problems = nlohmann::json::parse(problems).get<std::vector<Problem>>();
  } catch (const std::exception& e) {
    throw StoreError("run " + std::to_string(r.id) + " has malformed problems_json: " + e.what());
  }
  r.dtype = st.text(c++);
  r.strategy = st.text(c++);
  r.seed = static_cast<uint64_t>(st.i64(c++));  // stored as its int64 bit pattern
  r.budget = st.i32(c++);
  r.elites_k = st.i32(c++);
  r.options_json = st.text(c++);
  r.device.name = st.text(c++);
  r.device.uuid = st.text(c++);
  r.device.cc = st.i32(c++);
  r.device.num_sms = st.i32(c++);
  r.device.driver_version = st.i32(c++);
  r.device.driver_string = st.text(c++);
  r.device.runtime_version = st.i32(c++);
  r.device.nvrtc_version = st.text(c++);
  r.device.arch = st.text(c++);
  r.evotune_version = st.text(c++);
  r.status = st.text(c++);
  r.created_at = st.text(c++);
  r.finished_at = st.text(c++);
  r.compile_only = st.i64(c++) != 0;
  r.stats.trials = st.i32(c++);
  r.stats.invalid_draws = st.i32(c++);
  r.stats.wall_s = st.real(c++);
  r.stats.compile_busy_s = st.real(c++);
  r.stats.verify_s = st.real(c++);
  r.stats.bench_s = st.real(c++);
  r.stats.gpu_idle_s = st.real(c++);
  r.stats.compile_threads = st.i32(c++);
  r.stats.cache_hits = st.i32(c++);
  r.default_trial_id = st.opt_i64(c++);
  r.best_trial_id = st.opt_i64(c++);
  return r;
}

std::string trial_columns(int version) {
  std::string cols =
      "t.id, t.run_id, t.seq, t.config, t.status, t.error, t.compile_ms, t.verify_ms, t.bench_ms, t.registers, "
      "t.smem_static, t.smem_dynamic, t.spill_stores, t.spill_loads, t.stack_frame, t.fitness, t.created_at, ";
  cols += version >= 2 ? "t.device, t.cache_hit, " : "NULL, 0, ";
  cols += version >= 3 ? "t.final_us, " : "NULL, ";
  cols += version >= 4 ? "t.sanitized, " : "NULL, ";
  cols += version >= 8 ? "t.host, " : "NULL, ";
  cols += version >= 9 ? "t.wgmma_serialized" : "0";
  return cols;
}

Trial read_trial(const sql::Stmt& st) {
  Trial t;
  int c = 0;
  t.id = st.i64(c++);
  t.run_id = st.i64(c++);
  t.seq = st.i32(c++);
  t.config = Config::parse(st.text(c++));
  t.status = parse_status(st.text(c++));
  t.error = st.text(c++);
  t.compile_ms = st.real_or_nan(c++);
  t.verify_ms = st.real_or_nan(c++);
  t.bench_ms = st.real_or_nan(c++);
  t.res.registers = st.i32(c++);
  t.res.smem_static = st.i32(c++);
  t.res.smem_dynamic = st.i32(c++);
  t.res.spill_stores = st.i32(c++);
  t.res.spill_loads = st.i32(c++);
  t.res.stack_frame = st.i32(c++);
  t.fitness = st.real(c++);  // NULL (not ok) reads as 0
  t.created_at = st.text(c++);
  t.device = st.is_null(c) ? -1 : st.i32(c);
  ++c;
  t.cache_hit = st.i64(c++) != 0;
  t.final_us = st.real(c++);  // NULL (not re-timed) reads as 0
  t.sanitized = st.is_null(c) ? std::string() : st.text(c);
  ++c;
  t.host = st.is_null(c) ? std::string() : st.text(c);
  ++c;
  t.res.wgmma_serialized = st.i32(c++);
  return t;
}

const char* const kMeasurementColumns =
    "m.trial_id, m.problem, m.p50_us, m.p90_us, m.min_us, m.mean_us, m.cv, m.samples, m.aborted_early, "
    "m.max_abs, m.mean_abs, m.bad_frac, m.rel_l2, m.nan_count, m.unwritten";

Measurement read_measurement(const sql::Stmt& st) {
  Measurement m;
  int c = 1;  // column 0 is the trial id
  m.problem = st.i32(c++);
  m.p50_us = st.real_or_nan(c++);
  m.p90_us = st.real_or_nan(c++);
  m.min_us = st.real_or_nan(c++);
  m.mean_us = st.real_or_nan(c++);
  m.cv = st.real_or_nan(c++);
  m.samples = st.i32(c++);
  m.aborted_early = st.i64(c++) != 0;
  m.err.max_abs = st.real_or_nan(c++);
  m.err.mean_abs = st.real_or_nan(c++);
  m.err.bad_frac = st.real_or_nan(c++);
  m.err.rel_l2 = st.real_or_nan(c++);
  m.err.nan_count = st.i64(c++);
  m.err.unwritten = st.i64(c++);
  return m;
}

// Reads the trials a query selects (trial columns first) and attaches their
// measurements from a second query over the same trials (trial id first).
std::vector<Trial> load_trials(sql::Stmt& trials_q, sql::Stmt& meas_q) {
  std::vector<Trial> out;
  std::map<int64_t, size_t> index;
  while (trials_q.step()) {
    out.push_back(read_trial(trials_q));
    index[out.back().id] = out.size() - 1;
  }
  while (meas_q.step()) {
    auto it = index.find(meas_q.i64(0));
    if (it != index.end()) out[it->second].per_problem.push_back(read_measurement(meas_q));
  }
  return out;
}

void bind_stats(sql::Stmt& st, int first, const RunStats& s) {
  st.bind_int(first, s.trials)
      .bind_int(first + 1, s.invalid_draws)
      .bind_real(first + 2, s.wall_s)
      .bind_real(first + 3, s.compile_busy_s)
      .bind_real(first + 4, s.verify_s)
      .bind_real(first + 5, s.bench_s)
      .bind_real(first + 6, s.gpu_idle_s)
      .bind_int(first + 7, s.compile_threads)
      .bind_int(first + 8, s.cache_hits);
}

const char* const kStatsAssignments =
    "trials_evaluated = ?1, invalid_draws = ?2, wall_s = ?3, compile_busy_s = ?4, verify_s = ?5, bench_s = ?6, "
    "gpu_idle_s = ?7, compile_threads = ?8, cache_hits = ?9";

}  // namespace

std::string RunInfo::kernel_ref() const {
  return spec_origin == "builtin" ? kernel : spec_origin;
}

// ------------------------------------------------------------------ open

Store::Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

Store::Store(Store&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)), mode_(o.mode_), version_(o.version_) {}

Store& Store::operator=(Store&& o) noexcept {
  if (this != &o) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
    mode_ = o.mode_;
    version_ = o.version_;
  }
  return *this;
}

Store::~Store() {
  sqlite3_close_v2(db_);
}

namespace {

// The file at PATH is there (created empty for a writer), an SQLite file,
// and, for a writer, writable.
void prepare_file(const std::string& path, bool ro) {
  if (path.empty()) throw StoreError("no database path given");
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (fs::is_directory(st)) throw StoreError(path + " is a directory, not a database file");
  if (!fs::exists(st)) {
    if (ro) throw StoreError("no database at " + path);
    create_database(path);
  }
  check_sqlite_header(path);
  if (!ro) check_can_write(path);
}

// What the file's schema says, read in one transaction so that the version
// and the tables agree.
struct SchemaFacts {
  int version = 0;
  std::vector<std::string> tables;
};

SchemaFacts read_schema(sqlite3* db) {
  sqlite3_busy_timeout(db, 10000);
  sql::exec(db, "BEGIN", "reading the schema");
  SchemaFacts f{schema::user_version(db), schema::user_tables(db)};
  sql::exec(db, "COMMIT", "reading the schema");
  return f;
}

// read_schema, where a reader that cannot create PATH-shm (a directory it
// cannot write) falls back to reading the file as it is when no log holds
// commits the file lacks; SQLite's errors become ones that name the file.
SchemaFacts read_schema_of(sql::Db& db, const std::string& path, bool ro) {
  try {
    try {
      return read_schema(db.get());
    } catch (const sql::SqlError& e) {
      // A WAL database is read through PATH-shm (and PATH-wal), which a
      // reader creates when they are missing; in a directory it cannot write
      // SQLite says "attempt to write a readonly database" or "unable to open".
      const int primary = e.code & 0xff;
      if (!ro || (primary != SQLITE_READONLY && primary != SQLITE_CANTOPEN) || !wal_format(path)) throw;
      std::error_code wal_ec;
      const auto wal_size = fs::file_size(path + "-wal", wal_ec);
      if (!wal_ec && wal_size > 0) throw StoreError(unreadable_wal(path));
      // No log: every commit is in the file, which is read as it is.
      db = sql::open_immutable(path);
      return read_schema(db.get());
    }
  } catch (const sql::SqlError& e) {
    int primary = e.code & 0xff;
    if (primary == SQLITE_NOTADB) throw StoreError(not_evotune(path, "file is not a database"));
    if (primary == SQLITE_CORRUPT) throw StoreError(path + " is corrupt: " + e.what());
    throw StoreError("cannot read " + path + ": " + e.what());
  }
}

// The schema is evotune's (or an empty database) and not a newer evotune's.
void check_schema_is_ours(const std::string& path, const SchemaFacts& f) {
  if (f.version == 0 && !f.tables.empty())
    throw StoreError(path + " is an SQLite database of another program (tables: " + join(f.tables, ", ") +
                     "); evotune will not add its tables to it: choose another file with --db");
  if (f.version > 0 && std::find(f.tables.begin(), f.tables.end(), "runs") == f.tables.end())
    throw StoreError(not_evotune(path, "schema version " + std::to_string(f.version) + " but no runs table"));
  if (f.version > schema::latest_version())
    throw StoreError(path + " was created by a newer evotune (schema " + std::to_string(f.version) + " > " +
                     std::to_string(schema::latest_version()) + "); use that version or a newer one");
}

// A reader reads a schema as it is: one with data, not older than it reads.
int check_readable(const std::string& path, int version) {
  if (version == 0)
    throw StoreError(path +
                     " holds no evotune data yet (an empty database); run a write command such as "
                     "`evotune run` on it first");
  if (version < kOldestReadable)
    throw StoreError(path + " uses schema " + std::to_string(version) +
                     ", which this evotune reads only after upgrading it; run a write command such as "
                     "`evotune run` on it first");
  return version;
}

// A writer brings the schema to the latest version (forward migrations).
int upgrade(sqlite3* db, const std::string& path) {
  try {
    schema::configure_read_write(db);
    schema::migrate(db, schema::latest_version());
  } catch (const StoreError& e) {
    throw StoreError(path + ": " + e.what());
  }
  return schema::latest_version();
}

}  // namespace

Store Store::open(const std::string& path, Mode mode) {
  const bool ro = mode == Mode::read_only;
  prepare_file(path, ro);
  sql::Db db = sql::open(path, ro, false);
  const SchemaFacts facts = read_schema_of(db, path, ro);
  check_schema_is_ours(path, facts);
  const int version = ro ? check_readable(path, facts.version) : upgrade(db.get(), path);
  Store s(db.release(), path);
  s.mode_ = mode;
  s.version_ = version;
  return s;
}

int Store::schema_version() const {
  return version_;
}

int Store::latest_schema_version() {
  return schema::latest_version();
}

void Store::require_writable(const char* what) const {
  if (mode_ == Mode::read_only)
    throw StoreError("cannot " + std::string(what) + ": " + path_ + " was opened read-only");
}

// ------------------------------------------------------------------ writes

int64_t Store::create_run(const RunInfo& run) {
  require_writable("create a run");
  std::string status = run.status.empty() ? "running" : run.status;
  if (!valid_run_status(status)) throw StoreError("invalid run status '" + status + "'");
  return guarded(path_, "creating a run", [&] {
    sql::Stmt st(db_,
                 "INSERT INTO runs (kernel, spec_origin, spec_hash, spec_text, problems_json, shapes, dtype, strategy, "
                 "seed, budget, elites_k, options_json, device_name, device_uuid, device_cc, device_num_sms, "
                 "driver_version, driver_string, runtime_version, nvrtc_version, arch, evotune_version, status, "
                 "created_at, finished_at, compile_only, trials_evaluated, invalid_draws, wall_s, compile_busy_s, "
                 "verify_s, bench_s, gpu_idle_s, compile_threads, cache_hits, default_trial_id, best_trial_id) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
                 "?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37)");
    st.bind_text(1, run.kernel)
        .bind_text(2, run.spec_origin)
        .bind_text(3, run.spec_hash)
        .bind_text(4, run.spec_text)
        .bind_text(5, nlohmann::json(run.problems).dump())
        .bind_text(6, shapes_of(run.problems))
        .bind_text(7, run.dtype)
        .bind_text(8, run.strategy)
        .bind_int(9, static_cast<int64_t>(run.seed))
        .bind_int(10, run.budget)
        .bind_int(11, run.elites_k)
        .bind_text(12, run.options_json.empty() ? "{}" : run.options_json)
        .bind_text(13, run.device.name)
        .bind_text(14, run.device.uuid)
        .bind_int(15, run.device.cc)
        .bind_int(16, run.device.num_sms)
        .bind_int(17, run.device.driver_version)
        .bind_text(18, run.device.driver_string)
        .bind_int(19, run.device.runtime_version)
        .bind_text(20, run.device.nvrtc_version)
        .bind_text(21, run.device.arch)
        .bind_text(22, run.evotune_version)
        .bind_text(23, status)
        .bind_text(24, run.created_at.empty() ? utc_now_iso() : run.created_at);
    if (run.finished_at.empty())
      st.bind_null(25);
    else
      st.bind_text(25, run.finished_at);
    st.bind_int(26, run.compile_only ? 1 : 0);
    bind_stats(st, 27, run.stats);
    st.bind_opt(36, run.default_trial_id).bind_opt(37, run.best_trial_id);
    st.run();
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  });
}

namespace {

// Replaces a run's elite population (trial ids, best first) and points the
// run's best trial at the first elite, or at its best ok trial when there
// are none. Inside the caller's transaction.
void set_elites(sqlite3* db, int64_t run_id, const std::vector<int64_t>& ids) {
  sql::Stmt(db, "DELETE FROM elites WHERE run_id = ?1").bind_int(1, run_id).run();
  // The elite must be a trial of this run; the SELECT makes that part of the insert.
  sql::Stmt ins(
      db, "INSERT INTO elites (run_id, rank, trial_id) SELECT ?1, ?2, id FROM trials WHERE id = ?3 AND run_id = ?1");
  int rank = 0;
  for (int64_t tid : ids) {
    ins.reset();
    ins.bind_int(1, run_id).bind_int(2, ++rank).bind_int(3, tid);
    ins.run();
    if (sqlite3_changes(db) != 1)
      throw StoreError("elite " + std::to_string(tid) + " is not a trial of run " + std::to_string(run_id));
  }
  std::optional<int64_t> best;
  if (!ids.empty()) {
    best = ids.front();
  } else {
    sql::Stmt q(db,
                "SELECT id FROM trials WHERE run_id = ?1 AND status = 'ok' AND fitness IS NOT NULL "
                "ORDER BY fitness, seq LIMIT 1");
    if (q.bind_int(1, run_id).step()) best = q.i64(0);
  }
  sql::Stmt(db, "UPDATE runs SET best_trial_id = ?2 WHERE id = ?1").bind_int(1, run_id).bind_opt(2, best).run();
}

// The place of a new trial of run `run_id` (1 + the run's last), once the run
// is known to exist and not to hold the config yet (a config is stored once
// per run). Inside the caller's transaction.
int next_trial_seq(sqlite3* db, const std::string& path, int64_t run_id, const std::string& hash,
                   const std::string& canonical) {
  {
    sql::Stmt q(db, "SELECT 1 FROM runs WHERE id = ?1");
    if (!q.bind_int(1, run_id).step()) throw StoreError("no run " + std::to_string(run_id) + " in " + path);
  }
  {
    sql::Stmt q(db, "SELECT seq FROM trials WHERE run_id = ?1 AND config_hash = ?2");
    if (q.bind_int(1, run_id).bind_text(2, hash).step())
      throw StoreError("config " + canonical + " is already trial #" + std::to_string(q.i64(0)) + " of run " +
                       std::to_string(run_id) + " in " + path + " (a config is stored once per run)");
  }
  sql::Stmt q(db, "SELECT COALESCE(MAX(seq), 0) + 1 FROM trials WHERE run_id = ?1");
  q.bind_int(1, run_id).step();
  return q.i32(0);
}

// Text, or NULL for an empty one.
sql::Stmt& bind_text_or_null(sql::Stmt& st, int i, const std::string& v) {
  return v.empty() ? st.bind_null(i) : st.bind_text(i, v);
}

// A trial's row; returns its id. Inside the caller's transaction.
int64_t insert_trial(sqlite3* db, int64_t run_id, int seq, const Trial& t, const std::string& canonical,
                     const std::string& hash, const std::string& created_at) {
  sql::Stmt ins(db,
                "INSERT INTO trials (run_id, seq, config, config_hash, config_json, status, error, compile_ms, "
                "verify_ms, bench_ms, registers, smem_static, smem_dynamic, spill_stores, spill_loads, "
                "stack_frame, fitness, created_at, device, cache_hit, sanitized, host, wgmma_serialized) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
                "?21, ?22, ?23)");
  ins.bind_int(1, run_id)
      .bind_int(2, seq)
      .bind_text(3, canonical)
      .bind_text(4, hash)
      .bind_text(5, nlohmann::json(t.config).dump())
      .bind_text(6, to_string(t.status))
      .bind_text(7, t.error)
      .bind_real(8, t.compile_ms)
      .bind_real(9, t.verify_ms)
      .bind_real(10, t.bench_ms)
      .bind_int(11, t.res.registers)
      .bind_int(12, t.res.smem_static)
      .bind_int(13, t.res.smem_dynamic)
      .bind_int(14, t.res.spill_stores)
      .bind_int(15, t.res.spill_loads)
      .bind_int(16, t.res.stack_frame);
  if (t.ok())
    ins.bind_real(17, t.fitness);
  else
    ins.bind_null(17);  // fitness means nothing for a failed trial
  ins.bind_text(18, created_at)
      .bind_opt(19, t.device >= 0 ? std::optional<int64_t>(t.device) : std::nullopt)
      .bind_int(20, t.cache_hit ? 1 : 0);
  bind_text_or_null(ins, 21, t.sanitized);
  bind_text_or_null(ins, 22, t.host);
  ins.bind_int(23, t.res.wgmma_serialized);
  ins.run();
  return sqlite3_last_insert_rowid(db);
}

// A trial's measurements, one row per problem. Inside the caller's transaction.
void insert_measurements(sqlite3* db, int64_t trial_id, const std::vector<Measurement>& per_problem) {
  sql::Stmt ins(db,
                "INSERT INTO measurements (trial_id, problem, p50_us, p90_us, min_us, mean_us, cv, samples, "
                "aborted_early, max_abs, mean_abs, bad_frac, rel_l2, nan_count, unwritten) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
  for (const Measurement& m : per_problem) {
    ins.reset();
    ins.bind_int(1, trial_id)
        .bind_int(2, m.problem)
        .bind_real(3, m.p50_us)
        .bind_real(4, m.p90_us)
        .bind_real(5, m.min_us)
        .bind_real(6, m.mean_us)
        .bind_real(7, m.cv)
        .bind_int(8, m.samples)
        .bind_int(9, m.aborted_early ? 1 : 0)
        .bind_real(10, m.err.max_abs)
        .bind_real(11, m.err.mean_abs)
        .bind_real(12, m.err.bad_frac)
        .bind_real(13, m.err.rel_l2)
        .bind_int(14, m.err.nan_count)
        .bind_int(15, m.err.unwritten);
    ins.run();
  }
}

}  // namespace

// One transaction: the trial's place in the run, its row and measurements, the
// elites (0 in `elite_ids` stands for this trial) and the run's count of
// evaluated trials.
void Store::record_trial(int64_t run_id, Trial& t, const std::vector<int64_t>& elite_ids) {
  require_writable("record a trial");
  const std::string canonical = t.config.canonical();
  const std::string hash = hex64(t.config.hash());
  const std::string created_at = t.created_at.empty() ? utc_now_iso() : t.created_at;
  int64_t id = 0;
  int seq = 0;
  guarded(path_, "recording trial " + canonical + " of run " + std::to_string(run_id), [&] {
    sql::Transaction tx(db_);
    seq = next_trial_seq(db_, path_, run_id, hash, canonical);
    id = insert_trial(db_, run_id, seq, t, canonical, hash, created_at);
    insert_measurements(db_, id, t.per_problem);
    std::vector<int64_t> elites = elite_ids;
    std::replace(elites.begin(), elites.end(), int64_t{0}, id);
    set_elites(db_, run_id, elites);
    sql::Stmt(db_,
              "UPDATE runs SET trials_evaluated = (SELECT COUNT(*) FROM trials WHERE run_id = ?1 AND status <> "
              "'invalid') WHERE id = ?1")
        .bind_int(1, run_id)
        .run();
    tx.commit();
  });
  t.id = id;
  t.seq = seq;
  t.run_id = run_id;
  t.created_at = created_at;
}

void Store::record_retime(int64_t run_id, const std::vector<RetimeSample>& samples,
                          const std::vector<std::pair<int64_t, double>>& final_us,
                          const std::vector<int64_t>& elite_order) {
  require_writable("record the final re-timing");
  guarded(path_, "recording the final re-timing of run " + std::to_string(run_id), [&] {
    sql::Transaction tx(db_);
    sql::Stmt ins(
        db_, "INSERT OR REPLACE INTO retimes (run_id, round, trial_id, problem, p50_us) VALUES (?1, ?2, ?3, ?4, ?5)");
    for (const RetimeSample& r : samples) {
      ins.reset();
      ins.bind_int(1, run_id)
          .bind_int(2, r.round)
          .bind_int(3, r.trial_id)
          .bind_int(4, r.problem)
          .bind_real(5, r.p50_us);
      ins.run();
    }
    sql::Stmt up(db_, "UPDATE trials SET final_us = ?2 WHERE id = ?1 AND run_id = ?3 AND status = 'ok'");
    for (const auto& [tid, us] : final_us) {
      up.reset();
      up.bind_int(1, tid).bind_real(2, us).bind_int(3, run_id);
      up.run();
      if (sqlite3_changes(db_) != 1)
        throw StoreError("trial " + std::to_string(tid) + " is not an ok trial of run " + std::to_string(run_id));
    }
    set_elites(db_, run_id, elite_order);
    tx.commit();
  });
}

void Store::record_sanitized(int64_t trial_id, const std::string& tools) {
  require_writable("record a sanitizer verdict");
  guarded(path_, "recording the sanitizer verdict of trial " + std::to_string(trial_id), [&] {
    sql::Stmt(db_, "UPDATE trials SET sanitized = ?2 WHERE id = ?1 AND status = 'ok'")
        .bind_int(1, trial_id)
        .bind_text(2, tools)
        .run();
    if (sqlite3_changes(db_) != 1) throw StoreError("trial " + std::to_string(trial_id) + " is not an ok trial");
  });
}

void Store::record_sanitizer_finding(int64_t run_id, int64_t trial_id, TrialStatus status, const std::string& error,
                                     const std::vector<int64_t>& elite_ids) {
  require_writable("record a sanitizer finding");
  guarded(path_, "recording the sanitizer finding on trial " + std::to_string(trial_id), [&] {
    sql::Transaction tx(db_);
    sql::Stmt(db_,
              "UPDATE trials SET status = ?3, error = ?4, fitness = NULL, final_us = NULL "
              "WHERE id = ?1 AND run_id = ?2 AND status = 'ok'")
        .bind_int(1, trial_id)
        .bind_int(2, run_id)
        .bind_text(3, to_string(status))
        .bind_text(4, error)
        .run();
    if (sqlite3_changes(db_) != 1)
      throw StoreError("trial " + std::to_string(trial_id) + " is not an ok trial of run " + std::to_string(run_id));
    set_elites(db_, run_id, elite_ids);
    tx.commit();
  });
}

void Store::set_default_trial(int64_t run_id, int64_t trial_id) {
  require_writable("set the default trial");
  guarded(path_, "setting the default trial of run " + std::to_string(run_id), [&] {
    sql::Stmt st(db_,
                 "UPDATE runs SET default_trial_id = ?2 WHERE id = ?1 "
                 "AND EXISTS (SELECT 1 FROM trials WHERE id = ?2 AND run_id = ?1)");
    st.bind_int(1, run_id).bind_int(2, trial_id).run();
    if (sqlite3_changes(db_) != 1)
      throw StoreError("trial " + std::to_string(trial_id) + " is not a trial of run " + std::to_string(run_id) +
                       " in " + path_);
  });
}

void Store::update_stats(int64_t run_id, const RunStats& stats) {
  require_writable("update run statistics");
  guarded(path_, "updating the statistics of run " + std::to_string(run_id), [&] {
    sql::Stmt st(db_, std::string("UPDATE runs SET ") + kStatsAssignments + " WHERE id = ?10");
    bind_stats(st, 1, stats);
    st.bind_int(10, run_id).run();
    if (sqlite3_changes(db_) != 1) throw StoreError("no run " + std::to_string(run_id) + " in " + path_);
  });
}

void Store::finish_run(int64_t run_id, const std::string& status, const RunStats& stats) {
  require_writable("finish a run");
  if (!valid_run_status(status) || status == "running")
    throw StoreError("invalid final run status '" + status + "' (done, interrupted or failed)");
  guarded(path_, "finishing run " + std::to_string(run_id), [&] {
    sql::Stmt st(
        db_, std::string("UPDATE runs SET ") + kStatsAssignments + ", status = ?11, finished_at = ?12 WHERE id = ?10");
    bind_stats(st, 1, stats);
    st.bind_int(10, run_id).bind_text(11, status).bind_text(12, utc_now_iso()).run();
    if (sqlite3_changes(db_) != 1) throw StoreError("no run " + std::to_string(run_id) + " in " + path_);
  });
}

void Store::reopen_run(int64_t run_id, std::optional<int> budget) {
  require_writable("resume a run");
  guarded(path_, "reopening run " + std::to_string(run_id), [&] {
    sql::Stmt st(db_,
                 "UPDATE runs SET status = 'running', finished_at = NULL, budget = COALESCE(?2, budget) WHERE id = ?1");
    st.bind_int(1, run_id).bind_opt(2, budget).run();
    if (sqlite3_changes(db_) != 1) throw StoreError("no run " + std::to_string(run_id) + " in " + path_);
  });
}

// ------------------------------------------------------------------ reads

std::vector<RunInfo> Store::runs() const {
  return guarded(path_, "listing runs", [&] {
    sql::Stmt st(db_, "SELECT " + run_columns(version_) + " FROM runs ORDER BY id DESC");
    std::vector<RunInfo> out;
    while (st.step()) out.push_back(read_run(st));
    return out;
  });
}

std::optional<RunInfo> Store::run(int64_t id) const {
  return guarded(path_, "reading run " + std::to_string(id), [&]() -> std::optional<RunInfo> {
    sql::Stmt st(db_, "SELECT " + run_columns(version_) + " FROM runs WHERE id = ?1");
    if (!st.bind_int(1, id).step()) return std::nullopt;
    return read_run(st);
  });
}

std::vector<Trial> Store::trials(int64_t run_id, std::optional<TrialStatus> status) const {
  return guarded(path_, "reading the trials of run " + std::to_string(run_id), [&] {
    // ?2 NULL selects every status.
    sql::Stmt tq(db_, "SELECT " + trial_columns(version_) +
                          " FROM trials t WHERE t.run_id = ?1 AND (?2 IS NULL OR t.status = ?2) ORDER BY t.seq");
    sql::Stmt mq(db_, std::string("SELECT ") + kMeasurementColumns +
                          " FROM measurements m JOIN trials t ON t.id = m.trial_id "
                          "WHERE t.run_id = ?1 AND (?2 IS NULL OR t.status = ?2) ORDER BY m.trial_id, m.problem");
    for (sql::Stmt* s : {&tq, &mq}) {
      s->bind_int(1, run_id);
      if (status)
        s->bind_text(2, to_string(*status));
      else
        s->bind_null(2);
    }
    return load_trials(tq, mq);
  });
}

std::optional<Trial> Store::trial(int64_t trial_id) const {
  return guarded(path_, "reading trial " + std::to_string(trial_id), [&]() -> std::optional<Trial> {
    sql::Stmt tq(db_, "SELECT " + trial_columns(version_) + " FROM trials t WHERE t.id = ?1");
    sql::Stmt mq(db_, std::string("SELECT ") + kMeasurementColumns +
                          " FROM measurements m WHERE m.trial_id = ?1 ORDER BY m.problem");
    tq.bind_int(1, trial_id);
    mq.bind_int(1, trial_id);
    std::vector<Trial> out = load_trials(tq, mq);
    if (out.empty()) return std::nullopt;
    return out.front();
  });
}

std::vector<Trial> Store::elites(int64_t run_id) const {
  return guarded(path_, "reading the elites of run " + std::to_string(run_id), [&] {
    sql::Stmt tq(db_, "SELECT " + trial_columns(version_) +
                          " FROM elites e JOIN trials t ON t.id = e.trial_id WHERE e.run_id = ?1 ORDER BY e.rank");
    sql::Stmt mq(db_, std::string("SELECT ") + kMeasurementColumns +
                          " FROM elites e JOIN measurements m ON m.trial_id = e.trial_id "
                          "WHERE e.run_id = ?1 ORDER BY m.trial_id, m.problem");
    tq.bind_int(1, run_id);
    mq.bind_int(1, run_id);
    return load_trials(tq, mq);
  });
}

void Store::record_profile(int64_t run_id, const TrialProfile& tp) {
  require_writable("record a profile");
  const bool of_trial = tp.baseline.empty();
  guarded(
      path_,
      of_trial ? "recording the profile of trial " + std::to_string(tp.trial_id)
               : "recording the profile of baseline " + tp.baseline,
      [&] {
        const KernelProfile& p = tp.profile;
        nlohmann::json stalls = nlohmann::json::array();
        for (const auto& [reason, v] : p.stalls) stalls.push_back({reason, v});
        sql::Stmt st(
            db_,
            "INSERT OR REPLACE INTO profiles (run_id, trial_id, problem, kernel, duration_us, sm_pct, tensor_pct, "
            "occupancy_pct, dram_pct, l2_hit_pct, sm_clock_mhz, registers, smem_bytes, grid, block, stalls, tool, "
            "created_at, baseline) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
            "?18, ?19)");
        st.bind_int(1, run_id);
        if (of_trial)
          st.bind_int(2, tp.trial_id);
        else
          st.bind_text(19, tp.baseline);
        st.bind_int(3, tp.problem)
            .bind_text(4, p.kernel)
            .bind_real(5, p.duration_us)
            .bind_real(6, p.sm_pct)
            .bind_real(7, p.tensor_pct)
            .bind_real(8, p.occupancy_pct)
            .bind_real(9, p.dram_pct)
            .bind_real(10, p.l2_hit_pct)
            .bind_real(11, p.sm_clock_mhz)
            .bind_int(12, p.registers)
            .bind_int(13, p.smem_bytes)
            .bind_int(14, p.grid)
            .bind_int(15, p.block)
            .bind_text(16, stalls.dump())
            .bind_text(17, tp.tool)
            .bind_text(18, tp.created_at.empty() ? utc_now_iso() : tp.created_at);
        st.run();
      });
}

void Store::record_baseline(int64_t run_id, const BaselineResult& b) {
  require_writable("record a baseline");
  guarded(path_, "recording baseline " + b.name, [&] {
    sql::Stmt st(db_,
                 "INSERT OR REPLACE INTO baselines (run_id, problem, name, library, status, reason, detail, p50_us, "
                 "p90_us, min_us, mean_us, cv, samples, max_abs_err, mean_abs_err, created_at) VALUES (?1, ?2, ?3, "
                 "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
    const bool timed = b.m.samples > 0;
    st.bind_int(1, run_id).bind_int(2, b.problem).bind_text(3, b.name).bind_text(4, b.library);
    st.bind_text(5, b.status).bind_text(6, b.reason).bind_text(7, b.detail);
    if (timed) {
      st.bind_real(8, b.m.p50_us).bind_real(9, b.m.p90_us).bind_real(10, b.m.min_us).bind_real(11, b.m.mean_us);
      st.bind_real(12, b.m.cv).bind_int(13, b.m.samples);
    }
    if (b.status == "ok" || b.status == "wrong") st.bind_real(14, b.m.err.max_abs).bind_real(15, b.m.err.mean_abs);
    st.bind_text(16, utc_now_iso());
    st.run();
  });
}

std::vector<BaselineResult> Store::baselines(int64_t run_id) const {
  if (version_ < 6) return {};
  return guarded(path_, "reading the baselines of run " + std::to_string(run_id), [&] {
    sql::Stmt st(db_,
                 "SELECT id, problem, name, library, status, reason, detail, COALESCE(p50_us, 0), COALESCE(p90_us, "
                 "0), COALESCE(min_us, 0), COALESCE(mean_us, 0), COALESCE(cv, 0), COALESCE(samples, 0), "
                 "COALESCE(max_abs_err, 0), COALESCE(mean_abs_err, 0) FROM baselines WHERE run_id = ?1 ORDER BY "
                 "problem, id");
    st.bind_int(1, run_id);
    std::vector<BaselineResult> out;
    while (st.step()) {
      BaselineResult b;
      int c = 0;
      b.id = st.i64(c++);
      b.run_id = run_id;
      b.problem = st.i32(c++);
      b.name = st.text(c++);
      b.library = st.text(c++);
      b.status = st.text(c++);
      b.reason = st.text(c++);
      b.detail = st.text(c++);
      b.m.problem = b.problem;
      b.m.p50_us = st.real(c++);
      b.m.p90_us = st.real(c++);
      b.m.min_us = st.real(c++);
      b.m.mean_us = st.real(c++);
      b.m.cv = st.real(c++);
      b.m.samples = st.i32(c++);
      b.m.err.max_abs = st.real(c++);
      b.m.err.mean_abs = st.real(c++);
      out.push_back(std::move(b));
    }
    return out;
  });
}

std::vector<TrialProfile> Store::profiles(int64_t run_id) const {
  if (version_ < 5) return {};
  return guarded(path_, "reading the profiles of run " + std::to_string(run_id), [&] {
    sql::Stmt st(db_, std::string("SELECT COALESCE(p.trial_id, 0), ") +
                          (version_ >= 7 ? "COALESCE(p.baseline, '')" : "''") +
                          ", p.problem, p.kernel, p.duration_us, p.sm_pct, p.tensor_pct, p.occupancy_pct, "
                          "p.dram_pct, p.l2_hit_pct, p.sm_clock_mhz, p.registers, p.smem_bytes, p.grid, p.block, "
                          "p.stalls, p.tool, p.created_at FROM profiles p LEFT JOIN trials t ON t.id = p.trial_id "
                          "WHERE p.run_id = ?1 ORDER BY t.seq IS NULL, t.seq, 2, p.problem");
    st.bind_int(1, run_id);
    std::vector<TrialProfile> out;
    while (st.step()) {
      TrialProfile tp;
      int c = 0;
      tp.trial_id = st.i64(c++);
      tp.baseline = st.text(c++);
      tp.problem = st.i32(c++);
      KernelProfile& p = tp.profile;
      p.kernel = st.text(c++);
      p.duration_us = st.real(c++);
      p.sm_pct = st.real(c++);
      p.tensor_pct = st.real(c++);
      p.occupancy_pct = st.real(c++);
      p.dram_pct = st.real(c++);
      p.l2_hit_pct = st.real(c++);
      p.sm_clock_mhz = st.real(c++);
      p.registers = st.i32(c++);
      p.smem_bytes = st.i64(c++);
      p.grid = st.i64(c++);
      p.block = st.i64(c++);
      for (const auto& s : nlohmann::json::parse(st.text(c++)))
        p.stalls.emplace_back(s.at(0).get<std::string>(), s.at(1).get<double>());
      tp.tool = st.text(c++);
      tp.created_at = st.text(c++);
      out.push_back(std::move(tp));
    }
    return out;
  });
}

int64_t Store::last_run_id() const {
  return guarded(path_, "reading the last run",
                 [&] { return sql::query_int(db_, "SELECT COALESCE(MAX(id), 0) FROM runs"); });
}

// ------------------------------------------------------------------ JSON

void to_json(nlohmann::json& j, const DeviceRecord& d) {
  j = {{"name", d.name},
       {"uuid", d.uuid},
       {"cc", d.cc},
       {"num_sms", d.num_sms},
       {"driver_version", d.driver_version},
       {"driver_string", d.driver_string},
       {"runtime_version", d.runtime_version},
       {"nvrtc_version", d.nvrtc_version},
       {"arch", d.arch}};
}

void from_json(const nlohmann::json& j, DeviceRecord& d) {
  d.name = j.value("name", std::string());
  d.uuid = j.value("uuid", std::string());
  d.cc = j.value("cc", 0);
  d.num_sms = j.value("num_sms", 0);
  d.driver_version = j.value("driver_version", 0);
  d.driver_string = j.value("driver_string", std::string());
  d.runtime_version = j.value("runtime_version", 0);
  d.nvrtc_version = j.value("nvrtc_version", std::string());
  d.arch = j.value("arch", std::string());
}

void to_json(nlohmann::json& j, const RunStats& s) {
  j = {{"trials", s.trials},         {"invalid_draws", s.invalid_draws},
       {"wall_s", s.wall_s},         {"compile_busy_s", s.compile_busy_s},
       {"verify_s", s.verify_s},     {"bench_s", s.bench_s},
       {"gpu_idle_s", s.gpu_idle_s}, {"compile_threads", s.compile_threads},
       {"cache_hits", s.cache_hits}};
}

void from_json(const nlohmann::json& j, RunStats& s) {
  s.trials = j.value("trials", 0);
  s.invalid_draws = j.value("invalid_draws", 0);
  s.wall_s = j.value("wall_s", 0.0);
  s.compile_busy_s = j.value("compile_busy_s", 0.0);
  s.verify_s = j.value("verify_s", 0.0);
  s.bench_s = j.value("bench_s", 0.0);
  s.gpu_idle_s = j.value("gpu_idle_s", 0.0);
  s.compile_threads = j.value("compile_threads", 0);
  s.cache_hits = j.value("cache_hits", 0);
}

void to_json(nlohmann::json& j, const RunInfo& r) {
  nlohmann::json options = nlohmann::json::parse(r.options_json.empty() ? "{}" : r.options_json, nullptr, false);
  if (options.is_discarded()) options = r.options_json;  // keep what was stored, even if it is not JSON
  std::vector<std::string> shapes;
  for (const auto& p : r.problems) shapes.push_back(p.canonical());
  auto opt = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  j = {{"id", r.id},
       {"kernel", r.kernel},
       {"spec_origin", r.spec_origin},
       {"spec_hash", r.spec_hash},
       {"spec_text", r.spec_text},
       {"problems", r.problems},
       {"shapes", shapes},
       {"dtype", r.dtype},
       {"strategy", r.strategy},
       {"seed", r.seed},
       {"budget", r.budget},
       {"elites_k", r.elites_k},
       {"options", options},
       {"device", r.device},
       {"evotune_version", r.evotune_version},
       {"status", r.status},
       {"created_at", r.created_at},
       {"finished_at", r.finished_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.finished_at)},
       {"compile_only", r.compile_only},
       {"stats", r.stats},
       {"default_trial_id", opt(r.default_trial_id)},
       {"best_trial_id", opt(r.best_trial_id)}};
}

void from_json(const nlohmann::json& j, RunInfo& r) {
  auto str = [&](const char* k) {
    auto it = j.find(k);
    return it == j.end() || it->is_null() ? std::string() : it->get<std::string>();
  };
  auto opt = [&](const char* k) -> std::optional<int64_t> {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return it->get<int64_t>();
  };
  r.id = j.value("id", int64_t{0});
  r.kernel = str("kernel");
  r.spec_origin = str("spec_origin");
  r.spec_hash = str("spec_hash");
  r.spec_text = str("spec_text");
  r.problems = j.value("problems", std::vector<Problem>{});
  r.dtype = str("dtype");
  r.strategy = str("strategy");
  r.seed = j.value("seed", uint64_t{0});
  r.budget = j.value("budget", 0);
  r.elites_k = j.value("elites_k", 0);
  auto opts = j.find("options");
  r.options_json = opts == j.end() ? "{}" : opts->is_string() ? opts->get<std::string>() : opts->dump();
  r.device = j.value("device", DeviceRecord{});
  r.evotune_version = str("evotune_version");
  r.status = str("status");
  r.created_at = str("created_at");
  r.finished_at = str("finished_at");
  r.compile_only = j.value("compile_only", false);
  r.stats = j.value("stats", RunStats{});
  r.default_trial_id = opt("default_trial_id");
  r.best_trial_id = opt("best_trial_id");
}

}  // namespace evotune
