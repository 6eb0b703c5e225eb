// The tuning session's seams, without a GPU: the plan resolved from options,
// the limits a dispatch carries, and the replay evaluator's staging and
// simulated clock (tests/data/ holds datasets measured on an H200).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <optional>

#include "core/error.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"
#include "tune/cluster.hpp"
#include "tune/plan.hpp"
#include "tune/remote.hpp"
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

TEST_CASE("a replay plan takes the dataset's kernel, problems and device, check shapes come after, untimed", "[tune]") {
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

TEST_CASE("the replay evaluator completes stagings and runs as its simulated clock reaches them", "[tune]") {
  evotune_test::TempDir t;
  const TunePlan p = resolve_plan(replay_options(t));  // 2 compile processes, 1 GPU
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
  REQUIRE(ok->compile_ms != rejected->compile_ms);
  auto is_ready = [](const auto& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; };
  // Both compile at once, on the two simulated compile processes; nothing is
  // ready until the clock moves.
  std::future<Staged> a = ev.stage(rejected->config, wake);
  std::future<Staged> b = ev.stage(ok->config, wake);
  CHECK_FALSE(is_ready(a));
  CHECK_FALSE(is_ready(b));
  CHECK(ev.pending() == 2);
  const double first = std::min(rejected->compile_ms, ok->compile_ms) / 1000;
  const double second = std::max(rejected->compile_ms, ok->compile_ms) / 1000;
  ev.wait(wake, wake.events());
  CHECK(ev.elapsed() == Approx(first));
  CHECK(is_ready(rejected->compile_ms < ok->compile_ms ? a : b));
  ev.wait(wake, wake.events());
  CHECK(ev.elapsed() == Approx(second));
  // Gated out before the GPU: finished at staging.
  Staged s = a.get();
  REQUIRE(s.finished);
  CHECK(s.finished->status == TrialStatus::resource_rejected);
  // Measured on the GPU: a job, run on the slot it is given, for its GPU time.
  s = b.get();
  REQUIRE_FALSE(s.finished);
  std::future<Trial> r = ev.run(std::move(s.job), 0, Limits{}, wake);
  CHECK_FALSE(is_ready(r));
  ev.wait(wake, wake.events());
  REQUIRE(is_ready(r));
  Trial run = r.get();
  CHECK(run.device == 0);
  CHECK(run.fitness == ok->fitness);
  CHECK(ev.elapsed() == Approx(second + (run.verify_ms + run.bench_ms) / 1000));
  CHECK(ev.gpu_busy_s() == Approx((run.verify_ms + run.bench_ms) / 1000));
  CHECK(ev.pending() == 0);
  ev.wait(wake, wake.events());  // nothing pending: returns at once, the clock stays
  CHECK(ev.elapsed() == Approx(second + (run.verify_ms + run.bench_ms) / 1000));
  // A config the dataset does not hold: a constraint rejection, at once.
  Config odd = ok->config;
  odd.values["BLOCK_M"] = 12345;
  std::future<Staged> missing = ev.stage(odd, wake);
  ev.wait(wake, wake.events());
  Staged m = missing.get();
  REQUIRE(m.finished);
  CHECK(m.finished->status == TrialStatus::invalid);
}

TEST_CASE("the window grows from a short start to keep the slower stage busy, and no more", "[tune]") {
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
  // It grows by one per result from its short start.
  WindowSizer compile_bound(p, 1);
  compile_bound.observe(trial(1000, 10));
  CHECK(compile_bound.window() == 9);
  compile_bound.observe(trial(1000, 10));
  CHECK(compile_bound.window() == 10);
  for (int i = 0; i < 30; ++i) compile_bound.observe(trial(1000, 10));
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

TEST_CASE("a staged job travels to another rank whole: cubins byte for byte, a NaN error kept", "[tune][mpi]") {
  Job job;
  job.trial.config = Config::parse("BLOCK_M=64,STAGES=3");
  job.trial.compile_ms = 812.5;
  job.trial.res.registers = 128;
  Measurement m;
  m.err.max_abs = std::nan("");
  job.trial.per_problem = {m};
  job.request.cubins = {std::string("\x7f"
                                    "ELF\0\xff\x01",
                                    7),
                        std::string(100000, '\0')};
  LaunchPlan l;
  l.cubin = 1;
  l.entry = "gemm_kernel";
  ArgPlan a;
  a.kind = ArgPlan::Kind::buffer;
  a.buffer = "A";
  l.args = {a};
  job.request.launches = {l, l};
  job.request.abort_us = {0, 12.5};
  job.request.sustained.warmup_ms = 200;

  Message sent;
  sent.header["op"] = "run";
  put_job(sent, job);
  const Message got_message = unpack(pack(sent));
  CHECK(got_message.header.at("op") == "run");
  const Job got = get_job(got_message);
  CHECK(got.trial.config == job.trial.config);
  CHECK(got.trial.compile_ms == 812.5);
  CHECK(got.trial.res.registers == 128);
  REQUIRE(got.trial.per_problem.size() == 1);
  CHECK(std::isnan(got.trial.per_problem[0].err.max_abs));
  CHECK(got.request.cubins == job.request.cubins);
  REQUIRE(got.request.launches.size() == 2);
  CHECK(got.request.launches[1].cubin == 1);
  CHECK(got.request.launches[1].entry == "gemm_kernel");
  REQUIRE(got.request.launches[1].args.size() == 1);
  CHECK(got.request.launches[1].args[0].buffer == "A");
  CHECK(got.request.abort_us == job.request.abort_us);
  CHECK(got.request.sustained.warmup_ms == 200);
  CHECK_THROWS_AS(unpack(pack(sent).substr(0, 20)), EngineError);
}

TEST_CASE("the launcher's environment says how many ranks a process was started as one of", "[tune][mpi]") {
  const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const char* v : vars) {
    const char* was = std::getenv(v);
    saved.emplace_back(v, was ? std::optional<std::string>(was) : std::nullopt);
    unsetenv(v);
  }
  CHECK(launched_ranks() == 0);
  setenv("SLURM_NTASKS", "4", 1);
  CHECK(launched_ranks() == 0);  // a Slurm job, not an MPI launch
  setenv("PMIX_RANK", "0", 1);
  CHECK(launched_ranks() == 4);  // srun --mpi=pmix
  setenv("PMI_SIZE", "2", 1);
  CHECK(launched_ranks() == 2);  // srun --mpi=pmi2
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  CHECK(launched_ranks() == 3);  // mpirun
  for (const auto& [name, value] : saved) {
    if (value)
      setenv(name.c_str(), value->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
}
