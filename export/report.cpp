// The report: a run as a Markdown page — what ran where, the top line
// against the default config, convergence, the parameters that mattered and
// the trials that failed — with its plots as SVG files beside it.
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "core/format.hpp"
#include "core/peak.hpp"
#include "core/profile.hpp"
#include "core/stats.hpp"
#include "core/strings.hpp"
#include "export/cpp_text.hpp"
#include "export/export.hpp"
#include "export/facts.hpp"
#include "export/run_spec.hpp"
#include "export/svg.hpp"

namespace evotune {

namespace {

// One line for a table cell.
std::string one_line_md(const std::string& s) {
  std::string out;
  for (char c : one_line(s)) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The library behind a baseline as its detail names it, less what belongs
// to one problem (cuBLASLt's algorithm, PyTorch's launch mode).
std::string library_of(const BaselineResult& b) {
  std::string d = b.detail;
  for (const char* cut : {", algo", ", CUDA graph", ", eager"})
    if (size_t at = d.find(cut); at != std::string::npos) d = d.substr(0, at);
  return d;
}

// The run's facts: device, software (the baselines' libraries and the
// profiler among it), problems, search, trials, time.
void write_summary(std::ostream& md, const RunInfo& r, const std::vector<Trial>& trials,
                   const std::vector<BaselineResult>& baselines, const std::vector<TrialProfile>& profiles) {
  md << "# evotune report: run " << r.id << ", " << r.kernel << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| device | "
     << (r.compile_only ? r.device.arch + " (compile only)"
                        : r.device.name + " (" + r.device.arch + ", " + std::to_string(r.device.num_sms) + " SMs)")
     << " |\n";
  md << "| software | CUDA driver " << cuda_version_string(r.device.driver_version) << ", runtime "
     << cuda_version_string(r.device.runtime_version) << ", NVRTC " << r.device.nvrtc_version << ", evotune "
     << r.evotune_version << " |\n";
  std::map<std::string, std::vector<std::string>> libraries;  // library text -> baseline names
  for (const BaselineResult& b : baselines)
    if (b.ok() && b.library != "reference") {
      auto& names = libraries[library_of(b)];
      if (std::find(names.begin(), names.end(), b.name) == names.end()) names.push_back(b.name);
    }
  if (!libraries.empty()) {
    std::vector<std::string> parts;
    for (const auto& [lib, names] : libraries) parts.push_back(join(names, ", ") + ": " + lib);
    md << "| baseline libraries | " << one_line_md(join(parts, "; ")) << " |\n";
  }
  if (!profiles.empty()) md << "| profiler | " << profiles.front().tool << " |\n";
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

// The baselines measured ok on every problem: the top line's speedup columns.
std::vector<BaselineSummary> ok_baselines(const std::vector<BaselineSummary>& all) {
  std::vector<BaselineSummary> out;
  for (const BaselineSummary& b : all)
    if (b.us > 0) out.push_back(b);
  return out;
}

// What the top line's rows share.
struct TopLine {
  const RunInfo& r;
  const KernelSpec& spec;
  const std::optional<Trial>& def;
  std::vector<BaselineSummary> baselines;  // measured ok on every problem
  Peak peak;
};

std::string pct_of_peak(double tflops, const Peak& peak) {
  return tflops > 0 ? strfmt("%.1f", 100 * tflops / peak.tflops) : "-";
}

void write_top_line_row(std::ostream& md, const TopLine& c, const std::string& name, const Trial& t) {
  const RunInfo& r = c.r;
  md << "| " << name << " | " << t.seq << " |";
  for (size_t i = 0; i < r.problems.size(); ++i)
    md << " " << (i < t.per_problem.size() ? fmt_us(t.per_problem[i].p50_us) : "-") << " |";
  md << " " << (t.final_us > 0 ? fmt_us(t.final_us) : "-") << " |";
  std::vector<double> tf;
  for (size_t i = 0; i < r.problems.size() && i < t.per_problem.size(); ++i) {
    double fl = c.spec.flops_of(r.problems[i]);
    if (fl > 0 && t.per_problem[i].p50_us > 0) tf.push_back(fl / (t.per_problem[i].p50_us * 1e-6) / 1e12);
  }
  double sp = 0;
  if (c.def && c.def->ok()) {
    std::vector<double> rs;
    for (size_t i = 0; i < t.per_problem.size() && i < c.def->per_problem.size(); ++i)
      rs.push_back(c.def->per_problem[i].p50_us / t.per_problem[i].p50_us);
    sp = geomean(rs);
  }
  double mx = 0, mean = 0;
  for (const auto& m : t.per_problem) mx = std::max(mx, m.err.max_abs), mean = std::max(mean, m.err.mean_abs);
  const double tflops = tf.empty() ? 0 : geomean(tf);
  md << " " << (tflops > 0 ? strfmt("%.1f", tflops) : "-") << " |";
  if (c.peak.tflops > 0) md << " " << pct_of_peak(tflops, c.peak) << " |";
  md << " " << fmt_ratio(sp) << " |";
  for (const BaselineSummary& b : c.baselines) md << " " << fmt_ratio(speedup_over(t, b)) << " |";
  md << " " << fmt_sci(mx) << " | " << fmt_sci(mean) << " | " << t.res.registers << " | " << fmt_kib(t.res.smem_total())
     << " | `" << t.config.canonical() << "` |\n";
}

// A baseline measured ok on every problem, in the top line's columns: its
// p50s (timed as the elites' re-timing, so also its re-timed time), the
// default config's and the other baselines' times over its own.
void write_baseline_row(std::ostream& md, const TopLine& c, const BaselineSummary& b) {
  const RunInfo& r = c.r;
  md << "| baseline " << b.name << " | - |";
  std::vector<double> tf;
  double mx = 0, mean = 0;
  for (size_t i = 0; i < r.problems.size(); ++i) {
    const BaselineResult* x = i < b.per_problem.size() ? b.per_problem[i] : nullptr;
    md << " " << (x ? fmt_us(x->m.p50_us) : "-") << " |";
    if (!x) continue;
    const double fl = c.spec.flops_of(r.problems[i]);
    if (fl > 0 && x->m.p50_us > 0) tf.push_back(fl / (x->m.p50_us * 1e-6) / 1e12);
    if (x->library != "reference") mx = std::max(mx, x->m.err.max_abs), mean = std::max(mean, x->m.err.mean_abs);
  }
  const double tflops = tf.empty() ? 0 : geomean(tf);
  md << " " << fmt_us(b.us) << " | " << (tflops > 0 ? strfmt("%.1f", tflops) : "-") << " |";
  if (c.peak.tflops > 0) md << " " << pct_of_peak(tflops, c.peak) << " |";
  md << " " << fmt_ratio(c.def && c.def->ok() && c.def->fitness > 0 ? c.def->fitness / b.us : 0) << " |";
  for (const BaselineSummary& o : c.baselines) md << " " << fmt_ratio(o.us / b.us) << " |";
  const bool ref = b.library == "reference";
  md << " " << (ref ? "-" : fmt_sci(mx)) << " | " << (ref ? "-" : fmt_sci(mean)) << " | - | - | "
     << one_line_md(b.detail) << " |\n";
}

void write_top_line(std::ostream& md, const TopLine& c, const std::vector<Trial>& elites) {
  const RunInfo& r = c.r;
  md << "## Top line\n\n";
  md << "p50 in the search; re-timed: the elites' final interleaved re-timing under sustained load (geomean over "
        "problems), the time the speedups over the baselines use (the baselines, last, were timed the same way; for "
        "them, vs default is the default config's search p50 over theirs).";
  if (c.peak.tflops > 0)
    md << " % of peak: TFLOP/s over " << strfmt("%.1f", c.peak.tflops) << " TFLOP/s (" << c.peak.what << ").";
  else
    md << " No % of peak: this GPU's peak for " << r.dtype << " is not in evotune's table (core/peak.cpp).";
  md << "\n\n| variant | trial |";
  for (size_t i = 0; i < r.problems.size(); ++i)
    md << " p50 µs" << (r.problems.size() > 1 ? " [" + std::to_string(i) + "]" : "") << " |";
  md << " re-timed µs | TFLOP/s |" << (c.peak.tflops > 0 ? " % of peak |" : "") << " vs default |";
  for (const BaselineSummary& b : c.baselines) md << " vs " << b.name << " |";
  md << " max abs err | mean abs err | regs | smem | config |\n|---|---|";
  for (size_t i = 0; i < r.problems.size() + c.baselines.size() + (c.peak.tflops > 0 ? 1 : 0); ++i) md << "---|";
  md << "---|---|---|---|---|---|---|---|\n";
  if (c.def && c.def->ok()) write_top_line_row(md, c, "default config", *c.def);
  int rank = 0;
  for (const auto& e : elites) write_top_line_row(md, c, "elite #" + std::to_string(++rank), e);
  for (const BaselineSummary& b : c.baselines) write_baseline_row(md, c, b);
  if (elites.empty()) md << "\nNo trial passed every gate.\n";
}

// Each baseline on each problem: time, TFLOP/s, the best elite's speedup,
// errors against the reference, what it was (library, algorithm), or why it
// was not measured.
void write_baselines(std::ostream& md, const RunInfo& r, const KernelSpec& spec,
                     const std::vector<BaselineSummary>& baselines, const std::vector<Trial>& elites,
                     const Peak& peak) {
  if (baselines.empty()) return;
  md << "\n## Baselines\n\nMeasured after the search on the same GPU, with the elites' final timing method (L2 "
        "flushed before each launch, sustained load, p50). Errors: against the template's reference (cuBLASLt), or "
        "fp32 attention on PyTorch's own inputs (PyTorch).\n\n";
  md << "| baseline | problem | p50 µs | TFLOP/s |" << (peak.tflops > 0 ? " % of peak |" : "")
     << " best elite vs it | max abs err | mean abs err | status | detail |\n|---|---|---|---|"
     << (peak.tflops > 0 ? "---|" : "") << "---|---|---|---|---|\n";
  for (const BaselineSummary& b : baselines)
    for (size_t i = 0; i < b.per_problem.size(); ++i) {
      const BaselineResult* x = b.per_problem[i];
      if (!x) continue;
      const double fl = spec.flops_of(r.problems[i]);
      const bool timed = x->m.p50_us > 0;
      double sp = 0;
      if (timed && !elites.empty() && x->ok()) {
        const Trial& best = elites.front();
        const Measurement* m = measurement_on(best, static_cast<int>(i));
        const double us = r.problems.size() == 1 && best.final_us > 0 ? best.final_us : (m ? m->p50_us : 0);
        sp = us > 0 ? x->m.p50_us / us : 0;
      }
      const bool ref = x->library == "reference";
      const double tflops = timed && fl > 0 ? fl / (x->m.p50_us * 1e-6) / 1e12 : 0;
      md << "| " << b.name << " | " << r.problems[i].canonical() << " | " << (timed ? fmt_us(x->m.p50_us) : "-")
         << " | " << (tflops > 0 ? strfmt("%.1f", tflops) : "-") << " | ";
      if (peak.tflops > 0) md << pct_of_peak(tflops, peak) << " | ";
      md << fmt_ratio(sp) << " | " << (ref || !timed ? "-" : fmt_sci(x->m.err.max_abs)) << " | "
         << (ref || !timed ? "-" : fmt_sci(x->m.err.mean_abs)) << " | " << x->status
         << (x->reason.empty() ? "" : ": " + one_line_md(x->reason)) << " | " << one_line_md(x->detail) << " |\n";
    }
}

const char* status_color(TrialStatus s) {
  switch (s) {
    case TrialStatus::ok:
      return "#1b9e77";
    case TrialStatus::incorrect:
      return "#d95f02";
    case TrialStatus::compile_error:
      return "#7570b3";
    case TrialStatus::resource_rejected:
      return "#999999";
    case TrialStatus::crashed:
      return "#e7298a";
    case TrialStatus::timeout:
      return "#e6ab02";
    case TrialStatus::launch_error:
      return "#a6761d";
    case TrialStatus::invalid:
      return "#666666";
  }
  return "#666666";
}

std::string problems_text(const RunInfo& r) {
  std::vector<std::string> probs;
  for (const auto& p : r.problems) probs.push_back(p.canonical());
  return join(probs, "; ") + " " + r.dtype;
}

// Every trial by its order in the run: correct ones at their p50, the others
// in a band above, coloured by status; the best so far as a line.
std::string convergence_svg(const RunInfo& r, const std::vector<Trial>& trials) {
  svg::ScatterChart c;
  c.title = "run " + std::to_string(r.id) + ": " + r.kernel + " on " + problems_text(r);
  c.x_label = "trial";
  c.y_label = "p50 µs";
  c.band_label = "failed";
  std::map<TrialStatus, svg::Series> by_status;
  svg::Series best{"best so far", "#222222", svg::Series::Kind::step, {}};
  double lo = 0, hi = 0, b = 0;
  for (const auto& t : trials) {
    svg::Series& s = by_status[t.status];
    if (s.name.empty()) {
      s.color = status_color(t.status);
      s.kind = t.ok() ? svg::Series::Kind::dots : svg::Series::Kind::band;
    }
    s.points.push_back({static_cast<double>(t.seq), t.ok() ? t.fitness : 0});
    s.name = to_string(t.status) + " (" + std::to_string(s.points.size()) + ")";
    if (!t.ok() || !(t.fitness > 0)) continue;
    lo = lo == 0 ? t.fitness : std::min(lo, t.fitness);
    hi = std::max(hi, t.fitness);
    if (b == 0 || t.fitness < b) {
      b = t.fitness;
      best.points.push_back({static_cast<double>(t.seq), b});
    }
  }
  c.log_y = lo > 0 && hi / lo > 4;
  for (auto& [st, s] : by_status) c.series.push_back(std::move(s));
  c.series.push_back(std::move(best));
  return svg::scatter(c);
}

// The default config and the elites (and the baselines, when measured) by
// the time the top line ranks them.
std::string elites_svg(const RunInfo& r, const std::vector<Trial>& elites, const std::optional<Trial>& def,
                       const std::vector<BaselineSummary>& baselines) {
  std::vector<const BaselineSummary*> vendors;  // the reference kernel is orders of magnitude slower: it would
  for (const BaselineSummary& b : baselines)    // flatten every other bar
    if (b.library != "reference") vendors.push_back(&b);
  svg::BarChart c;
  if (vendors.empty()) {
    // The search's p50s, as the top line's "vs default".
    c.title = "run " + std::to_string(r.id) + ": elites against the default config";
    c.x_label = "p50 µs in the search (geometric mean over problems), as the top line's \"vs default\"";
    const double base = def && def->ok() ? def->fitness : 0;
    auto note = [&](double us) { return fmt_us(us) + " µs" + (base > 0 ? " · " + fmt_ratio(base / us) : ""); };
    if (base > 0) c.bars.push_back({"default config", base, "#999999", note(base)});
    int rank = 0;
    for (const auto& e : elites)
      c.bars.push_back({"elite #" + std::to_string(++rank) + " (trial " + std::to_string(e.seq) + ")", e.fitness,
                        "#1b9e77", note(e.fitness)});
    return svg::bars(c);
  }
  // Against the baselines: the elites' re-timed times, timed as the
  // baselines were, and each one's speedup over the first baseline.
  const BaselineSummary& first = *vendors.front();
  c.title = "run " + std::to_string(r.id) + ": elites against the baselines";
  c.x_label =
      "µs, timed alike (elites re-timed under sustained load; geometric mean over problems); x = speedup over " +
      first.name;
  for (const BaselineSummary* b : vendors) c.bars.push_back({b->name, b->us, "#386cb0", fmt_us(b->us) + " µs"});
  int rank = 0;
  for (const auto& e : elites) {
    const double us = e.final_us > 0 ? e.final_us : e.fitness;
    c.bars.push_back({"elite #" + std::to_string(++rank) + " (trial " + std::to_string(e.seq) + ")", us, "#1b9e77",
                      fmt_us(us) + " µs · " + fmt_ratio(speedup_over(e, first))});
  }
  return svg::bars(c);
}

// The best fitness after 1, 2, 4, 8, ... trials, and after the last.
void write_convergence(std::ostream& md, const std::vector<Trial>& trials, const std::string& plot) {
  md << "\n## Convergence\n\n";
  if (!plot.empty()) md << "![every trial by its order, coloured by status, and the best so far](" << plot << ")\n\n";
  md << "Best p50 (geometric mean over problems) after N trials:\n\n| trials | best µs |\n|---|---|\n";
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

// Per parameter, the median p50 of the correct trials with each value (values
// with at least two trials): the best and the worst value, and their ratio.
// Parameters in order of that ratio, the ones that did not vary left out.
void write_parameters(std::ostream& md, const KernelSpec& spec, const std::vector<Trial>& trials) {
  struct Row {
    std::string name;
    int64_t best_v, worst_v;
    double best, worst;
    size_t best_n, worst_n;
  };
  std::vector<Row> rows;
  for (const auto& param : spec.params) {
    std::map<int64_t, std::vector<double>> by_value;
    for (const auto& t : trials) {
      auto it = t.config.values.find(param.name);
      if (t.ok() && t.fitness > 0 && it != t.config.values.end()) by_value[it->second].push_back(t.fitness);
    }
    std::optional<Row> row;
    for (const auto& [v, xs] : by_value) {
      if (xs.size() < 2) continue;
      const double m = median(xs);
      if (!row) {
        row = Row{param.name, v, v, m, m, xs.size(), xs.size()};
        continue;
      }
      if (m < row->best) row->best = m, row->best_v = v, row->best_n = xs.size();
      if (m > row->worst) row->worst = m, row->worst_v = v, row->worst_n = xs.size();
    }
    if (row && row->best_v != row->worst_v) rows.push_back(*row);
  }
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.worst / a.best > b.worst / b.best; });
  md << "\n## Parameters that mattered\n\nThe median p50 of the correct trials with each value of a parameter "
        "(values tried at least twice), its best and worst value, and their ratio. A marginal view: parameters "
        "interact, and the search tried good values more often.\n\n"
        "| parameter | best value | median µs (trials) | worst value | median µs (trials) | worst / best |\n"
        "|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    md << "| " << r.name << " | " << r.best_v << " | " << fmt_us(r.best) << " (" << r.best_n << ") | " << r.worst_v
       << " | " << fmt_us(r.worst) << " (" << r.worst_n << ") | " << fmt_ratio(r.worst / r.best) << " |\n";
}

// Nsight Compute's figures for the profiled trials, and what limits the
// winner on each problem.
void write_profiles(std::ostream& md, const RunInfo& r, const std::vector<TrialProfile>& profiles,
                    const std::vector<Trial>& elites, const std::optional<Trial>& def) {
  if (profiles.empty()) return;
  std::map<int64_t, std::string> name;
  for (size_t i = 0; i < elites.size(); ++i) name[elites[i].id] = "elite #" + std::to_string(i + 1);
  if (def) name.emplace(def->id, "default config");
  md << "\n## Nsight Compute\n\nOne launch per trial and problem (`evotune profile`), and for a baseline the longest "
        "kernel of one call, caches flushed, at the GPU's own clocks; "
     << profiles.front().tool
     << ". Stalls: warps stalled per issued instruction, by reason.\n\n"
        "| variant | problem | duration µs | SM % | tensor pipe % | occupancy % | DRAM % | L2 hit % | regs | smem | "
        "grid "
        "| top stalls |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  // Elites by rank, then the default config, then the baselines.
  std::map<int64_t, size_t> order;
  for (size_t i = 0; i < elites.size(); ++i) order.emplace(elites[i].id, i);
  if (def) order.emplace(def->id, elites.size());
  auto rank = [&](const TrialProfile& tp) {
    auto it = order.find(tp.trial_id);
    return !tp.baseline.empty() ? elites.size() + 2 : it != order.end() ? it->second : elites.size() + 1;
  };
  std::vector<TrialProfile> rows = profiles;
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  for (const TrialProfile& tp : rows) {
    const KernelProfile& p = tp.profile;
    auto it = name.find(tp.trial_id);
    std::vector<std::string> st;
    for (size_t i = 0; i < p.stalls.size() && i < 3; ++i)
      st.push_back(p.stalls[i].first + " " + strfmt("%.2f", p.stalls[i].second));
    const std::string who = !tp.baseline.empty() ? "baseline " + tp.baseline
                            : it != name.end()   ? it->second
                                                 : "trial id " + std::to_string(tp.trial_id);
    md << "| " << who << " | "
       << (tp.problem < static_cast<int>(r.problems.size()) ? r.problems[static_cast<size_t>(tp.problem)].canonical()
                                                            : std::to_string(tp.problem))
       << " | " << fmt_us(p.duration_us)
       << strfmt(" | %.1f | %.1f | %.1f | %.1f | %.1f | ", p.sm_pct, p.tensor_pct, p.occupancy_pct, p.dram_pct,
                 p.l2_hit_pct)
       << p.registers << " | " << fmt_kib(p.smem_bytes) << " | " << p.grid << " | " << join(st, ", ") << " |\n";
  }
  if (elites.empty()) return;
  auto problem_text = [&](int pi) {
    return pi < static_cast<int>(r.problems.size()) ? r.problems[static_cast<size_t>(pi)].canonical()
                                                    : std::to_string(pi);
  };
  bool any = false;
  for (const TrialProfile& tp : profiles) {
    if (!tp.baseline.empty() || tp.trial_id != elites.front().id) continue;
    if (!any) md << "\n### What limits the winner\n\n";
    any = true;
    md << "- " << problem_text(tp.problem) << ": " << limiter(tp.profile) << "\n";
    for (const TrialProfile& b : profiles)
      if (!b.baseline.empty() && b.problem == tp.problem)
        md << "  - beside it, baseline " << b.baseline << " (" << fmt_us(b.profile.duration_us)
           << " µs): " << limiter(b.profile) << "\n";
  }
}

// Failed trials grouped by status: how many, and the first three of each.
void write_failures(std::ostream& md, const RunInfo& r, const std::vector<Trial>& trials) {
  std::map<TrialStatus, std::vector<const Trial*>> by_status;
  for (const auto& t : trials)
    if (!t.ok()) by_status[t.status].push_back(&t);
  if (by_status.empty()) return;
  md << "\n## Failed trials by status\n\n| status | trials | first trials |\n|---|---|---|\n";
  for (const auto& [st, ts] : by_status) {
    std::vector<std::string> seqs;
    for (size_t i = 0; i < ts.size() && i < 10; ++i) seqs.push_back(std::to_string(ts[i]->seq));
    md << "| " << to_string(st) << " | " << ts.size() << " | " << join(seqs, ", ") << (ts.size() > 10 ? ", ..." : "")
       << " |\n";
  }
  for (const auto& [st, ts] : by_status) {
    md << "\n### " << to_string(st) << "\n\n| trial | error | config |\n|---|---|---|\n";
    for (size_t i = 0; i < ts.size() && i < 3; ++i) {
      std::string e = ts[i]->error;
      for (char& c : e)
        if (c == '\n' || c == '|') c = ' ';
      if (e.size() > 200) e = e.substr(0, 197) + "...";
      md << "| " << ts[i]->seq << " | " << e << " | `" << ts[i]->config.canonical() << "` |\n";
    }
    if (ts.size() > 3)
      md << "\n" << ts.size() - 3 << " more: `evotune trials " << r.id << " --status " << to_string(st) << "`.\n";
  }
}

}  // namespace

Report make_report(const Store& s, const RunInfo& r, const std::string& plot_stem) {
  KernelSpec spec = stored_run_spec(r);
  std::vector<Trial> trials = s.trials(r.id);
  std::vector<Trial> elites = s.elites(r.id);
  std::optional<Trial> def = r.default_trial_id ? s.trial(*r.default_trial_id) : std::nullopt;
  const std::vector<BaselineResult> measured = s.baselines(r.id);
  const std::vector<BaselineSummary> baselines = summarize_baselines(measured, r.problems.size());
  Report rep;
  std::string conv, top;
  if (!plot_stem.empty()) {
    conv = plot_stem + "-convergence.svg";
    top = plot_stem + "-elites.svg";
    rep.plots.push_back({conv, convergence_svg(r, trials)});
    rep.plots.push_back({top, elites_svg(r, elites, def, ok_baselines(baselines))});
  }
  std::ostringstream md;
  const std::vector<TrialProfile> profiles = s.profiles(r.id);
  write_summary(md, r, trials, measured, profiles);
  const TopLine top_line{r, spec, def, ok_baselines(baselines), peak_tflops(r.device.name, r.dtype)};
  write_top_line(md, top_line, elites);
  write_baselines(md, r, spec, baselines, elites, top_line.peak);
  if (!top.empty() && !elites.empty())
    md << "\n![the elites against the default config and the baselines](" << top << ")\n";
  write_convergence(md, trials, conv);
  write_profiles(md, r, profiles, elites, def);
  write_parameters(md, spec, trials);
  write_failures(md, r, trials);
  rep.markdown = md.str();
  return rep;
}

std::string report_markdown(const Store& s, const RunInfo& r) {
  return make_report(s, r, "").markdown;
}

}  // namespace evotune
