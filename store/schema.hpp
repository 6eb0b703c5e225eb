// Internal to store/: RAII wrappers over the SQLite C API and the schema as
// a list of forward migrations. store.cpp and export.cpp use it; tests use it
// for the migration hook (create_at_version) and for raw SQL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace evotune::sql {

// A failed SQLite call; `code` is the extended result code (SQLITE_CONSTRAINT_UNIQUE...).
struct SqlError : StoreError {
  SqlError(const std::string& what, int rc) : StoreError(what), code(rc) {}
  int code;
};

// Throws SqlError: "<context>: <sqlite message>".
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& context);

// Owns a connection; closes it on destruction.
class Db {
 public:
  Db() = default;
  explicit Db(sqlite3* db) : db_(db) {}
  Db(Db&& o) noexcept : db_(o.release()) {}
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  sqlite3* get() const { return db_; }
  sqlite3* release() noexcept;

 private:
  sqlite3* db_ = nullptr;
};

// sqlite3_open_v2 with extended result codes; throws SqlError naming the path.
Db open(const std::string& path, bool read_only, bool create);
// Read-only with SQLite's `immutable` flag: no locks, no PATH-wal or PATH-shm,
// the file read as it is. Only for a file that nobody writes and whose
// commits are all in it (a WAL database closed cleanly).
Db open_immutable(const std::string& path);

// Owns a prepared statement. Parameters are 1-based, columns 0-based.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql);
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  Stmt& bind_int(int i, int64_t v);
  Stmt& bind_real(int i, double v);  // NaN is stored as NULL
  Stmt& bind_text(int i, std::string_view v);
  Stmt& bind_null(int i);
  Stmt& bind_opt(int i, const std::optional<int64_t>& v);

  // True while a row is available; false when done. Throws SqlError.
  bool step();
  // Steps a statement that returns no rows.
  void run();
  void reset();

  int columns() const;
  bool is_null(int col) const;
  int64_t i64(int col) const;
  int i32(int col) const;
  double real(int col) const;         // NULL reads as 0
  double real_or_nan(int col) const;  // NULL reads as NaN
  std::string text(int col) const;    // NULL reads as ""
  std::optional<int64_t> opt_i64(int col) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
};

// BEGIN IMMEDIATE (take the write lock now, so two writers never deadlock on
// upgrade); rolls back on destruction unless commit() ran.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  bool open_ = true;
};

// Runs constant SQL (DDL, pragmas); never for SQL that carries values.
void exec(sqlite3* db, const std::string& sql, const std::string& context);

// Single-integer query, e.g. "PRAGMA user_version".
int64_t query_int(sqlite3* db, std::string_view sql);

}  // namespace evotune::sql

namespace evotune::schema {

struct Migration {
  int version;       // user_version after it ran
  const char* what;  // one line for logs and docs
  const char* sql;
};

// In order; migration i takes the schema from version i-1 to i.
const std::vector<Migration>& migrations();
int latest_version();
int user_version(sqlite3* db);
// Names of the tables that are not SQLite's own.
std::vector<std::string> user_tables(sqlite3* db);

// Applies every migration above the current version up to `target`, each in
// its own transaction, so a failure leaves the database at the last good version.
void migrate(sqlite3* db, int target);

// Connection settings every read-write open uses: WAL, foreign keys, busy timeout.
void configure_read_write(sqlite3* db);

// Test hook: creates a new database at `path` with migrations 1..version only,
// as an older evotune would have left it.
void create_at_version(const std::string& path, int version);

}  // namespace evotune::schema
