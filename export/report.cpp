// report_markdown: a run as a Markdown page — what ran where, the top line
// against the default config, convergence, and the trials that failed.
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "core/format.hpp"
#include "core/strings.hpp"
#include "export/export.hpp"
#include "export/run_spec.hpp"

namespace evotune {

namespace {

// The run's facts: device, software, problems, search, trials, time.
void write_summary(std::ostream& md, const RunInfo& r, const std::vector<Trial>& trials) {
  md << "# evotune report: run " << r.id << ", " << r.kernel << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| device | "
     << (r.compile_only ? r.device.arch + " (compile only)"
                        : r.device.name + " (" + r.device.arch + ", " + std::to_string(r.device.num_sms) + " SMs)")
     << " |\n";
  md << "| software | CUDA driver " << cuda_version_string(r.device.driver_version) << ", runtime "
     << cuda_version_string(r.device.runtime_version) << ", NVRTC " << r.device.nvrtc_version << ", evotune "
     << r.evotune_version << " |\n";
  std::vector<std::string> probs;
  for (const auto& p : r.problems) probs.push_back(p.canonical());
  md << "| problems | " << join(probs, "; ") << " (" << r.dtype << ") |\n";
  md << "| search | " << r.strategy << ", seed " << r.seed << ", budget " << r.budget << ", elites " << r.elites_k
     << " |\n";
  std::map<std::string, int> counts;
  for (const auto& t : trials) ++counts[to_string(t.status)];
  std::vector<std::string> parts;
  for (const auto& [k, v] : counts) parts.push_back(k + " " + std::to_string(v));
  md << "| trials | " << trials.size() << " (" << join(parts, ", ") << ") |\n";
  md << "| time | "
     << strfmt(
            "%.1f s wall; compile %.1f s over %d threads (%d cache hits); verify %.1f s; bench %.1f s; GPU waiting on "
            "compiles %.1f s",
            r.stats.wall_s, r.stats.compile_busy_s, r.stats.compile_threads, r.stats.cache_hits, r.stats.verify_s,
            r.stats.bench_s, r.stats.gpu_idle_s)
     << " |\n";
  md << "| started | " << r.created_at << ", status " << r.status << " |\n\n";
}

// One row of the top line: p50 per problem, TFLOP/s, speedup over the
// default, errors, resources, config.
void write_top_line_row(std::ostream& md, const RunInfo& r, const KernelSpec& spec, const std::optional<Trial>& def,
                        const std::string& name, const Trial& t) {
  md << "| " << name << " | " << t.seq << " |";
  for (size_t i = 0; i < r.problems.size(); ++i)
    md << " " << (i < t.per_problem.size() ? fmt_us(t.per_problem[i].p50_us) : "-") << " |";
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
  md << " " << (tf.empty() ? "-" : strfmt("%.1f", geomean(tf))) << " | " << fmt_ratio(sp) << " | " << fmt_sci(mx)
     << " | " << fmt_sci(mean) << " | " << t.res.registers << " | " << fmt_kib(t.res.smem_total()) << " | `"
     << t.config.canonical() << "` |\n";
}

void write_top_line(std::ostream& md, const RunInfo& r, const KernelSpec& spec, const std::vector<Trial>& elites,
                    const std::optional<Trial>& def) {
  md << "## Top line\n\n";
  md << "| variant | trial |";
  for (size_t i = 0; i < r.problems.size(); ++i)
    md << " p50 µs" << (r.problems.size() > 1 ? " [" + std::to_string(i) + "]" : "") << " |";
  md << " TFLOP/s | vs default | max abs err | mean abs err | regs | smem | config |\n|---|---|";
  for (size_t i = 0; i < r.problems.size(); ++i) md << "---|";
  md << "---|---|---|---|---|---|---|\n";
  if (def && def->ok()) write_top_line_row(md, r, spec, def, "default config", *def);
  int rank = 0;
  for (const auto& e : elites) write_top_line_row(md, r, spec, def, "elite #" + std::to_string(++rank), e);
  if (elites.empty()) md << "\nNo trial passed every gate.\n";
}

// The best fitness after 1, 2, 4, 8, ... trials, and after the last.
void write_convergence(std::ostream& md, const std::vector<Trial>& trials) {
  md << "\n## Convergence\n\nBest p50 (geometric mean over problems) after N trials:\n\n| trials | best µs "
        "|\n|---|---|\n";
  double best = 0;
  size_t next = 1;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].ok() && (best == 0 || trials[i].fitness < best)) best = trials[i].fitness;
    if (i + 1 == next || i + 1 == trials.size()) {
      md << "| " << i + 1 << " | " << fmt_us(best) << " |\n";
      while (next <= i + 1) next *= 2;
    }
  }
}

void write_failures(std::ostream& md, const std::vector<Trial>& trials) {
  std::vector<const Trial*> failed;
  for (const auto& t : trials)
    if (!t.ok()) failed.push_back(&t);
  if (failed.empty()) return;
  md << "\n## Failed trials\n\n| trial | status | error | config |\n|---|---|---|---|\n";
  for (const Trial* t : failed) {
    std::string e = t->error;
    for (char& c : e)
      if (c == '\n' || c == '|') c = ' ';
    if (e.size() > 160) e = e.substr(0, 157) + "...";
    md << "| " << t->seq << " | " << to_string(t->status) << " | " << e << " | `" << t->config.canonical() << "` |\n";
  }
}

}  // namespace

std::string report_markdown(const Store& s, const RunInfo& r) {
  KernelSpec spec = stored_run_spec(r);
  std::vector<Trial> trials = s.trials(r.id);
  std::vector<Trial> elites = s.elites(r.id);
  std::optional<Trial> def = r.default_trial_id ? s.trial(*r.default_trial_id) : std::nullopt;
  std::ostringstream md;
  write_summary(md, r, trials);
  write_top_line(md, r, spec, elites, def);
  write_convergence(md, trials);
  write_failures(md, trials);
  return md.str();
}

}  // namespace evotune
