#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cli/app.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/device_info.hpp"
#include "store/dataset.hpp"
#include "store/export.hpp"
#include "store/store.hpp"

namespace evotune {

namespace {

// The spec exactly as the run used it (stored in the database); sources are
// not needed to export or report.
KernelSpec stored_spec(const RunInfo& r) {
  return parse_spec(r.spec_text, r.spec_origin, [](const std::string&) { return std::string(); });
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) throw UsageError("cannot write " + path);
  f << text;
  if (!f) throw UsageError("writing " + path + " failed");
  std::cerr << "wrote " << path << "\n";
}

std::string report_markdown(const Store& s, const RunInfo& r) {
  KernelSpec spec = stored_spec(r);
  std::vector<Trial> trials = s.trials(r.id);
  std::vector<Trial> elites = s.elites(r.id);
  std::optional<Trial> def = r.default_trial_id ? s.trial(*r.default_trial_id) : std::nullopt;
  std::ostringstream md;
  md << "# evotune report: run " << r.id << ", " << r.kernel << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| device | " << (r.compile_only ? r.device.arch + " (compile only)" : r.device.name + " (" + r.device.arch + ", " + std::to_string(r.device.num_sms) + " SMs)") << " |\n";
  md << "| software | CUDA driver " << cuda_version_string(r.device.driver_version) << ", runtime "
     << cuda_version_string(r.device.runtime_version) << ", NVRTC " << r.device.nvrtc_version << ", evotune "
     << r.evotune_version << " |\n";
  std::vector<std::string> probs;
  for (const auto& p : r.problems) probs.push_back(p.canonical());
  md << "| problems | " << join(probs, "; ") << " (" << r.dtype << ") |\n";
  md << "| search | " << r.strategy << ", seed " << r.seed << ", budget " << r.budget << ", elites " << r.elites_k << " |\n";
  std::map<std::string, int> counts;
  for (const auto& t : trials) ++counts[to_string(t.status)];
  std::vector<std::string> parts;
  for (const auto& [k, v] : counts) parts.push_back(k + " " + std::to_string(v));
  md << "| trials | " << trials.size() << " (" << join(parts, ", ") << ") |\n";
  md << "| time | " << strfmt("%.1f s wall; compile %.1f s over %d threads (%d cache hits); verify %.1f s; bench %.1f s; GPU waiting on compiles %.1f s",
                              r.stats.wall_s, r.stats.compile_busy_s, r.stats.compile_threads, r.stats.cache_hits,
                              r.stats.verify_s, r.stats.bench_s, r.stats.gpu_idle_s)
     << " |\n";
  md << "| started | " << r.created_at << ", status " << r.status << " |\n\n";

  md << "## Top line\n\n";
  md << "| variant | trial |";
  for (size_t i = 0; i < r.problems.size(); ++i) md << " p50 µs" << (r.problems.size() > 1 ? " [" + std::to_string(i) + "]" : "") << " |";
  md << " TFLOP/s | vs default | max abs err | mean abs err | regs | smem | config |\n|---|---|";
  for (size_t i = 0; i < r.problems.size(); ++i) md << "---|";
  md << "---|---|---|---|---|---|---|\n";
  auto row = [&](const std::string& name, const Trial& t) {
    md << "| " << name << " | " << t.seq << " |";
    for (size_t i = 0; i < r.problems.size(); ++i) md << " " << (i < t.per_problem.size() ? fmt_us(t.per_problem[i].p50_us) : "-") << " |";
    std::vector<double> tf;
    for (size_t i = 0; i < r.problems.size() && i < t.per_problem.size(); ++i) {
      double fl = spec.flops_of(r.problems[i]);
      if (fl > 0 && t.per_problem[i].p50_us > 0) tf.push_back(fl / (t.per_problem[i].p50_us * 1e-6) / 1e12);
    }
    double sp = 0;
    if (def && def->ok()) {
      std::vector<double> rs;
      for (size_t i = 0; i < t.per_problem.size() && i < def->per_problem.size(); ++i)
        rs.push_back(def->per_problem[i].p50_us / t.per_problem[i].p50_us);
      sp = geomean(rs);
    }
    double mx = 0, mean = 0;
    for (const auto& m : t.per_problem) mx = std::max(mx, m.err.max_abs), mean = std::max(mean, m.err.mean_abs);
    md << " " << (tf.empty() ? "-" : strfmt("%.1f", geomean(tf))) << " | " << fmt_ratio(sp) << " | " << fmt_sci(mx) << " | "
       << fmt_sci(mean) << " | " << t.res.registers << " | " << fmt_kib(t.res.smem_total()) << " | `" << t.config.canonical()
       << "` |\n";
  };
  if (def && def->ok()) row("default config", *def);
  int rank = 0;
  for (const auto& e : elites) row("elite #" + std::to_string(++rank), e);
  if (elites.empty()) md << "\nNo trial passed every gate.\n";

  md << "\n## Convergence\n\nBest p50 (geometric mean over problems) after N trials:\n\n| trials | best µs |\n|---|---|\n";
  double best = 0;
  size_t next = 1;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].ok() && (best == 0 || trials[i].fitness < best)) best = trials[i].fitness;
    if (i + 1 == next || i + 1 == trials.size()) {
      md << "| " << i + 1 << " | " << fmt_us(best) << " |\n";
      while (next <= i + 1) next *= 2;
    }
  }

  std::vector<const Trial*> failed;
  for (const auto& t : trials)
    if (!t.ok()) failed.push_back(&t);
  if (!failed.empty()) {
    md << "\n## Failed trials\n\n| trial | status | error | config |\n|---|---|---|---|\n";
    for (const Trial* t : failed) {
      std::string e = t->error;
      for (char& c : e)
        if (c == '\n' || c == '|') c = ' ';
      if (e.size() > 160) e = e.substr(0, 157) + "...";
      md << "| " << t->seq << " | " << to_string(t->status) << " | " << e << " | `" << t->config.canonical() << "` |\n";
    }
  }
  return md.str();
}

}  // namespace

void add_export_commands(CLI::App& app, Context& ctx) {
  {
    auto run = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("header");
    auto* cmd = app.add_subcommand("export", "Write a run's winner as a header to compile into your program (or JSON)");
    cmd->footer(
        "\nThe header #defines the winning parameters (the names the template reads), so\n"
        "  #include \"best.h\"\n  #include \"kernel_templates/sdpa_fwd/kernel.cu\"\n"
        "compiles the tuned kernel; it also holds them as constexpr values, launch-geometry\n"
        "helpers and provenance (GPU, versions, latency and errors per problem).");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("-o,--output", *out, "file to write (default: standard output)");
    cmd->add_option("-f,--format", *format, "header, json, or dataset (every trial, for `run --replay`)")
        ->check(CLI::IsMember({"header", "json", "dataset"}));
    cmd->callback([&ctx, run, out, format] {
      ctx.action = [&ctx, run, out, format] {
        long long id = parse_run_ref(*run, ctx.db_path);
        Store s = Store::open(ctx.db_path, Store::Mode::read_only);
        auto r = s.run(id);
        if (!r) throw UsageError("no run " + std::to_string(id) + " in " + ctx.db_path);
        if (*format == "dataset") {
          std::vector<Trial> all = s.trials(id);
          if (all.empty()) throw UsageError("run " + std::to_string(id) + " has no trials");
          write_output(*out, write_dataset(*r, all, "run " + std::to_string(id) + " of " + ctx.db_path + ", " + r->created_at));
          return kExitOk;
        }
        std::vector<Trial> ok = s.trials(id, TrialStatus::ok);
        std::vector<Trial> elites = s.elites(id);
        if (elites.empty() || r->compile_only)
          throw UsageError("run " + std::to_string(id) + " has no measured winner to export" +
                           (r->compile_only ? " (it was compile-only)" : ""));
        KernelSpec spec = stored_spec(*r);
        ExportInput in;
        in.run = &*r;
        in.spec = &spec;
        in.winner = &elites.front();
        in.ok_trials = ok;
        if (r->default_trial_id) in.default_trial = s.trial(*r->default_trial_id);
        write_output(*out, *format == "json" ? export_json(in) : export_header(in));
        return kExitOk;
      };
    });
  }
  {
    auto run = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("report", "Write a Markdown report of a run: top line vs the default, convergence, failures");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("-o,--output", *out, "file to write (default: standard output)");
    cmd->callback([&ctx, run, out] {
      ctx.action = [&ctx, run, out] {
        long long id = parse_run_ref(*run, ctx.db_path);
        Store s = Store::open(ctx.db_path, Store::Mode::read_only);
        auto r = s.run(id);
        if (!r) throw UsageError("no run " + std::to_string(id) + " in " + ctx.db_path);
        write_output(*out, report_markdown(s, *r));
        return kExitOk;
      };
    });
  }
}

}  // namespace evotune
