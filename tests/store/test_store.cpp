// Store: schema, migrations, round trips, transactions and the errors a user
// meets when --db points somewhere wrong.
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "store/schema.hpp"
#include "store/store.hpp"
#include "tests/catch.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed afterwards.
using evotune_test::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Throws and returns the message, so REQUIRE_THAT-free checks stay readable.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.what();
  }
  FAIL("expected a StoreError");
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

Problem problem(int64_t m, int64_t n, int64_t k, Dtype d = Dtype::fp16) {
  Problem p;
  p.dims = {{"M", m}, {"N", n}, {"K", k}};
  p.dtype = d;
  return p;
}

RunInfo sample_run() {
  RunInfo r;
  r.kernel = "gemm";
  r.spec_origin = "builtin";
  r.spec_hash = "0123456789abcdef";
  r.spec_text = "[kernel]\nname = \"gemm\"\n";
  r.problems = {problem(4096, 4096, 4096), problem(1024, 512, 256)};
  r.dtype = "fp16";
  r.strategy = "evo";
  r.seed = 0xfedcba9876543210ULL;  // above INT64_MAX: stored as its bit pattern
  r.budget = 128;
  r.elites_k = 6;
  r.options_json = R"({"initial_random":16,"tournament":3})";
  r.device = {"NVIDIA H200", "GPU-1234", 90, 132, 13000, "580.159.04", 13000, "13.0", "sm_90a"};
  r.evotune_version = "0.1.0";
  r.status = "running";
  r.created_at = "2026-11-21T10:00:00Z";
  r.finished_at = "";
  r.compile_only = false;
  r.stats = {3, 4, 5.5, 6.5, 7.5, 8.5, 9.5, 10, 11};
  return r;
}

Measurement meas(int problem, double p50) {
  Measurement m;
  m.problem = problem;
  m.p50_us = p50;
  m.p90_us = p50 * 1.1;
  m.min_us = p50 * 0.9;
  m.mean_us = p50 * 1.01;
  m.cv = 0.012;
  m.samples = 200 + problem;
  m.aborted_early = problem == 1;
  m.err = {0.004, 0.0002, 0.001, 0.0003, 2, 3};
  return m;
}

Trial sample_trial(int block_m, TrialStatus st = TrialStatus::ok, double p50 = 100.0) {
  Trial t;
  t.config.values = {{"BLOCK_M", block_m}, {"BLOCK_N", 64}, {"STAGES", 3}};
  t.status = st;
  t.error = st == TrialStatus::ok ? "" : "line one\nline two";
  t.compile_ms = 812.5;
  t.verify_ms = 12.25;
  t.bench_ms = 40.125;
  t.cache_hit = block_m % 2 == 0;
  t.res = {128, 1024, 49152, 8, 16, 32, block_m == 64 ? 7512 : 0};
  t.per_problem = {meas(0, p50), meas(1, p50 / 2)};
  t.fitness = st == TrialStatus::ok ? p50 * 0.75 : 0;
  t.device = 1;
  t.host = "gpu-node-07";
  t.created_at = "2026-11-21T10:05:00Z";
  return t;
}

void check_same_measurement(const Measurement& a, const Measurement& b) {
  CHECK(a.problem == b.problem);
  CHECK(a.p50_us == b.p50_us);
  CHECK(a.p90_us == b.p90_us);
  CHECK(a.min_us == b.min_us);
  CHECK(a.mean_us == b.mean_us);
  CHECK(a.cv == b.cv);
  CHECK(a.samples == b.samples);
  CHECK(a.aborted_early == b.aborted_early);
  CHECK(a.err.max_abs == b.err.max_abs);
  CHECK(a.err.mean_abs == b.err.mean_abs);
  CHECK(a.err.bad_frac == b.err.bad_frac);
  CHECK(a.err.rel_l2 == b.err.rel_l2);
  CHECK(a.err.nan_count == b.err.nan_count);
  CHECK(a.err.unwritten == b.err.unwritten);
}

void check_same_trial(const Trial& a, const Trial& b) {
  CHECK(a.id == b.id);
  CHECK(a.run_id == b.run_id);
  CHECK(a.seq == b.seq);
  CHECK(a.config == b.config);
  CHECK(a.status == b.status);
  CHECK(a.error == b.error);
  CHECK(a.compile_ms == b.compile_ms);
  CHECK(a.verify_ms == b.verify_ms);
  CHECK(a.bench_ms == b.bench_ms);
  CHECK(a.cache_hit == b.cache_hit);
  CHECK(a.res.registers == b.res.registers);
  CHECK(a.res.smem_static == b.res.smem_static);
  CHECK(a.res.smem_dynamic == b.res.smem_dynamic);
  CHECK(a.res.spill_stores == b.res.spill_stores);
  CHECK(a.res.spill_loads == b.res.spill_loads);
  CHECK(a.res.stack_frame == b.res.stack_frame);
  CHECK(a.res.wgmma_serialized == b.res.wgmma_serialized);
  CHECK(a.fitness == b.fitness);
  CHECK(a.device == b.device);
  CHECK(a.host == b.host);
  CHECK(a.created_at == b.created_at);
  REQUIRE(a.per_problem.size() == b.per_problem.size());
  for (size_t i = 0; i < a.per_problem.size(); ++i) check_same_measurement(a.per_problem[i], b.per_problem[i]);
}

void check_same_run(const RunInfo& a, const RunInfo& b) {
  CHECK(a.id == b.id);
  CHECK(a.kernel == b.kernel);
  CHECK(a.spec_origin == b.spec_origin);
  CHECK(a.spec_hash == b.spec_hash);
  CHECK(a.spec_text == b.spec_text);
  REQUIRE(a.problems.size() == b.problems.size());
  for (size_t i = 0; i < a.problems.size(); ++i) {
    CHECK(a.problems[i].dims == b.problems[i].dims);
    CHECK(a.problems[i].dtype == b.problems[i].dtype);
  }
  CHECK(a.dtype == b.dtype);
  CHECK(a.strategy == b.strategy);
  CHECK(a.seed == b.seed);
  CHECK(a.budget == b.budget);
  CHECK(a.elites_k == b.elites_k);
  CHECK(a.options_json == b.options_json);
  CHECK(a.device.name == b.device.name);
  CHECK(a.device.uuid == b.device.uuid);
  CHECK(a.device.cc == b.device.cc);
  CHECK(a.device.num_sms == b.device.num_sms);
  CHECK(a.device.driver_version == b.device.driver_version);
  CHECK(a.device.driver_string == b.device.driver_string);
  CHECK(a.device.runtime_version == b.device.runtime_version);
  CHECK(a.device.nvrtc_version == b.device.nvrtc_version);
  CHECK(a.device.arch == b.device.arch);
  CHECK(a.evotune_version == b.evotune_version);
  CHECK(a.status == b.status);
  CHECK(a.created_at == b.created_at);
  CHECK(a.finished_at == b.finished_at);
  CHECK(a.compile_only == b.compile_only);
  CHECK(a.stats.trials == b.stats.trials);
  CHECK(a.stats.invalid_draws == b.stats.invalid_draws);
  CHECK(a.stats.wall_s == b.stats.wall_s);
  CHECK(a.stats.compile_busy_s == b.stats.compile_busy_s);
  CHECK(a.stats.verify_s == b.stats.verify_s);
  CHECK(a.stats.bench_s == b.stats.bench_s);
  CHECK(a.stats.gpu_idle_s == b.stats.gpu_idle_s);
  CHECK(a.stats.compile_threads == b.stats.compile_threads);
  CHECK(a.stats.cache_hits == b.stats.cache_hits);
  CHECK(a.default_trial_id == b.default_trial_id);
  CHECK(a.best_trial_id == b.best_trial_id);
}

// Every row of every evotune table, as text: "unchanged" means equal dumps.
std::string dump(const std::string& path) {
  sql::Db db = sql::open(path, true, false);
  std::string out;
  for (const char* q : {"SELECT * FROM runs ORDER BY id", "SELECT * FROM trials ORDER BY id",
                        "SELECT * FROM measurements ORDER BY trial_id, problem",
                        "SELECT * FROM elites ORDER BY run_id, rank", "PRAGMA user_version"}) {
    sql::Stmt st(db.get(), q);
    while (st.step()) {
      for (int c = 0; c < st.columns(); ++c) out += st.text(c) + "|";
      out += "\n";
    }
  }
  return out;
}

int64_t count(const std::string& path, const std::string& query) {
  sql::Db db = sql::open(path, true, false);
  return sql::query_int(db.get(), query);
}

void sql_exec(const std::string& path, const std::string& statement) {
  sql::Db db = sql::open(path, false, false);
  sql::exec(db.get(), statement, "test");
}

}  // namespace

TEST_CASE("a new database has the latest schema in WAL mode with every table and view", "[store]") {
  TempDir dir;
  const std::string path = dir.file("evotune.db");
  Store s = Store::open(path);
  CHECK(s.schema_version() == Store::latest_schema_version());
  CHECK(Store::latest_schema_version() == 9);
  CHECK(s.path() == path);
  CHECK(s.mode() == Store::Mode::read_write);
  CHECK(s.last_run_id() == 0);
  CHECK(s.runs().empty());

  sql::Db raw = sql::open(path, false, false);
  CHECK(schema::user_version(raw.get()) == 9);
  sql::Stmt jm(raw.get(), "PRAGMA journal_mode");
  REQUIRE(jm.step());
  CHECK(jm.text(0) == "wal");
  std::vector<std::string> names = schema::user_tables(raw.get());
  for (const char* want : {"runs", "trials", "measurements", "elites", "profiles", "baselines", "v_runs", "v_trials",
                           "v_measurements", "v_elites", "v_best"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());

  // Foreign keys are on for the store's connection: a trial of another run is refused.
  int64_t a = s.create_run(sample_run());
  int64_t b = s.create_run(sample_run());
  Trial t = sample_trial(128);
  s.record_trial(a, t, {0});
  CHECK_THROWS_AS(s.set_default_trial(b, t.id), StoreError);
  CHECK(fs::exists(path + "-wal"));

  // Reopening an up-to-date database changes nothing.
  std::string before = dump(path);
  {
    Store again = Store::open(path);
    CHECK(again.schema_version() == 9);
  }
  CHECK(dump(path) == before);
}

TEST_CASE("runs round-trip through the store and JSON", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("db.sqlite"));
  RunInfo in = sample_run();
  int64_t id1 = s.create_run(in);
  RunInfo in2 = sample_run();
  in2.kernel = "sdpa_fwd";
  in2.compile_only = true;
  in2.status = "";  // defaults to running
  in2.created_at = "";
  in2.problems = {problem(1, 2, 3, Dtype::bf16)};
  int64_t id2 = s.create_run(in2);
  CHECK(id2 > id1);
  CHECK(s.last_run_id() == id2);

  auto out = s.run(id1);
  REQUIRE(out);
  in.id = id1;
  check_same_run(in, *out);
  CHECK_FALSE(s.run(id2 + 100));

  auto out2 = s.run(id2);
  REQUIRE(out2);
  CHECK(out2->status == "running");
  CHECK(out2->compile_only);
  CHECK_FALSE(out2->created_at.empty());
  CHECK(out2->problems[0].dtype == Dtype::bf16);

  std::vector<RunInfo> all = s.runs();
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == id2);  // newest first
  CHECK(all[1].id == id1);

  nlohmann::json j = *out;
  CHECK(j["seed"].get<uint64_t>() == 0xfedcba9876543210ULL);
  CHECK(j["options"]["tournament"] == 3);
  CHECK(j["device"]["name"] == "NVIDIA H200");
  CHECK(j["stats"]["cache_hits"] == 11);
  CHECK(j["finished_at"].is_null());
  CHECK(j["best_trial_id"].is_null());
  CHECK(j["shapes"][1] == "M=1024,N=512,K=256");
  RunInfo back = j.get<RunInfo>();
  check_same_run(*out, back);

  CHECK_THROWS_AS(s.create_run([] {
    RunInfo r = sample_run();
    r.status = "sleeping";
    return r;
  }()),
                  StoreError);
}

TEST_CASE("trials and measurements round-trip with every field", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("t.db"));
  int64_t run = s.create_run(sample_run());
  Trial ok = sample_trial(128);
  s.record_trial(run, ok, {0});
  CHECK(ok.id > 0);
  CHECK(ok.seq == 1);
  CHECK(ok.run_id == run);

  Trial bad = sample_trial(64, TrialStatus::incorrect);
  bad.device = -1;
  bad.created_at = "";
  bad.fitness = 42;  // meaningless for a failed trial: stored as NULL
  s.record_trial(run, bad, {ok.id});
  CHECK(bad.seq == 2);
  CHECK_FALSE(bad.created_at.empty());

  auto got = s.trial(ok.id);
  REQUIRE(got);
  check_same_trial(ok, *got);

  auto got_bad = s.trial(bad.id);
  REQUIRE(got_bad);
  CHECK(got_bad->fitness == 0);
  CHECK(got_bad->device == -1);
  CHECK(got_bad->error == "line one\nline two");
  bad.fitness = 0;
  check_same_trial(bad, *got_bad);
  CHECK(count(s.path(), "SELECT COUNT(*) FROM trials WHERE fitness IS NULL") == 1);
  CHECK(count(s.path(), "SELECT COUNT(*) FROM measurements") == 4);
  CHECK_FALSE(s.trial(bad.id + 1000));

  // NaN errors (a kernel that wrote NaN) come back as NaN.
  Trial nan_trial = sample_trial(32, TrialStatus::incorrect);
  nan_trial.per_problem[0].err.max_abs = std::nan("");
  nan_trial.per_problem[0].err.nan_count = 77;
  s.record_trial(run, nan_trial, {ok.id});
  auto got_nan = s.trial(nan_trial.id);
  REQUIRE(got_nan);
  CHECK(std::isnan(got_nan->per_problem[0].err.max_abs));
  CHECK(got_nan->per_problem[0].err.nan_count == 77);

  auto run_info = s.run(run);
  REQUIRE(run_info);
  CHECK(run_info->best_trial_id == ok.id);
  CHECK(run_info->stats.trials == 3);
}

TEST_CASE("a config is stored once per run: a duplicate throws and changes nothing", "[store]") {
  TempDir dir;
  const std::string path = dir.file("dup.db");
  Store s = Store::open(path);
  int64_t run = s.create_run(sample_run());
  int64_t other = s.create_run(sample_run());
  Trial first = sample_trial(128);
  s.record_trial(run, first, {0});
  Trial second = sample_trial(64, TrialStatus::ok, 50);
  s.record_trial(run, second, {0, first.id});

  const std::string before = dump(path);
  Trial dup = sample_trial(128, TrialStatus::compile_error);
  std::string msg = error_of([&] { s.record_trial(run, dup, {0}); });
  CHECK(contains(msg, "BLOCK_M=128,BLOCK_N=64,STAGES=3"));
  CHECK(contains(msg, "already trial #1"));
  CHECK(dump(path) == before);
  CHECK(dup.id == 0);
  CHECK(dup.seq == 0);

  // The same config in another run is fine, and seq counts per run.
  Trial elsewhere = sample_trial(128);
  s.record_trial(other, elsewhere, {0});
  CHECK(elsewhere.seq == 1);
  Trial third = sample_trial(256);
  s.record_trial(run, third, {second.id, first.id});
  CHECK(third.seq == 3);
}

TEST_CASE("a record_trial that fails part-way leaves no partial trial", "[store]") {
  TempDir dir;
  const std::string path = dir.file("rollback.db");
  Store s = Store::open(path);
  int64_t run = s.create_run(sample_run());
  int64_t other = s.create_run(sample_run());
  Trial foreign = sample_trial(16);
  s.record_trial(other, foreign, {0});
  Trial first = sample_trial(128);
  s.record_trial(run, first, {0});

  const std::string before = dump(path);
  SECTION("an elite from another run") {
    Trial t = sample_trial(64);
    std::string msg = error_of([&] { s.record_trial(run, t, {0, foreign.id}); });
    CHECK(contains(msg, "not a trial of run"));
  }
  SECTION("two measurements for one problem") {
    Trial t = sample_trial(64);
    t.per_problem[1].problem = 0;
    error_of([&] { s.record_trial(run, t, {0}); });
  }
  SECTION("the same elite twice") {
    Trial t = sample_trial(64);
    error_of([&] { s.record_trial(run, t, {0, 0}); });
  }
  SECTION("a run that does not exist") {
    Trial t = sample_trial(64);
    std::string msg = error_of([&] { s.record_trial(run + 100, t, {}); });
    CHECK(contains(msg, "no run"));
  }
  CHECK(dump(path) == before);
  // The store stays usable and the seq was not consumed.
  Trial next = sample_trial(64);
  s.record_trial(run, next, {0, first.id});
  CHECK(next.seq == 2);
}

TEST_CASE("elites are replaced on each trial and read back in rank order", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("elites.db"));
  int64_t run = s.create_run(sample_run());
  Trial a = sample_trial(16, TrialStatus::ok, 300);
  s.record_trial(run, a, {0});
  Trial b = sample_trial(32, TrialStatus::ok, 100);
  s.record_trial(run, b, {0, a.id});
  Trial c = sample_trial(64, TrialStatus::ok, 200);
  s.record_trial(run, c, {b.id, 0, a.id});

  std::vector<Trial> e = s.elites(run);
  REQUIRE(e.size() == 3);
  CHECK(e[0].id == b.id);
  CHECK(e[1].id == c.id);
  CHECK(e[2].id == a.id);
  check_same_trial(e[1], c);
  CHECK(s.run(run)->best_trial_id == b.id);

  // A failed trial leaves the population as the caller says; K can shrink.
  Trial d = sample_trial(8, TrialStatus::crashed);
  s.record_trial(run, d, {b.id, c.id});
  e = s.elites(run);
  REQUIRE(e.size() == 2);
  CHECK(e[0].id == b.id);
  CHECK(e[1].id == c.id);
  CHECK(count(s.path(), "SELECT COUNT(*) FROM elites") == 2);
  CHECK(count(s.path(), "SELECT trial_id FROM v_elites WHERE rank = 2") == c.id);

  // No elites given: the best ok trial by fitness is the run's best.
  Trial f = sample_trial(4, TrialStatus::timeout);
  s.record_trial(run, f, {});
  CHECK(s.elites(run).empty());
  CHECK(s.run(run)->best_trial_id == b.id);
  CHECK(s.elites(run + 7).empty());
}

TEST_CASE("the final re-timing keeps every sample, sets final_us and re-ranks the elites", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("retime.db"));
  int64_t run = s.create_run(sample_run());
  Trial a = sample_trial(16, TrialStatus::ok, 100);
  s.record_trial(run, a, {0});
  Trial b = sample_trial(32, TrialStatus::ok, 101);
  s.record_trial(run, b, {a.id, 0});
  Trial bad = sample_trial(64, TrialStatus::incorrect);
  s.record_trial(run, bad, {a.id, b.id});
  // Re-timed interleaved, b turns out faster: it becomes the best.
  std::vector<RetimeSample> samples;
  for (int round = 1; round <= 3; ++round) {
    samples.push_back({round, a.id, 0, 100.0 + round});
    samples.push_back({round, b.id, 0, 98.0 + round});
  }
  s.record_retime(run, samples, {{a.id, 102.0}, {b.id, 100.0}}, {b.id, a.id});
  std::vector<Trial> e = s.elites(run);
  REQUIRE(e.size() == 2);
  CHECK(e[0].id == b.id);
  CHECK(e[0].final_us == Approx(100.0));
  CHECK(e[0].fitness == Approx(b.fitness));  // what the search saw is kept
  CHECK(e[1].final_us == Approx(102.0));
  CHECK(s.run(run)->best_trial_id == b.id);
  CHECK(count(s.path(), "SELECT COUNT(*) FROM retimes") == 6);
  CHECK(count(s.path(), "SELECT trial_id FROM v_elites WHERE rank = 1") == b.id);
  CHECK(s.trial(bad.id)->final_us == 0);
  // A failed trial cannot be given a final time; nothing of the call is kept.
  CHECK_THROWS_AS(s.record_retime(run, {{4, a.id, 0, 1.0}}, {{bad.id, 1.0}}, {a.id}), StoreError);
  CHECK(count(s.path(), "SELECT COUNT(*) FROM retimes") == 6);
  CHECK(s.elites(run)[0].id == b.id);
}

TEST_CASE("trials are listed in seq order, optionally of one status", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("status.db"));
  int64_t run = s.create_run(sample_run());
  int64_t other = s.create_run(sample_run());
  const std::vector<TrialStatus> sts = {
      TrialStatus::ok,           TrialStatus::compile_error, TrialStatus::ok,
      TrialStatus::incorrect,    TrialStatus::invalid,       TrialStatus::resource_rejected,
      TrialStatus::launch_error, TrialStatus::crashed,       TrialStatus::timeout};
  for (size_t i = 0; i < sts.size(); ++i) {
    Trial t = sample_trial(static_cast<int>(i + 1), sts[i]);
    s.record_trial(run, t, {});
  }
  Trial x = sample_trial(1000);
  s.record_trial(other, x, {0});

  std::vector<Trial> all = s.trials(run);
  REQUIRE(all.size() == sts.size());
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].seq == static_cast<int>(i + 1));
    CHECK(all[i].status == sts[i]);
    CHECK(all[i].per_problem.size() == 2);
  }
  std::vector<Trial> ok = s.trials(run, TrialStatus::ok);
  REQUIRE(ok.size() == 2);
  CHECK(ok[0].seq == 1);
  CHECK(ok[1].seq == 3);
  CHECK(ok[1].per_problem[1].problem == 1);
  CHECK(s.trials(run, TrialStatus::crashed).size() == 1);
  CHECK(s.trials(other, TrialStatus::crashed).empty());
  // Budget counts evaluated trials: constraint rejections cost none.
  CHECK(s.run(run)->stats.trials == static_cast<int>(sts.size()) - 1);
}

TEST_CASE("run lifecycle: default trial, stats, finish and reopen", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("life.db"));
  int64_t run = s.create_run(sample_run());
  Trial def = sample_trial(128, TrialStatus::ok, 400);
  s.record_trial(run, def, {0});
  Trial best = sample_trial(64, TrialStatus::ok, 100);
  s.record_trial(run, best, {0, def.id});
  s.set_default_trial(run, def.id);
  CHECK(s.run(run)->default_trial_id == def.id);
  CHECK_THROWS_AS(s.set_default_trial(run, def.id + 99), StoreError);

  RunStats st{2, 9, 61.5, 120.25, 3.5, 20.75, 1.25, 16, 1};
  s.update_stats(run, st);
  RunInfo r = *s.run(run);
  CHECK(r.stats.invalid_draws == 9);
  CHECK(r.stats.compile_busy_s == 120.25);
  CHECK(r.stats.compile_threads == 16);
  CHECK_THROWS_AS(s.update_stats(run + 5, st), StoreError);

  st.wall_s = 70;
  s.finish_run(run, "done", st);
  r = *s.run(run);
  CHECK(r.status == "done");
  CHECK_FALSE(r.finished_at.empty());
  CHECK(r.stats.wall_s == 70);
  CHECK_THROWS_AS(s.finish_run(run, "running", st), StoreError);
  CHECK_THROWS_AS(s.finish_run(run, "exploded", st), StoreError);

  s.reopen_run(run);
  r = *s.run(run);
  CHECK(r.status == "running");
  CHECK(r.finished_at.empty());
  CHECK_THROWS_AS(s.reopen_run(run + 5), StoreError);

  // The views answer the usual questions in one line.
  CHECK(count(s.path(), "SELECT n_ok FROM v_runs WHERE run_id = 1") == 2);
  CHECK(count(s.path(), "SELECT trials FROM v_runs WHERE run_id = 1") == 2);
  CHECK(count(s.path(), "SELECT trial_id FROM v_best WHERE run_id = 1") == best.id);
  CHECK(count(s.path(), "SELECT CAST(speedup * 100 AS INTEGER) FROM v_best WHERE run_id = 1") == 400);
  CHECK(count(s.path(), "SELECT CAST(best_p50_us AS INTEGER) FROM v_runs WHERE run_id = 1") == 75);
  CHECK(count(s.path(), "SELECT COUNT(*) FROM v_measurements WHERE run_id = 1") == 4);
}

TEST_CASE("v_trials flattens p50 for single-problem runs", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("views.db"));
  RunInfo info = sample_run();
  info.problems = {problem(64, 64, 64)};
  int64_t run = s.create_run(info);
  Trial t = sample_trial(128, TrialStatus::ok, 123);
  t.per_problem.resize(1);
  t.fitness = 123;
  s.record_trial(run, t, {0});
  Trial bad = sample_trial(64, TrialStatus::compile_error);
  bad.per_problem.clear();
  s.record_trial(run, bad, {t.id});
  CHECK(count(s.path(), "SELECT CAST(p50_us AS INTEGER) FROM v_trials WHERE seq = 1") == 123);
  CHECK(count(s.path(), "SELECT p50_us IS NULL FROM v_trials WHERE seq = 2") == 1);
  CHECK(count(s.path(), "SELECT error_line = 'line one' FROM v_trials WHERE seq = 2") == 1);
}

TEST_CASE("read-only mode never creates, migrates or writes", "[store]") {
  TempDir dir;
  const std::string path = dir.file("ro.db");
  std::string msg = error_of([&] { Store::open(path, Store::Mode::read_only); });
  CHECK(contains(msg, "no database at " + path));
  CHECK_FALSE(fs::exists(path));

  {
    Store w = Store::open(path);
    int64_t run = w.create_run(sample_run());
    Trial t = sample_trial(128);
    w.record_trial(run, t, {0});
  }
  const std::string before = dump(path);
  Store r = Store::open(path, Store::Mode::read_only);
  CHECK(r.mode() == Store::Mode::read_only);
  CHECK(r.schema_version() == Store::latest_schema_version());
  REQUIRE(r.runs().size() == 1);
  CHECK(r.trials(1).size() == 1);
  CHECK(r.elites(1).size() == 1);
  Trial t = sample_trial(64);
  CHECK(contains(error_of([&] { r.record_trial(1, t, {}); }), "read-only"));
  CHECK_THROWS_AS(r.create_run(sample_run()), StoreError);
  CHECK_THROWS_AS(r.finish_run(1, "done", {}), StoreError);
  CHECK_THROWS_AS(r.reopen_run(1), StoreError);
  CHECK_THROWS_AS(r.update_stats(1, {}), StoreError);
  CHECK_THROWS_AS(r.set_default_trial(1, 1), StoreError);
  CHECK(dump(path) == before);

  // An empty file holds nothing to read yet.
  const std::string empty = dir.file("empty.db");
  write_file(empty, "");
  msg = error_of([&] { Store::open(empty, Store::Mode::read_only); });
  CHECK(contains(msg, "run a write command"));
  CHECK(fs::file_size(empty) == 0);
}

TEST_CASE("open refuses paths a user must fix, saying why", "[store]") {
  TempDir dir;

  SECTION("a directory that does not exist") {
    const std::string path = dir.file("missing/sub/evotune.db");
    std::string msg = error_of([&] { Store::open(path); });
    CHECK(contains(msg, path));
    CHECK(contains(msg, "does not exist"));
  }

  SECTION("a directory that is not writable") {
    std::string path;
    if (::geteuid() != 0) {
      fs::create_directories(dir.path / "locked");
      fs::permissions(dir.path / "locked", fs::perms::owner_read | fs::perms::owner_exec);
      path = dir.file("locked/evotune.db");
      std::string msg = error_of([&] { Store::open(path); });
      CHECK(contains(msg, path));
      CHECK(contains(msg, "not writable"));
      fs::permissions(dir.path / "locked", fs::perms::owner_all);
    } else {
      // Root writes anywhere permissions allow; sysfs refuses it files.
      path = "/sys/evotune_store_test.db";
      if (std::ofstream(path)) {
        fs::remove(path);
        WARN("cannot make an unwritable directory here; skipped");
        return;
      }
      std::string msg = error_of([&] { Store::open(path); });
      CHECK(contains(msg, path));
      CHECK(contains(msg, "Permission denied"));
    }
    CHECK_FALSE(fs::exists(path));
  }

  SECTION("a database file the user may not write") {
    const std::string path = dir.file("readonly.db");
    {
      Store s = Store::open(path);
      s.create_run(sample_run());
    }
    fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    if (::geteuid() == 0) {
      WARN("running as root, who may write any file: the write-permission check is skipped");
    } else {
      std::string msg = error_of([&] { Store::open(path); });
      CHECK(contains(msg, path));
      CHECK(contains(msg, "for writing"));
      CHECK(contains(msg, "Permission denied"));
    }
    // Reading still works.
    Store r = Store::open(path, Store::Mode::read_only);
    CHECK(r.runs().size() == 1);
  }

  SECTION("a file that is not a database is left untouched") {
    const std::string path = dir.file("notes.txt");
    const std::string text = "BLOCK_M=128 was the best, remember to export it\n";
    write_file(path, text);
    std::string msg = error_of([&] { Store::open(path); });
    CHECK(contains(msg, path + " is not an evotune database (file is not a database)"));
    CHECK(slurp(path) == text);
    msg = error_of([&] { Store::open(path, Store::Mode::read_only); });
    CHECK(contains(msg, "file is not a database"));
    CHECK(slurp(path) == text);
    CHECK_FALSE(fs::exists(path + "-wal"));

    // The SQLite magic followed by garbage: SQLite itself says so.
    std::string fake = std::string("SQLite format 3", 16) + std::string(4000, 'x');
    const std::string fake_path = dir.file("fake.db");
    write_file(fake_path, fake);
    msg = error_of([&] { Store::open(fake_path); });
    CHECK(contains(msg, fake_path));
    CHECK(slurp(fake_path) == fake);
  }

  SECTION("a database of a newer evotune") {
    const std::string path = dir.file("future.db");
    { Store s = Store::open(path); }
    {
      sql::Db raw = sql::open(path, false, false);
      sql::exec(raw.get(), "PRAGMA user_version = 99", "test");
    }
    const std::string before = slurp(path);
    std::string msg = error_of([&] { Store::open(path); });
    CHECK(contains(msg, "created by a newer evotune (schema 99 > 9)"));
    msg = error_of([&] { Store::open(path, Store::Mode::read_only); });
    CHECK(contains(msg, "schema 99 > 9"));
    CHECK(slurp(path) == before);
  }

  SECTION("an SQLite database of another program") {
    const std::string path = dir.file("other.db");
    {
      sql::Db raw = sql::open(path, false, true);
      sql::exec(raw.get(), "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)", "test");
    }
    const std::string before = slurp(path);
    std::string msg = error_of([&] { Store::open(path); });
    CHECK(contains(msg, "another program"));
    CHECK(contains(msg, "photos"));
    CHECK(slurp(path) == before);
    sql::Db raw = sql::open(path, true, false);
    CHECK(schema::user_tables(raw.get()) == std::vector<std::string>{"photos"});

    // One that sets user_version for its own purposes is not taken for ours either.
    const std::string versioned = dir.file("versioned.db");
    {
      sql::Db w = sql::open(versioned, false, true);
      sql::exec(w.get(), "CREATE TABLE notes (body TEXT); PRAGMA user_version = 7", "test");
    }
    msg = error_of([&] { Store::open(versioned); });
    CHECK(contains(msg, "is not an evotune database"));
    CHECK(contains(msg, "no runs table"));
  }

  SECTION("a directory given as the database") {
    std::string msg = error_of([&] { Store::open(dir.path.string()); });
    CHECK(contains(msg, "is a directory"));
  }
}

TEST_CASE("a version-1 database is read as it is and upgraded by a write open", "[store]") {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  schema::create_at_version(path, 1);
  int64_t run_id = 0, t1 = 0, t2 = 0;
  {
    // What evotune 0.1 wrote: no time breakdown, no trial device or cache_hit.
    sql::Db raw = sql::open(path, false, false);
    CHECK(schema::user_version(raw.get()) == 1);
    sql::exec(raw.get(), "PRAGMA foreign_keys = ON", "test");
    sql::Stmt run(
        raw.get(),
        "INSERT INTO runs (kernel, spec_origin, spec_hash, spec_text, problems_json, shapes, dtype, strategy, "
        "seed, budget, elites_k, device_name, device_cc, status, created_at, trials_evaluated, wall_s) "
        "VALUES ('gemm', 'builtin', 'abc', '[kernel]', ?1, 'M=64,N=64,K=64', 'fp16', 'evo', 7, 32, 4, "
        "'NVIDIA L4', 89, 'done', '2025-01-01T00:00:00Z', 2, 12.5)");
    run.bind_text(1, nlohmann::json(std::vector<Problem>{problem(64, 64, 64)}).dump()).run();
    run_id = sql::query_int(raw.get(), "SELECT MAX(id) FROM runs");
    sql::Stmt trial(raw.get(),
                    "INSERT INTO trials (run_id, seq, config, config_hash, config_json, status, error, registers, "
                    "fitness, created_at) VALUES (?1, ?2, ?3, ?4, '{}', ?5, '', 96, ?6, '2025-01-01T00:01:00Z')");
    Config c1 = Config::parse("BLOCK_M=64,BLOCK_N=64");
    Config c2 = Config::parse("BLOCK_M=128,BLOCK_N=64");
    trial.bind_int(1, run_id).bind_int(2, 1).bind_text(3, c1.canonical()).bind_text(4, hex64(c1.hash()));
    trial.bind_text(5, "ok").bind_real(6, 55.5).run();
    t1 = sql::query_int(raw.get(), "SELECT MAX(id) FROM trials");
    trial.reset();
    trial.bind_int(1, run_id).bind_int(2, 2).bind_text(3, c2.canonical()).bind_text(4, hex64(c2.hash()));
    trial.bind_text(5, "compile_error").bind_null(6).run();
    t2 = sql::query_int(raw.get(), "SELECT MAX(id) FROM trials");
    sql::Stmt m(
        raw.get(),
        "INSERT INTO measurements (trial_id, problem, p50_us, samples, max_abs) VALUES (?1, 0, 55.5, 100, 0.001)");
    m.bind_int(1, t1).run();
    sql::Stmt e(raw.get(), "INSERT INTO elites (run_id, rank, trial_id) VALUES (?1, 1, ?2)");
    e.bind_int(1, run_id).bind_int(2, t1).run();
    sql::Stmt best(raw.get(), "UPDATE runs SET best_trial_id = ?1 WHERE id = ?2");
    best.bind_int(1, t1).bind_int(2, run_id).run();
  }

  // Read-only: readable at version 1, and left at version 1.
  {
    Store r = Store::open(path, Store::Mode::read_only);
    CHECK(r.schema_version() == 1);
    auto run = r.run(run_id);
    REQUIRE(run);
    CHECK(run->device.name == "NVIDIA L4");
    CHECK(run->stats.wall_s == 12.5);
    CHECK(run->stats.compile_busy_s == 0);
    std::vector<Trial> ts = r.trials(run_id);
    REQUIRE(ts.size() == 2);
    CHECK(ts[0].device == -1);
    CHECK(ts[0].host.empty());
    CHECK(ts[0].res.wgmma_serialized == 0);
    CHECK_FALSE(ts[0].cache_hit);
    CHECK(ts[0].per_problem.size() == 1);
    CHECK(r.elites(run_id).size() == 1);
  }
  CHECK(count(path, "PRAGMA user_version") == 1);

  // A write open migrates in place and keeps every row.
  Store s = Store::open(path);
  CHECK(s.schema_version() == Store::latest_schema_version());
  CHECK(count(path, "PRAGMA user_version") == Store::latest_schema_version());
  auto run = s.run(run_id);
  REQUIRE(run);
  CHECK(run->kernel == "gemm");
  CHECK(run->seed == 7);
  CHECK(run->status == "done");
  CHECK(run->stats.trials == 2);
  CHECK(run->stats.cache_hits == 0);
  CHECK(run->best_trial_id == t1);
  CHECK(run->problems.size() == 1);
  std::vector<Trial> ts = s.trials(run_id);
  REQUIRE(ts.size() == 2);
  CHECK(ts[0].id == t1);
  CHECK(ts[0].fitness == 55.5);
  CHECK(ts[0].res.registers == 96);
  CHECK(ts[0].per_problem[0].p50_us == 55.5);
  CHECK(ts[0].device == -1);
  CHECK(ts[0].host.empty());
  CHECK(ts[1].id == t2);
  CHECK(ts[1].status == TrialStatus::compile_error);
  std::vector<Trial> el = s.elites(run_id);
  REQUIRE(el.size() == 1);
  CHECK(el[0].id == t1);

  // The upgraded file takes new trials, rejects old configs, and has the views.
  s.reopen_run(run_id);
  Trial dup;
  dup.config = Config::parse("BLOCK_M=64,BLOCK_N=64");
  CHECK_THROWS_AS(s.record_trial(run_id, dup, {}), StoreError);
  Trial t3;
  t3.config = Config::parse("BLOCK_M=256,BLOCK_N=64");
  t3.fitness = 40;
  t3.device = 0;
  t3.cache_hit = true;
  t3.per_problem = {meas(0, 40)};
  s.record_trial(run_id, t3, {0, t1});
  CHECK(t3.seq == 3);
  CHECK(s.trial(t3.id)->cache_hit);
  CHECK(s.trial(t3.id)->device == 0);
  CHECK(count(path, "SELECT n_compile_error FROM v_runs") == 1);
}

TEST_CASE("two stores on one file see each other's committed trials", "[store]") {
  TempDir dir;
  const std::string path = dir.file("shared.db");
  Store a = Store::open(path);
  Store b = Store::open(path);
  int64_t run = a.create_run(sample_run());
  REQUIRE(b.run(run));
  Trial t1 = sample_trial(128);
  a.record_trial(run, t1, {0});
  std::vector<Trial> seen = b.trials(run);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].id == t1.id);
  CHECK(b.elites(run).size() == 1);

  Trial t2 = sample_trial(64);
  b.record_trial(run, t2, {0, t1.id});
  CHECK(t2.seq == 2);
  CHECK(a.trials(run).size() == 2);
  CHECK(a.elites(run)[0].id == t2.id);

  Store r = Store::open(path, Store::Mode::read_only);
  CHECK(r.trials(run).size() == 2);
  Trial t3 = sample_trial(32);
  a.record_trial(run, t3, {0, t2.id, t1.id});
  CHECK(r.trials(run).size() == 3);

  // The same config from the second store is still a duplicate.
  Trial again = sample_trial(32);
  CHECK_THROWS_AS(b.record_trial(run, again, {}), StoreError);
}

TEST_CASE("two writers in parallel threads never collide on seq", "[store]") {
  TempDir dir;
  const std::string path = dir.file("parallel.db");
  int64_t run = 0;
  {
    Store s = Store::open(path);
    run = s.create_run(sample_run());
  }
  std::atomic<int> failures{0};
  auto writer = [&](int base) {
    try {
      Store s = Store::open(path);
      for (int i = 0; i < 25; ++i) {
        Trial t = sample_trial(base + i);
        s.record_trial(run, t, {0});
      }
    } catch (const std::exception&) {
      ++failures;
    }
  };
  std::thread a(writer, 1000), b(writer, 2000);
  a.join();
  b.join();
  CHECK(failures == 0);
  Store s = Store::open(path, Store::Mode::read_only);
  std::vector<Trial> ts = s.trials(run);
  REQUIRE(ts.size() == 50);
  for (size_t i = 0; i < ts.size(); ++i) CHECK(ts[i].seq == static_cast<int>(i + 1));
  CHECK(s.elites(run).size() == 1);
}

TEST_CASE("stores move and deleting a run cascades", "[store]") {
  TempDir dir;
  const std::string path = dir.file("move.db");
  Store s = Store::open(path);
  int64_t run = s.create_run(sample_run());
  Store moved = std::move(s);
  Trial t = sample_trial(128);
  moved.record_trial(run, t, {0});
  Store other = Store::open(dir.file("other.db"));
  other = std::move(moved);
  CHECK(other.path() == path);
  CHECK(other.trials(run).size() == 1);

  {
    sql::Db raw = sql::open(path, false, false);
    sql::exec(raw.get(), "PRAGMA foreign_keys = ON", "test");
    sql::Stmt del(raw.get(), "DELETE FROM runs WHERE id = ?1");
    del.bind_int(1, run).run();
  }
  CHECK(count(path, "SELECT COUNT(*) FROM trials") == 0);
  CHECK(count(path, "SELECT COUNT(*) FROM measurements") == 0);
  CHECK(count(path, "SELECT COUNT(*) FROM elites") == 0);
}

// Another process creating the file is played by threads (SQLite locks the
// same way between connections of one process): every read-only open while
// it happens finds either no database or the whole latest schema, never an
// empty file or a schema half made, and two creators make one database.
TEST_CASE("a database being created is absent or complete to readers", "[store]") {
  TempDir dir;
  for (int round = 0; round < 20; ++round) {
    const std::string path = dir.file("new" + std::to_string(round) + ".db");
    std::atomic<int> created{0};
    std::vector<std::string> creator_errors(2);
    auto create = [&](size_t i) {
      try {
        Store s = Store::open(path);
        if (s.schema_version() != Store::latest_schema_version()) creator_errors[i] = "not migrated";
      } catch (const std::exception& e) {
        creator_errors[i] = e.what();
      }
      ++created;
    };
    std::thread a(create, 0), b(create, 1);
    std::vector<std::string> errors;
    int complete = 0;
    for (bool last = false; !last;) {
      last = created.load() == 2;
      try {
        Store r = Store::open(path, Store::Mode::read_only);
        if (r.schema_version() != Store::latest_schema_version())
          errors.push_back("schema version " + std::to_string(r.schema_version()));
        else if (!r.runs().empty())
          errors.push_back("runs in a new database");
        else
          ++complete;
      } catch (const StoreError& e) {
        if (!contains(e.what(), "no database at")) errors.push_back(e.what());
      }
    }
    a.join();
    b.join();
    INFO("round " << round);
    CHECK(creator_errors == std::vector<std::string>(2));
    CHECK(errors == std::vector<std::string>{});
    CHECK(complete > 0);
    // Nothing of the creation is left beside the database (and its WAL files).
    std::vector<std::string> others;
    for (const auto& e : fs::directory_iterator(dir.path)) {
      std::string p = e.path().string();
      if (p != path && p != path + "-wal" && p != path + "-shm" &&
          p.find("/new" + std::to_string(round) + ".") != std::string::npos)
        others.push_back(p);
    }
    CHECK(others == std::vector<std::string>{});
  }
}

namespace {

// Runs `f` where directory permissions apply: here, or when the tests run as
// root (who writes anywhere), in a child process that has become user nobody.
// Returns what `f` returned or the message of what it threw, prefixed by
// "error: "; nullopt when no such place can be had (the caller skips).
std::optional<std::string> where_permissions_apply(const std::function<std::string()>& f) {
  auto call = [&]() -> std::string {
    try {
      return f();
    } catch (const std::exception& e) {
      return std::string("error: ") + e.what();
    }
  };
  if (::geteuid() != 0) return call();
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    ::close(fds[0]);
    const uid_t nobody = 65534;
    std::string out = ::setgroups(0, nullptr) == 0 && ::setgid(nobody) == 0 && ::setuid(nobody) == 0
                          ? "ran: " + call()
                          : "cannot become user nobody";
    ssize_t n = ::write(fds[1], out.data(), out.size());
    ::_exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (out.rfind("ran: ", 0) != 0) {
    WARN("running as root and " << (out.empty() ? "the child failed" : out) << ": skipped");
    return std::nullopt;
  }
  return out.substr(5);
}

// Read-only permissions for everyone.
void make_read_only(const fs::path& p) {
  using fs::perms;
  fs::permissions(p, perms::owner_read | perms::owner_exec | perms::group_read | perms::group_exec |
                         perms::others_read | perms::others_exec);
}

}  // namespace

// A WAL database is read through PATH-shm, which SQLite creates beside it;
// in a directory the user cannot write, a database closed cleanly (no
// PATH-wal: every commit is in the file) is still read, and one whose log a
// crashed writer left behind gets a message saying what to do.
TEST_CASE("a database in a directory the user may not write is read, or says what to do", "[store]") {
  TempDir dir;
  fs::permissions(dir.path, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  const fs::path shelf = dir.path / "shelf";
  fs::create_directories(shelf);
  const std::string path = (shelf / "results.db").string();
  int64_t run = 0;
  {
    Store w = Store::open(path);
    run = w.create_run(sample_run());
    Trial t = sample_trial(128);
    w.record_trial(run, t, {0});
  }
  REQUIRE_FALSE(fs::exists(path + "-wal"));
  make_read_only(shelf);
  auto read = [&] {
    Store r = Store::open(path, Store::Mode::read_only);
    return std::to_string(r.runs().size()) + " run, " + std::to_string(r.trials(run).size()) + " trial";
  };
  auto got = where_permissions_apply(read);
  if (got) CHECK(*got == "1 run, 1 trial");
  CHECK_FALSE(fs::exists(path + "-wal"));
  CHECK_FALSE(fs::exists(path + "-shm"));

  // A log that is not in the file yet: the copy of a database while a writer
  // had it open.
  const fs::path crashed = dir.path / "crashed";
  fs::create_directories(crashed);
  const std::string copy = (crashed / "results.db").string();
  {
    Store w = Store::open(dir.file("live.db"));
    int64_t r = w.create_run(sample_run());
    Trial t = sample_trial(64);
    w.record_trial(r, t, {0});
    REQUIRE(fs::file_size(dir.file("live.db-wal")) > 0);
    fs::copy_file(dir.file("live.db"), copy);
    fs::copy_file(dir.file("live.db-wal"), copy + "-wal");
  }
  make_read_only(crashed);
  got = where_permissions_apply([&] {
    Store r = Store::open(copy, Store::Mode::read_only);
    return std::to_string(r.runs().size()) + " run";
  });
  if (got) {
    CHECK(contains(*got, copy + "-wal"));
    CHECK(contains(*got, "copy"));
    CHECK(contains(*got, "writable"));
    INFO(*got);
    CHECK_FALSE(contains(*got, "attempt to write a readonly database"));
  }
}

TEST_CASE("profiles: one per trial and problem, a new one replaces the old, read back in trial order", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("p.db"));
  int64_t run = s.create_run(sample_run());
  Trial a = sample_trial(128), b = sample_trial(64);
  s.record_trial(run, a, {0});
  s.record_trial(run, b, {a.id, 0});
  CHECK(s.profiles(run).empty());
  KernelProfile p;
  p.kernel = "gemm";
  p.duration_us = 12.5;
  p.tensor_pct = 71.5;
  p.registers = 168;
  p.smem_bytes = 83200;
  p.grid = 132;
  p.block = 384;
  p.stalls = {{"long_scoreboard", 5.74}, {"wait", 1.54}};
  s.record_profile(run, {b.id, "", 0, p, "ncu 2025.3", ""});
  p.duration_us = 20;
  s.record_profile(run, {a.id, "", 0, p, "ncu 2025.3", ""});
  p.duration_us = 19;  // profiled again: replaces
  s.record_profile(run, {a.id, "", 0, p, "ncu 2025.3", ""});
  std::vector<TrialProfile> got = s.profiles(run);
  REQUIRE(got.size() == 2);
  CHECK(got[0].trial_id == a.id);  // by trial order, not by when profiled
  CHECK(got[0].profile.duration_us == 19);
  CHECK(got[1].trial_id == b.id);
  CHECK(got[1].profile.duration_us == 12.5);
  CHECK(got[1].profile.tensor_pct == 71.5);
  CHECK(got[1].profile.smem_bytes == 83200);
  CHECK(got[1].profile.stalls == p.stalls);
  CHECK(got[1].tool == "ncu 2025.3");
  CHECK_FALSE(got[1].created_at.empty());
  // A profile names a trial of its run and a positive duration.
  p.duration_us = 0;
  CHECK_THROWS_AS(s.record_profile(run, {a.id, "", 1, p, "", ""}), StoreError);
  Store ro = Store::open(dir.file("p.db"), Store::Mode::read_only);
  CHECK_THROWS_AS(ro.record_profile(run, {a.id, "", 0, p, "", ""}), StoreError);
}

TEST_CASE("a version-6 database's trial profiles are read as they are and kept by the upgrade", "[store]") {
  TempDir dir;
  const std::string path = dir.file("v6.db");
  schema::create_at_version(path, 6);
  {
    sql::Db raw = sql::open(path, false, false);
    sql::exec(raw.get(),
              "INSERT INTO runs (id, kernel, spec_origin, spec_hash, spec_text, problems_json, shapes, dtype, "
              "strategy, seed, budget, elites_k, device_name, device_cc, status, created_at, trials_evaluated, wall_s) "
              "VALUES (1, 'gemm', 'builtin', 'abc', '[kernel]', '[]', '', 'fp16', 'evo', 7, 32, 4, 'NVIDIA L4', 89, "
              "'done', '2025-01-01T00:00:00Z', 1, 1);"
              "INSERT INTO trials (id, run_id, seq, config, config_hash, config_json, status, error, registers, "
              "fitness, created_at) VALUES (5, 1, 1, 'A=1', 'h', '{}', 'ok', '', 96, 10, '2025-01-01T00:01:00Z');"
              "INSERT INTO profiles (run_id, trial_id, problem, kernel, duration_us, tensor_pct, stalls, tool, "
              "created_at) VALUES (1, 5, 0, 'gemm', 9.5, 70, '[[\"wait\", 1.5]]', 'ncu 2025.3', 'then');",
              "test");
  }
  {
    Store r = Store::open(path, Store::Mode::read_only);
    std::vector<TrialProfile> got = r.profiles(1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].trial_id == 5);
    CHECK(got[0].baseline.empty());
  }
  Store s = Store::open(path);
  CHECK(s.schema_version() == Store::latest_schema_version());
  std::vector<TrialProfile> got = s.profiles(1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].trial_id == 5);
  CHECK(got[0].baseline.empty());
  CHECK(got[0].profile.duration_us == 9.5);
  CHECK(got[0].profile.tensor_pct == 70);
  CHECK(got[0].profile.stalls == std::vector<std::pair<std::string, double>>{{"wait", 1.5}});
  CHECK(got[0].tool == "ncu 2025.3");
  CHECK(got[0].created_at == "then");
  // Deleting the trial still takes its profile with it.
  sql_exec(path, "PRAGMA foreign_keys = ON; DELETE FROM trials WHERE id = 5");
  CHECK(count(path, "SELECT COUNT(*) FROM profiles") == 0);
}

TEST_CASE("profiles of baselines: one per name and problem beside the trials' profiles, listed after them", "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("bp.db"));
  int64_t run = s.create_run(sample_run());
  Trial a = sample_trial(128);
  s.record_trial(run, a, {0});
  KernelProfile p;
  p.kernel = "sm90_xmma_gemm_bf16";
  p.duration_us = 40;
  p.tensor_pct = 88;
  s.record_profile(run, {0, "cublaslt", 0, p, "ncu", ""});
  p.duration_us = 41;
  s.record_profile(run, {0, "cublaslt-top8", 0, p, "ncu", ""});
  p.duration_us = 39;  // profiled again: replaces
  s.record_profile(run, {0, "cublaslt", 0, p, "ncu", ""});
  p.kernel = "gemm";
  p.duration_us = 50;
  s.record_profile(run, {a.id, "", 0, p, "ncu", ""});
  std::vector<TrialProfile> got = s.profiles(run);
  REQUIRE(got.size() == 3);
  CHECK(got[0].trial_id == a.id);
  CHECK(got[0].baseline.empty());
  CHECK(got[1].baseline == "cublaslt");
  CHECK(got[1].trial_id == 0);
  CHECK(got[1].profile.duration_us == 39);
  CHECK(got[1].profile.tensor_pct == 88);
  CHECK(got[2].baseline == "cublaslt-top8");
  CHECK(count(s.path(), "SELECT COUNT(*) FROM profiles WHERE trial_id IS NULL") == 2);
  // A row is a trial's or a baseline's, never both nor neither.
  CHECK_THROWS_AS(sql_exec(s.path(),
                           "INSERT INTO profiles (run_id, trial_id, baseline, problem, kernel, duration_us, "
                           "created_at) VALUES (1, 1, 'x', 0, 'k', 1, 'now')"),
                  sql::SqlError);
  CHECK_THROWS_AS(sql_exec(s.path(),
                           "INSERT INTO profiles (run_id, problem, kernel, duration_us, created_at) "
                           "VALUES (1, 0, 'k', 1, 'now')"),
                  sql::SqlError);
}

TEST_CASE("baselines: one per run, problem and name, replaced when measured again, skipped ones keep their reason",
          "[store]") {
  TempDir dir;
  Store s = Store::open(dir.file("b.db"));
  int64_t run = s.create_run(sample_run());
  CHECK(s.baselines(run).empty());
  BaselineResult lt;
  lt.problem = 0;
  lt.name = "cublaslt";
  lt.library = "cublaslt";
  lt.detail = "cuBLASLt 13.0.2, algo 21";
  lt.m.p50_us = 51.5;
  lt.m.samples = 40;
  lt.m.err.max_abs = 0.004;
  s.record_baseline(run, lt);
  lt.m.p50_us = 50.25;  // measured again: replaces
  s.record_baseline(run, lt);
  BaselineResult skipped;
  skipped.name = "cudnn";
  skipped.library = "torch_sdpa";
  skipped.status = "skipped";
  skipped.reason = "PyTorch not installed";
  s.record_baseline(run, skipped);
  std::vector<BaselineResult> got = s.baselines(run);
  REQUIRE(got.size() == 2);
  CHECK(got[0].name == "cublaslt");
  CHECK(got[0].m.p50_us == 50.25);
  CHECK(got[0].m.samples == 40);
  CHECK(got[0].m.err.max_abs == 0.004);
  CHECK(got[0].detail == "cuBLASLt 13.0.2, algo 21");
  CHECK(got[1].status == "skipped");
  CHECK(got[1].reason == "PyTorch not installed");
  CHECK(got[1].m.p50_us == 0);
  skipped.status = "lost";  // not a status
  CHECK_THROWS_AS(s.record_baseline(run, skipped), StoreError);
  // Summarized over the run's problems: a baseline ok on all has a time, the
  // trial's speedup uses its re-timed time.
  std::vector<BaselineSummary> sum = summarize_baselines(got, 1);
  REQUIRE(sum.size() == 2);
  CHECK(sum[0].us == Approx(50.25));  // a geometric mean: exp(log(x)) need not be x to the last bit
  CHECK(sum[1].us == 0);
  REQUIRE(sum[1].not_ok());
  CHECK(sum[1].not_ok()->reason == "PyTorch not installed");
  Trial t = sample_trial(100);
  t.final_us = 25.125;
  CHECK(speedup_over(t, sum[0]) == Approx(2.0));
  CHECK(summarize_baselines(got, 2)[0].us == 0);  // not measured on problem 1
}
