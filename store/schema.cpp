#include "store/schema.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <sqlite3.h>

namespace evotune::sql {

void fail(sqlite3* db, int rc, const std::string& context) {
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int sys = db ? sqlite3_system_errno(db) : 0;
  // The OS reason says more than SQLite's "unable to open database file".
  if ((rc & 0xff) == SQLITE_CANTOPEN && sys != 0) msg += std::string(" (") + std::strerror(sys) + ")";
  throw SqlError(context + ": " + msg, rc);
}

Db& Db::operator=(Db&& o) noexcept {
  if (this != &o) {
    sqlite3_close_v2(db_);
    db_ = o.release();
  }
  return *this;
}

Db::~Db() {
  sqlite3_close_v2(db_);
}

sqlite3* Db::release() noexcept {
  sqlite3* d = db_;
  db_ = nullptr;
  return d;
}

Db open(const std::string& path, bool read_only, bool create) {
  int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (create && !read_only) flags |= SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Db db(raw);  // closes the handle SQLite returns even on failure
  if (rc != SQLITE_OK) fail(raw, rc, "cannot open database " + path);
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

Db open_immutable(const std::string& path) {
  // A URI names the file: everything but unreserved characters percent-encoded.
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || std::strchr("-._~/", c)) {
      uri += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      uri += hex;
    }
  }
  uri += "?immutable=1";
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) fail(raw, rc, "cannot open database " + path);
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db) {
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st_, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, "preparing SQL");
}

Stmt::Stmt(Stmt&& o) noexcept : db_(o.db_), st_(o.st_) {
  o.st_ = nullptr;
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(st_);
    db_ = o.db_;
    st_ = o.st_;
    o.st_ = nullptr;
  }
  return *this;
}

Stmt::~Stmt() {
  sqlite3_finalize(st_);
}

Stmt& Stmt::bind_int(int i, int64_t v) {
  int rc = sqlite3_bind_int64(st_, i, v);
  if (rc != SQLITE_OK) fail(db_, rc, "binding parameter " + std::to_string(i));
  return *this;
}

Stmt& Stmt::bind_real(int i, double v) {
  int rc = std::isnan(v) ? sqlite3_bind_null(st_, i) : sqlite3_bind_double(st_, i, v);
  if (rc != SQLITE_OK) fail(db_, rc, "binding parameter " + std::to_string(i));
  return *this;
}

Stmt& Stmt::bind_text(int i, std::string_view v) {
  int rc = sqlite3_bind_text64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(db_, rc, "binding parameter " + std::to_string(i));
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  int rc = sqlite3_bind_null(st_, i);
  if (rc != SQLITE_OK) fail(db_, rc, "binding parameter " + std::to_string(i));
  return *this;
}

Stmt& Stmt::bind_opt(int i, const std::optional<int64_t>& v) {
  return v ? bind_int(i, *v) : bind_null(i);
}

bool Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Reset so the statement can be reused; the error stays in the message.
  std::string msg = sqlite3_errmsg(db_);
  sqlite3_reset(st_);
  throw SqlError(msg, rc);
}

void Stmt::run() {
  while (step()) {
  }
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

int Stmt::columns() const {
  return sqlite3_column_count(st_);
}
bool Stmt::is_null(int col) const {
  return sqlite3_column_type(st_, col) == SQLITE_NULL;
}
int64_t Stmt::i64(int col) const {
  return sqlite3_column_int64(st_, col);
}
int Stmt::i32(int col) const {
  return static_cast<int>(sqlite3_column_int64(st_, col));
}
double Stmt::real(int col) const {
  return sqlite3_column_double(st_, col);
}
double Stmt::real_or_nan(int col) const {
  return is_null(col) ? std::nan("") : sqlite3_column_double(st_, col);
}

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(st_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st_, col)));
}

std::optional<int64_t> Stmt::opt_i64(int col) const {
  if (is_null(col)) return std::nullopt;
  return i64(col);
}

Transaction::Transaction(sqlite3* db) : db_(db) {
  exec(db, "BEGIN IMMEDIATE", "starting a transaction");
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  exec(db_, "COMMIT", "committing");
  open_ = false;
}

void exec(sqlite3* db, const std::string& sql, const std::string& context) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw SqlError(context + ": " + msg, rc);
  }
}

int64_t query_int(sqlite3* db, std::string_view sql) {
  Stmt st(db, sql);
  return st.step() ? st.i64(0) : 0;
}

}  // namespace evotune::sql

namespace evotune::schema {

namespace {

// Version 1: the tables as evotune 0.1 first wrote them. Never edit a
// released migration: add a new one.
const char* const kMigration1 = R"sql(
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  kernel           TEXT    NOT NULL,
  spec_origin      TEXT    NOT NULL,
  spec_hash        TEXT    NOT NULL,
  spec_text        TEXT    NOT NULL,
  problems_json    TEXT    NOT NULL,
  shapes           TEXT    NOT NULL,
  dtype            TEXT    NOT NULL,
  strategy         TEXT    NOT NULL,
  seed             INTEGER NOT NULL,
  budget           INTEGER NOT NULL,
  elites_k         INTEGER NOT NULL,
  options_json     TEXT    NOT NULL DEFAULT '{}',
  device_name      TEXT    NOT NULL DEFAULT '',
  device_uuid      TEXT    NOT NULL DEFAULT '',
  device_cc        INTEGER NOT NULL DEFAULT 0,
  device_num_sms   INTEGER NOT NULL DEFAULT 0,
  driver_version   INTEGER NOT NULL DEFAULT 0,
  driver_string    TEXT    NOT NULL DEFAULT '',
  runtime_version  INTEGER NOT NULL DEFAULT 0,
  nvrtc_version    TEXT    NOT NULL DEFAULT '',
  arch             TEXT    NOT NULL DEFAULT '',
  evotune_version  TEXT    NOT NULL DEFAULT '',
  status           TEXT    NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed')),
  created_at       TEXT    NOT NULL,
  finished_at      TEXT,
  compile_only     INTEGER NOT NULL DEFAULT 0 CHECK (compile_only IN (0, 1)),
  trials_evaluated INTEGER NOT NULL DEFAULT 0,
  invalid_draws    INTEGER NOT NULL DEFAULT 0,
  wall_s           REAL    NOT NULL DEFAULT 0,
  default_trial_id INTEGER REFERENCES trials(id) ON DELETE SET NULL,
  best_trial_id    INTEGER REFERENCES trials(id) ON DELETE SET NULL
);
CREATE INDEX runs_kernel ON runs(kernel);

CREATE TABLE trials (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq          INTEGER NOT NULL CHECK (seq >= 1),
  config       TEXT    NOT NULL,
  config_hash  TEXT    NOT NULL,
  config_json  TEXT    NOT NULL,
  status       TEXT    NOT NULL CHECK (status IN ('ok', 'invalid', 'compile_error', 'resource_rejected',
                                                  'launch_error', 'crashed', 'timeout', 'incorrect')),
  error        TEXT    NOT NULL DEFAULT '',
  compile_ms   REAL    DEFAULT 0,
  verify_ms    REAL    DEFAULT 0,
  bench_ms     REAL    DEFAULT 0,
  registers    INTEGER NOT NULL DEFAULT 0,
  smem_static  INTEGER NOT NULL DEFAULT 0,
  smem_dynamic INTEGER NOT NULL DEFAULT 0,
  spill_stores INTEGER NOT NULL DEFAULT 0,
  spill_loads  INTEGER NOT NULL DEFAULT 0,
  stack_frame  INTEGER NOT NULL DEFAULT 0,
  fitness      REAL    CHECK (fitness IS NULL OR status = 'ok'),
  created_at   TEXT    NOT NULL,
  UNIQUE (run_id, seq),
  UNIQUE (run_id, config_hash)
);
CREATE INDEX trials_run_status ON trials(run_id, status);

CREATE TABLE measurements (
  trial_id      INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  problem       INTEGER NOT NULL CHECK (problem >= 0),
  p50_us        REAL,
  p90_us        REAL,
  min_us        REAL,
  mean_us       REAL,
  cv            REAL,
  samples       INTEGER NOT NULL DEFAULT 0,
  aborted_early INTEGER NOT NULL DEFAULT 0 CHECK (aborted_early IN (0, 1)),
  max_abs       REAL,
  mean_abs      REAL,
  bad_frac      REAL,
  rel_l2        REAL,
  nan_count     INTEGER NOT NULL DEFAULT 0,
  unwritten     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (trial_id, problem)
) WITHOUT ROWID;

CREATE TABLE elites (
  run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank     INTEGER NOT NULL CHECK (rank >= 1),
  trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  PRIMARY KEY (run_id, rank),
  UNIQUE (run_id, trial_id)
) WITHOUT ROWID;
CREATE INDEX elites_trial ON elites(trial_id);
)sql";

// Version 2: the per-run wall-time breakdown, which GPU measured a trial and
// whether its cubin came from the compile cache, and the views.
const char* const kMigration2 = R"sql(
ALTER TABLE runs ADD COLUMN compile_busy_s  REAL    NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN verify_s        REAL    NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN bench_s         REAL    NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN gpu_idle_s      REAL    NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN compile_threads INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cache_hits      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN device    INTEGER;
ALTER TABLE trials ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0 CHECK (cache_hit IN (0, 1));
CREATE INDEX trials_ok_fitness ON trials(run_id, fitness) WHERE status = 'ok';

CREATE VIEW v_trials AS
SELECT t.run_id, t.id AS trial_id, t.seq, r.kernel, t.status, t.config,
       CASE WHEN (SELECT COUNT(*) FROM measurements m WHERE m.trial_id = t.id) = 1
            THEN (SELECT m.p50_us FROM measurements m WHERE m.trial_id = t.id)
            ELSE t.fitness END AS p50_us,
       t.fitness AS fitness_us,
       (SELECT MAX(m.max_abs) FROM measurements m WHERE m.trial_id = t.id) AS max_abs,
       (SELECT MAX(m.mean_abs) FROM measurements m WHERE m.trial_id = t.id) AS mean_abs,
       t.registers, t.smem_static + t.smem_dynamic AS smem_bytes,
       t.spill_stores + t.spill_loads AS spill_bytes, t.stack_frame,
       t.compile_ms, t.verify_ms, t.bench_ms, t.cache_hit, t.device, t.created_at,
       substr(t.error, 1, instr(t.error || char(10), char(10)) - 1) AS error_line
FROM trials t JOIN runs r ON r.id = t.run_id;

CREATE VIEW v_measurements AS
SELECT t.run_id, t.id AS trial_id, t.seq, t.status, t.config, m.problem,
       m.p50_us, m.p90_us, m.min_us, m.mean_us, m.cv, m.samples, m.aborted_early,
       m.max_abs, m.mean_abs, m.bad_frac, m.rel_l2, m.nan_count, m.unwritten
FROM measurements m JOIN trials t ON t.id = m.trial_id;

CREATE VIEW v_elites AS
SELECT e.run_id, e.rank, e.trial_id, t.seq, t.config, t.fitness AS fitness_us,
       t.registers, t.smem_static + t.smem_dynamic AS smem_bytes,
       t.spill_stores + t.spill_loads AS spill_bytes, t.created_at
FROM elites e JOIN trials t ON t.id = e.trial_id
ORDER BY e.run_id, e.rank;

CREATE VIEW v_best AS
SELECT r.id AS run_id, r.kernel, r.dtype, r.shapes, r.device_name, r.arch,
       t.id AS trial_id, t.seq, t.config, t.fitness AS fitness_us,
       d.fitness AS default_us,
       CASE WHEN t.fitness > 0 AND d.fitness > 0 THEN d.fitness / t.fitness END AS speedup,
       t.registers, t.smem_static + t.smem_dynamic AS smem_bytes
FROM runs r JOIN trials t ON t.id = r.best_trial_id
LEFT JOIN trials d ON d.id = r.default_trial_id;

CREATE VIEW v_runs AS
SELECT r.id AS run_id, r.kernel, r.status, r.dtype, r.shapes, r.strategy, r.seed, r.budget,
       r.elites_k, r.device_name, r.arch, r.created_at, r.finished_at, r.wall_s,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id) AS trials,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'ok') AS n_ok,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'invalid') AS n_invalid,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'compile_error') AS n_compile_error,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'resource_rejected') AS n_resource_rejected,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'launch_error') AS n_launch_error,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'crashed') AS n_crashed,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'timeout') AS n_timeout,
       (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'incorrect') AS n_incorrect,
       r.best_trial_id, b.config AS best_config, b.fitness AS best_p50_us,
       d.fitness AS default_p50_us,
       CASE WHEN b.fitness > 0 AND d.fitness > 0 THEN d.fitness / b.fitness END AS speedup
FROM runs r
LEFT JOIN trials b ON b.id = r.best_trial_id
LEFT JOIN trials d ON d.id = r.default_trial_id;
)sql";

// Version 3: the interleaved re-timing of the final elites. Every sample is
// kept; trials.final_us is the geometric mean over problems of the median
// re-timed p50, and the elites are re-ranked by it.
const char* const kMigration3 = R"sql(
ALTER TABLE trials ADD COLUMN final_us REAL CHECK (final_us IS NULL OR status = 'ok');
CREATE TABLE retimes (
  run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  round    INTEGER NOT NULL CHECK (round >= 1),
  trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  problem  INTEGER NOT NULL CHECK (problem >= 0),
  p50_us   REAL,
  PRIMARY KEY (run_id, round, trial_id, problem)
) WITHOUT ROWID;
DROP VIEW v_elites;
CREATE VIEW v_elites AS
SELECT e.run_id, e.rank, e.trial_id, t.seq, t.config, t.fitness AS fitness_us, t.final_us,
       t.registers, t.smem_static + t.smem_dynamic AS smem_bytes,
       t.spill_stores + t.spill_loads AS spill_bytes, t.created_at
FROM elites e JOIN trials t ON t.id = e.trial_id
ORDER BY e.run_id, e.rank;
)sql";

// Version 4: the compute-sanitizer gate. A trial the tools passed names
// them; one they found a fault in has its status and error changed instead.
const char* const kMigration4 = R"sql(
ALTER TABLE trials ADD COLUMN sanitized TEXT;
)sql";

// Version 5: Nsight Compute profiles of a run's trials, one per trial and
// problem (a new profile replaces the old).
const char* const kMigration5 = R"sql(
CREATE TABLE profiles (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trial_id      INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  problem       INTEGER NOT NULL CHECK (problem >= 0),
  kernel        TEXT    NOT NULL,
  duration_us   REAL    NOT NULL CHECK (duration_us > 0),
  sm_pct        REAL,
  tensor_pct    REAL,
  occupancy_pct REAL,
  dram_pct      REAL,
  l2_hit_pct    REAL,
  sm_clock_mhz  REAL,
  registers     INTEGER,
  smem_bytes    INTEGER,
  grid          INTEGER,
  block         INTEGER,
  stalls        TEXT    NOT NULL DEFAULT '[]',  -- JSON [[reason, warps stalled per issued instruction], ...], largest first
  tool          TEXT    NOT NULL DEFAULT '',    -- the profiler's version
  created_at    TEXT    NOT NULL,
  UNIQUE (trial_id, problem)
);
)sql";

// Version 6: vendor baselines (and the reference kernel) measured beside a
// run, one per run, problem and name (a new measurement replaces the old).
const char* const kMigration6 = R"sql(
CREATE TABLE baselines (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  problem       INTEGER NOT NULL CHECK (problem >= 0),
  name          TEXT    NOT NULL,
  library       TEXT    NOT NULL,
  status        TEXT    NOT NULL CHECK (status IN ('ok', 'wrong', 'skipped', 'failed')),
  reason        TEXT    NOT NULL DEFAULT '',
  detail        TEXT    NOT NULL DEFAULT '',
  p50_us        REAL,
  p90_us        REAL,
  min_us        REAL,
  mean_us       REAL,
  cv            REAL,
  samples       INTEGER,
  max_abs_err   REAL,
  mean_abs_err  REAL,
  created_at    TEXT    NOT NULL,
  UNIQUE (run_id, problem, name)
);
)sql";

// Version 7: profiles of the baselines too. A profile is a trial's or a
// baseline's (by name), never both: the table is rebuilt with trial_id
// nullable and a baseline column, its rows kept.
const char* const kMigration7 = R"sql(
CREATE TABLE profiles_v7 (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  trial_id      INTEGER REFERENCES trials(id) ON DELETE CASCADE,
  baseline      TEXT,
  problem       INTEGER NOT NULL CHECK (problem >= 0),
  kernel        TEXT    NOT NULL,
  duration_us   REAL    NOT NULL CHECK (duration_us > 0),
  sm_pct        REAL,
  tensor_pct    REAL,
  occupancy_pct REAL,
  dram_pct      REAL,
  l2_hit_pct    REAL,
  sm_clock_mhz  REAL,
  registers     INTEGER,
  smem_bytes    INTEGER,
  grid          INTEGER,
  block         INTEGER,
  stalls        TEXT    NOT NULL DEFAULT '[]',
  tool          TEXT    NOT NULL DEFAULT '',
  created_at    TEXT    NOT NULL,
  CHECK ((trial_id IS NULL) <> (baseline IS NULL)),
  UNIQUE (trial_id, problem),
  UNIQUE (run_id, baseline, problem)
);
INSERT INTO profiles_v7 (id, run_id, trial_id, baseline, problem, kernel, duration_us, sm_pct, tensor_pct,
  occupancy_pct, dram_pct, l2_hit_pct, sm_clock_mhz, registers, smem_bytes, grid, block, stalls, tool, created_at)
SELECT id, run_id, trial_id, NULL, problem, kernel, duration_us, sm_pct, tensor_pct, occupancy_pct, dram_pct,
  l2_hit_pct, sm_clock_mhz, registers, smem_bytes, grid, block, stalls, tool, created_at FROM profiles;
DROP TABLE profiles;
ALTER TABLE profiles_v7 RENAME TO profiles;
)sql";

// Version 8: the host each trial ran on (a run spread over MPI ranks on
// several hosts); NULL for trials recorded before.
const char* const kMigration8 = R"sql(
ALTER TABLE trials ADD COLUMN host TEXT;
)sql";

// Version 9: ptxas's advisory number where it serialised a trial's wgmma
// instructions (0: it did not, or the trial predates the column).
const char* const kMigration9 = R"sql(
ALTER TABLE trials ADD COLUMN wgmma_serialized INTEGER NOT NULL DEFAULT 0;
)sql";

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all = {
      {1, "runs, trials, measurements, elites", kMigration1},
      {2, "run time breakdown, trial device and cache_hit, views", kMigration2},
      {3, "final re-timing of the elites", kMigration3},
      {4, "compute-sanitizer verdicts on trials", kMigration4},
      {5, "Nsight Compute profiles of trials", kMigration5},
      {6, "vendor baselines measured beside a run", kMigration6},
      {7, "Nsight Compute profiles of baselines", kMigration7},
      {8, "the host each trial ran on", kMigration8},
      {9, "wgmma serialised by ptxas, per trial", kMigration9},
  };
  return all;
}

int latest_version() {
  return migrations().back().version;
}

int user_version(sqlite3* db) {
  return static_cast<int>(sql::query_int(db, "PRAGMA user_version"));
}

std::vector<std::string> user_tables(sqlite3* db) {
  sql::Stmt st(
      db, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name");
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.text(0));
  return out;
}

void migrate(sqlite3* db, int target) {
  for (const Migration& m : migrations()) {
    if (m.version > target) break;
    sql::Transaction tx(db);
    // Re-read inside the write lock: another process may have migrated meanwhile.
    if (user_version(db) >= m.version) continue;
    sql::exec(db, m.sql, "migrating the schema to version " + std::to_string(m.version) + " (" + m.what + ")");
    // PRAGMA takes no bound parameters; the value is our own constant.
    sql::exec(db, "PRAGMA user_version = " + std::to_string(m.version), "setting the schema version");
    tx.commit();
  }
}

void configure_read_write(sqlite3* db) {
  sqlite3_busy_timeout(db, 10000);
  sql::Stmt wal(db, "PRAGMA journal_mode = WAL");
  std::string mode = wal.step() ? wal.text(0) : "";
  if (mode != "wal") throw StoreError("cannot switch the database to WAL mode (journal_mode is '" + mode + "')");
  // NORMAL is safe against corruption in WAL mode; a committed trial survives a
  // killed process and may be lost only on power failure.
  sql::exec(db, "PRAGMA synchronous = NORMAL", "setting synchronous");
  sql::exec(db, "PRAGMA foreign_keys = ON", "enabling foreign keys");
}

void create_at_version(const std::string& path, int version) {
  if (version < 1 || version > latest_version())
    throw StoreError("create_at_version: no schema version " + std::to_string(version));
  sql::Db db = sql::open(path, false, true);
  configure_read_write(db.get());
  migrate(db.get(), version);
}

}  // namespace evotune::schema
