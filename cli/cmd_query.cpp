#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/app.hpp"
#include "cli/console_progress.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/strings.hpp"
#include "export/run_spec.hpp"
#include "store/store.hpp"

namespace evotune {

namespace {

std::string problems_text(const RunInfo& r) {
  std::vector<std::string> p;
  for (const auto& x : r.problems) p.push_back(x.canonical());
  return join(p, "; ");
}

RunInfo require_run(const Store& s, long long id) {
  auto r = s.run(id);
  if (!r) throw UsageError("no run " + std::to_string(id) + " in " + s.path() + " (see `evotune runs`)");
  return *r;
}

std::optional<Trial> default_trial_of(const Store& s, const RunInfo& r) {
  if (!r.default_trial_id) return std::nullopt;
  return s.trial(*r.default_trial_id);
}

// The spec, for TFLOP/s columns, when the kernel is still available.
std::optional<KernelSpec> spec_of(const RunInfo& r) {
  try {
    return load_run_spec(r);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

namespace {

// `runs`: every run of the database, one line each.
int show_runs(const Context& ctx) {
  std::optional<Store> s;
  if (!no_database_yet(ctx.db_path)) s.emplace(Store::open(ctx.db_path, Store::Mode::read_only));
  std::vector<RunInfo> runs = s ? s->runs() : std::vector<RunInfo>{};
  if (ctx.json) {
    std::cout << nlohmann::json(runs).dump(2) << "\n";
    return kExitOk;
  }
  if (runs.empty()) {
    std::cout << "no runs yet in " << ctx.db_path << " (`evotune run` records them there)\n";
    return kExitOk;
  }
  Table t({"run", "created", "kernel", "problems", "dtype", "strategy", "trials", "status", "best p50 µs",
           "trials/min", "device"});
  for (const auto& r : runs) {
    std::string best = "-";
    if (r.best_trial_id)
      if (auto b = s->trial(*r.best_trial_id)) best = fmt_us(b->fitness);
    double tpm = r.stats.wall_s > 0 ? r.stats.trials / (r.stats.wall_s / 60.0) : 0;
    t.add({std::to_string(r.id), r.created_at.substr(0, 16), r.kernel, problems_text(r), r.dtype, r.strategy,
           strfmt("%d/%d", r.stats.trials, r.budget), r.status, best, tpm > 0 ? strfmt("%.0f", tpm) : "-",
           r.compile_only ? r.device.arch + " (compile only)" : r.device.name});
  }
  t.print(std::cout);
  return kExitOk;
}

// `top`: a run's elites (or its best k ok trials), its default config and
// the baselines measured beside it.
int show_top(const Context& ctx, const std::string& run, int k) {
  long long id = parse_run_ref(run, ctx.db_path);
  Store s = Store::open(ctx.db_path, Store::Mode::read_only);
  RunInfo r = require_run(s, id);
  std::vector<Trial> elites;
  if (k > 0) {
    elites = s.trials(id, TrialStatus::ok);
    std::stable_sort(elites.begin(), elites.end(), [](const Trial& a, const Trial& b) { return a.fitness < b.fitness; });
    if (static_cast<int>(elites.size()) > k) elites.resize(static_cast<size_t>(k));
  } else {
    elites = s.elites(id);
  }
  std::optional<Trial> def = default_trial_of(s, r);
  if (ctx.json) {
    std::cout << nlohmann::json({{"run", r},
                                 {"elites", elites},
                                 {"default", def ? nlohmann::json(*def) : nlohmann::json()},
                                 {"baselines", s.baselines(id)}})
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "run " << r.id << ": " << r.kernel << " on " << problems_text(r) << " " << r.dtype << ", "
            << (r.compile_only ? r.device.arch : r.device.name) << ", " << r.stats.trials << " trials, " << r.status
            << "\n\n";
  if (elites.empty()) {
    std::cout << "no ok trial" << (r.compile_only ? " with a measurement (a compile-only run)" : "") << "\n";
    return kExitOk;
  }
  auto spec = spec_of(r);
  print_elites(std::cout, r, elites, def, spec ? &*spec : nullptr);
  if (const std::vector<BaselineResult> b = s.baselines(id); !b.empty()) {
    std::vector<Trial> best = s.elites(id);
    std::cout << "\n";
    print_baselines(std::cout, r, b, best.empty() ? nullptr : &best.front());
  }
  return kExitOk;
}

// `trials`: every trial of a run (or those of one status), in order.
int show_trials(const Context& ctx, const std::string& run, const std::string& status) {
  std::optional<TrialStatus> filter;
  if (!status.empty()) filter = parse_status(status);
  long long id = parse_run_ref(run, ctx.db_path);
  Store s = Store::open(ctx.db_path, Store::Mode::read_only);
  require_run(s, id);
  std::vector<Trial> trials = s.trials(id, filter);
  if (ctx.json) {
    std::cout << nlohmann::json(trials).dump(2) << "\n";
    return kExitOk;
  }
  Table t({"seq", "status", "p50 µs", "compile ms", "verify ms", "bench ms", "regs", "smem", "spills", "config",
           "error"});
  for (const auto& x : trials) {
    std::string err = x.error;
    auto nl = err.find('\n');
    if (nl != std::string::npos) err = err.substr(0, nl) + " ...";
    if (err.size() > 80) err = err.substr(0, 77) + "...";
    t.add({std::to_string(x.seq), to_string(x.status), x.ok() ? fmt_us(x.fitness) : "-", strfmt("%.0f", x.compile_ms),
           strfmt("%.1f", x.verify_ms), strfmt("%.1f", x.bench_ms), std::to_string(x.res.registers),
           fmt_kib(x.res.smem_total()), std::to_string(x.res.spill_bytes()), x.config.canonical(), err});
  }
  t.print(std::cout);
  if (trials.empty()) std::cout << "(no trials" << (filter ? " with status " + status : "") << ")\n";
  return kExitOk;
}

}  // namespace

void add_query_commands(CLI::App& app, Context& ctx) {
  {
    auto* cmd = app.add_subcommand("runs", "List tuning runs: kernel, problems, GPU, trials, best latency");
    cmd->add_flag("--json", ctx.json, "machine-readable output");
    cmd->callback([&ctx] { ctx.action = [&ctx] { return show_runs(ctx); }; });
  }
  {
    auto run = std::make_shared<std::string>();
    auto k = std::make_shared<int>(0);
    auto* cmd = app.add_subcommand("top", "Show the elite population of a run (best first)");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("-k", *k, "show the best N ok trials instead of the stored elites")->check(non_negative_number());
    cmd->add_flag("--json", ctx.json, "machine-readable output");
    cmd->callback([&ctx, run, k] { ctx.action = [&ctx, run, k] { return show_top(ctx, *run, *k); }; });
  }
  {
    auto run = std::make_shared<std::string>();
    auto status = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("trials", "List every trial of a run, optionally of one status");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("--status", *status,
                    "ok, invalid, compile_error, resource_rejected, launch_error, crashed, timeout, incorrect");
    cmd->add_flag("--json", ctx.json, "machine-readable output");
    cmd->callback(
        [&ctx, run, status] { ctx.action = [&ctx, run, status] { return show_trials(ctx, *run, *status); }; });
  }
}

}  // namespace evotune
