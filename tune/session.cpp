#include "tune/session.hpp"

#include <exception>
#include <memory>

#include "engine/compile_cache.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"
#include "tune/baselines.hpp"
#include "tune/compiling.hpp"
#include "tune/elites.hpp"
#include "tune/gpu_pool.hpp"
#include "tune/plan.hpp"
#include "tune/recorder.hpp"
#include "tune/remote.hpp"
#include "tune/replay.hpp"
#include "tune/search.hpp"

namespace evotune {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

// Where the run's configs are evaluated: here, or on the other ranks of an
// MPI job (a replay keeps its simulated clock here either way).
std::unique_ptr<Evaluator> make_evaluator(const TunePlan& plan, Cluster* cluster) {
  if (plan.backend == Backend::replay)
    return std::make_unique<ReplayEvaluator>(plan,
                                             cluster ? std::make_unique<RemoteEvaluator>(plan, *cluster) : nullptr);
  if (cluster) return std::make_unique<RemoteEvaluator>(plan, *cluster);
  if (plan.backend == Backend::compile_only) return std::make_unique<CompileOnly>(plan);
  return std::make_unique<GpuPool>(plan);
}

StrategyOptions strategy_options(const TunePlan& plan) {
  StrategyOptions so;
  so.seed = plan.options.seed;
  so.elites = plan.options.elites;
  so.budget = plan.budget();
  return so;
}

class Session {
 public:
  Session(const TunePlan& plan, Progress& progress, Cluster* cluster)
      : plan_(plan),
        progress_(progress),
        evaluator_(make_evaluator(plan, cluster)),
        gpu_(dynamic_cast<GpuPool*>(evaluator_.get())),
        space_(plan.spec, plan.problems, plan.dev),
        strategy_(make_strategy(plan.options.strategy, space_, strategy_options(plan))) {
    // Other ranks' GPUs search; this host's re-time the elites and measure
    // the baselines after, set up meanwhile.
    if (!gpu_ && plan.gpu()) {
      own_gpus_ = std::make_unique<GpuPool>(plan);
      gpu_ = own_gpus_.get();
    }
  }

  TuneResult run() {
    check_reference();
    open_run();
    const int uncaught = std::uncaught_exceptions();
    try {
      const SearchOutcome outcome = search();
      const SearchPhase phase = search_phase();
      if (!outcome.interrupted) {
        sanitize();
        retime();
      }
      TuneResult r = close(outcome);
      r.search_trials = phase.trials;
      r.search_s = phase.seconds;
      r.search_gpu_busy = phase.gpu_busy;
      r.after_search_s = std::max(0.0, evaluator_->elapsed() - phase.seconds);
      if (!outcome.interrupted) r.baselines = baselines();
      summarize(r);
      return r;
    } catch (...) {
      if (std::uncaught_exceptions() == uncaught) fail();
      throw;
    }
  }

 private:
  // A compile-only run compiles the reference too (it is part of what CI
  // should catch), before a run is recorded.
  void check_reference() {
    if (plan_.backend == Backend::compile_only) evaluator_->start();
  }

  void open_run() {
    store_.emplace(Store::open(plan_.options.db_path));
    CompileCache::global().set_enabled(plan_.options.use_cache && CompileCache::global().enabled());
    recorder_.emplace(plan_, *store_, *strategy_, progress_);
    recorder_->open();
    progress_.started(plan_, recorder_->run(), recorder_->spent());
  }

  // The first configs stage while the GPUs set the problems up.
  SearchOutcome search() {
    SearchLoop loop(plan_, space_, *evaluator_, *strategy_, *recorder_, wake_);
    return loop.run([this] {
      if (!gpu_) return;
      progress_.preparing(plan_);
      gpu_->start();
      if (plan_.sanitize.mode == "none") return;
      gate_.emplace(plan_.sanitize.path, plan_.exe, gpu_->setup(), sanitizer_problems(), plan_.spec.gates.sanitize);
      if (plan_.sanitize.mode == "all") gpu_->sanitize_every_trial(&*gate_);
    });
  }

  struct SearchPhase {
    int trials = 0;
    double seconds = 0, gpu_busy = 0;
  };
  SearchPhase search_phase() const {
    SearchPhase p;
    p.trials = recorder_->spent() - plan_.spent();
    p.seconds = evaluator_->elapsed();
    const double capacity = p.seconds * evaluator_->gpus();
    p.gpu_busy = capacity > 0 ? std::min(1.0, evaluator_->gpu_busy_s() / capacity) : 0;
    return p;
  }

  void sanitize() {
    if (gate_ && plan_.sanitize.mode == "elites") sanitize_elites(plan_, *gpu_, *gate_, *recorder_, progress_);
  }

  void retime() {
    if (gpu_) retime_elites(plan_, *gpu_, *recorder_, *store_, progress_);
  }

  // Measured beside the finished run, off its clock: the run's time and
  // trials/min are the search's and its checks'.
  std::vector<BaselineResult> baselines() {
    if (!gpu_) return {};
    return measure_baselines(plan_, *gpu_, *store_, recorder_->run().id, progress_);
  }

  // The run recorded as done (or interrupted), its time and shares frozen.
  TuneResult close(const SearchOutcome& outcome) {
    const std::string status = outcome.interrupted ? "interrupted" : "done";
    recorder_->finish(status, *evaluator_);
    const RunStats& stats = recorder_->stats();
    const RunInfo& before = recorder_->run();  // as opened: this session's shares exclude earlier ones
    TuneResult r;
    r.run = *store_->run(before.id);
    r.elites = store_->elites(before.id);
    r.default_trial = recorder_->default_trial();
    r.status_counts = recorder_->counts();
    r.interrupted = outcome.interrupted;
    r.exhausted = outcome.exhausted;
    const double total = evaluator_->elapsed();
    const double capacity = total * evaluator_->gpus();
    r.gpu_busy = capacity > 0 ? std::min(1.0, evaluator_->gpu_busy_s() / capacity) : 0;
    r.compile_busy =
        total > 0
            ? std::min(1.0, (stats.compile_busy_s - before.stats.compile_busy_s) / (total * plan_.compile_threads))
            : 0;
    return r;
  }

  void summarize(const TuneResult& r) {
    RunSummary s;
    s.result = &r;
    s.stats = recorder_->stats();
    s.spent = recorder_->spent();
    s.simulated = evaluator_->simulated();
    s.gpu_time = evaluator_->gpus() > 0;
    progress_.finished(plan_, s);
  }

  // A run that ends by an exception (a spec error found on a config mid-run,
  // the GPU set-up or a tool failing) is recorded as failed; its trials stay.
  void fail() noexcept {
    try {
      if (recorder_) recorder_->finish("failed", *evaluator_);
    } catch (...) {  // the exception already unwinding is the one to report
    }
  }

  // The check shapes (small, awkward), or the run's problems when the spec
  // has none.
  std::vector<size_t> sanitizer_problems() const {
    std::vector<size_t> checks, all;
    for (size_t i = 0; i < plan_.timed.size(); ++i) {
      all.push_back(i);
      if (!plan_.timed[i]) checks.push_back(i);
    }
    return checks.empty() ? all : checks;
  }

  const TunePlan& plan_;
  Progress& progress_;
  Wakeup wake_;  // before the evaluator: its tasks signal it until they are joined
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<GpuPool> own_gpus_;  // a GPU run's evaluator is on other ranks
  GpuPool* gpu_;                       // the evaluator, when the run has GPUs (the steps after the search need one)
  SearchSpace space_;
  std::unique_ptr<Strategy> strategy_;
  std::optional<Store> store_;
  std::optional<RunRecorder> recorder_;
  std::optional<SanitizerGate> gate_;
};

}  // namespace

TuneResult tune(const TuneOptions& options, Progress& progress) {
  std::unique_ptr<Cluster> cluster = Cluster::join();
  if (!cluster || cluster->size() == 1) {
    const TunePlan plan = resolve_plan(options);
    return Session(plan, progress, nullptr).run();
  }
  if (cluster->rank() > 0) {
    serve_rank(*cluster, options);
    TuneResult r;
    r.evaluated_for_rank0 = true;
    return r;
  }
  const RanksStop stop(*cluster);
  TunePlan plan = resolve_plan(options);
  plan.ranks = cluster->size();
  return Session(plan, progress, cluster.get()).run();
}

}  // namespace evotune
