// The tuning session's seams, without a GPU: the plan resolved from options,
// the limits a dispatch carries, and the replay evaluator's staging and
// simulated clock (tests/data/ holds datasets measured on an H200).
#include <algorithm>
#include <future>

#include "core/error.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"
#include "tune/plan.hpp"
#include "tune/replay.hpp"
#include "tune/search.hpp"
#include "tune/window.hpp"

using namespace evotune;

namespace {

TuneOptions replay_options(const evotune_test::TempDir& t) {
  TuneOptions o;
  o.replay_path = evotune_test::source_dir() + "/tests/data/sdpa_fwd_h200.json";
  o.db_path = (t.path / "t.db").string();
  o.compile_threads = 2;
  return o;
}

}  // namespace

TEST_CASE("a replay plan takes the dataset's kernel, problems and device; check shapes come after, untimed", "[tune]") {
  evotune_test::TempDir t;
  TuneOptions o = replay_options(t);
  o.gpus = "3";
  o.seed_configs = {"BLOCK_M=64", "BLOCK_M=64,BLOCK_N=64"};
  const TunePlan p = resolve_plan(o);
  CHECK(p.backend == Backend::replay);
  CHECK(p.spec.name == "sdpa_fwd");
  CHECK(p.slots == 3);
  CHECK(p.device.name == p.replay->device.name);
  REQUIRE(p.problems.size() == 1);
  REQUIRE(p.all_problems.size() > p.problems.size());
  CHECK(p.timed.front());
  CHECK(std::none_of(p.timed.begin() + 1, p.timed.end(), [](bool b) { return b; }));
  // The two --config are the same config once the defaults are filled in: evaluated once.
  REQUIRE(p.seeds.size() == 1);
  CHECK(p.seeds[0].at("BLOCK_M") == 64);
  CHECK(p.seeds[0].values.size() == p.spec.params.size());
  CHECK(p.window >= 4);
  CHECK_FALSE(p.gpu());
}

TEST_CASE("a plan refuses what cannot be run, before anything is recorded", "[tune]") {
  evotune_test::TempDir t;
  TuneOptions o = replay_options(t);
  o.gpus = "0";
  CHECK_THROWS_AS(resolve_plan(o), UsageError);  // a replay simulates 1 or more GPUs
  o.gpus.clear();
  o.seed_configs = {"NO_SUCH_PARAM=1"};
  CHECK_THROWS_AS(resolve_plan(o), UsageError);
  o.seed_configs.clear();
  o.sanitize = "all";
  CHECK_THROWS_AS(resolve_plan(o), UsageError);  // no GPU to sanitize on
  CHECK_FALSE(std::filesystem::exists(o.db_path));
}

TEST_CASE("a dispatch's limits follow the best trial", "[tune]") {
  evotune_test::TempDir t;
  const TunePlan p = resolve_plan(replay_options(t));
  Limits none = limits_for(p, nullptr);
  CHECK(none.timeout_s == p.options.timeout_floor_s);
  CHECK(std::all_of(none.abort_us.begin(), none.abort_us.end(), [](double a) { return a == 0; }));
  CHECK(none.abort_us.size() == p.all_problems.size());
  Trial best;
  best.per_problem.resize(1);
  best.per_problem[0].p50_us = 10;
  best.verify_ms = 1500;
  best.bench_ms = 500;
  Limits l = limits_for(p, &best);
  CHECK(l.abort_us[0] == Approx(p.options.abort_factor * 10));
  CHECK(l.abort_us[1] == 0);  // check shapes are not timed
  CHECK(l.timeout_s == Approx(std::max(p.options.timeout_floor_s, p.options.timeout_factor * 2.0)));
}

TEST_CASE("the replay evaluator stages recorded trials and keeps a simulated clock", "[tune]") {
  evotune_test::TempDir t;
  const TunePlan p = resolve_plan(replay_options(t));
  ReplayEvaluator ev(p);
  Wakeup wake;
  const Trial* ok = nullptr;
  const Trial* rejected = nullptr;
  for (const Trial& tr : p.replay->trials) {
    if (!ok && tr.ok()) ok = &tr;
    if (!rejected && tr.status == TrialStatus::resource_rejected) rejected = &tr;
  }
  REQUIRE(ok);
  REQUIRE(rejected);
  // Gated out before the GPU: finished at staging.
  Staged s = ev.stage(rejected->config, wake).get();
  REQUIRE(s.finished);
  CHECK(s.finished->status == TrialStatus::resource_rejected);
  // Measured on the GPU: a job, run on the slot it is given.
  s = ev.stage(ok->config, wake).get();
  REQUIRE_FALSE(s.finished);
  Trial run = ev.run(std::move(s.job), 0, Limits{}, wake).get();
  CHECK(run.device == 0);
  CHECK(run.fitness == ok->fitness);
  // A config the dataset does not hold.
  Config odd = ok->config;
  odd.values["BLOCK_M"] = 12345;
  Staged missing = ev.stage(odd, wake).get();
  REQUIRE(missing.finished);
  CHECK(missing.finished->status == TrialStatus::invalid);
  // The clock: compile, then the GPU, from the proposal on.
  CHECK(ev.elapsed() == 0);
  ev.recorded(run, 0);
  const double after_one = (run.compile_ms + run.verify_ms + run.bench_ms) / 1000;
  CHECK(ev.elapsed() == Approx(after_one));
  CHECK(ev.gpu_busy_s() == Approx((run.verify_ms + run.bench_ms) / 1000));
}

TEST_CASE("the window keeps the slower stage busy and no more", "[tune]") {
  TunePlan p;
  p.compile_threads = 16;
  p.window = 32;  // twice the compile threads: the most
  auto trial = [](double compile_ms, double gpu_ms) {
    Trial t;
    t.status = TrialStatus::ok;
    t.compile_ms = compile_ms;
    t.bench_ms = gpu_ms;
    return t;
  };
  WindowSizer before(p, 1);
  CHECK(before.window() == 8);  // nothing measured: a short start
  // GPU-bound (0.5 s on the GPU, 0.1 s to compile): a few in flight.
  WindowSizer gpu_bound(p, 1);
  for (int i = 0; i < 4; ++i) gpu_bound.observe(trial(100, 500));
  CHECK(gpu_bound.window() >= 2);
  CHECK(gpu_bound.window() <= 4);
  // Two GPUs take twice as many.
  WindowSizer two_gpus(p, 2);
  for (int i = 0; i < 4; ++i) two_gpus.observe(trial(100, 500));
  CHECK(two_gpus.window() > gpu_bound.window());
  // Compile-bound (1 s to compile on 16 threads, 10 ms on the GPU): every
  // compile thread busy, under the cap.
  WindowSizer compile_bound(p, 1);
  for (int i = 0; i < 4; ++i) compile_bound.observe(trial(1000, 10));
  CHECK(compile_bound.window() >= 16);
  CHECK(compile_bound.window() <= 32);
  // Constraint rejections are not measurements.
  Trial invalid = trial(0, 0);
  invalid.status = TrialStatus::invalid;
  compile_bound.observe(invalid);
  CHECK(compile_bound.window() >= 16);
  // --window fixes it.
  p.options.window = 5;
  WindowSizer fixed(p, 1);
  fixed.observe(trial(1000, 10));
  CHECK(fixed.window() == 5);
}
