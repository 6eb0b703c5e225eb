#include "cli/console_progress.hpp"

#include <algorithm>

#include "cli/app.hpp"
#include "cli/table.hpp"
#include "core/format.hpp"
#include "core/strings.hpp"

namespace evotune {

namespace {

std::string first_lines(const std::string& s, size_t max_lines) {
  std::vector<std::string> keep;
  for (const auto& l : split(s, '\n')) {
    if (trim(l).empty()) continue;
    keep.push_back(l);
    if (keep.size() == max_lines) break;
  }
  return join(keep, " | ");
}

// The first error line of a compiler log, for the one-line progress output.
std::string first_error(const std::string& log) {
  for (const auto& l : split(log, '\n'))
    if (l.find("error") != std::string::npos) return trim(l);
  return first_lines(log, 1);
}

double speedup_vs(const Trial& t, const std::optional<Trial>& def) {
  if (!def || !def->ok() || !t.ok()) return 0;
  std::vector<double> r;
  for (size_t i = 0; i < t.per_problem.size() && i < def->per_problem.size(); ++i)
    if (t.per_problem[i].p50_us > 0 && def->per_problem[i].p50_us > 0)
      r.push_back(def->per_problem[i].p50_us / t.per_problem[i].p50_us);
  return geomean(r);
}

// Where the run evaluates, for its header.
std::string where(const TunePlan& plan) {
  switch (plan.backend) {
    case Backend::replay:
      return plan.device.name + " (replayed from " + plan.options.replay_path + ")";
    case Backend::compile_only:
      return plan.arch + " (compile only)";
    case Backend::gpu:
      break;
  }
  return plan.device.name + " (" + plan.arch + ")";
}

std::string sanitizer_line(const TunePlan& plan) {
  const SanitizePlan& s = plan.sanitize;
  if (s.mode == "none") return s.note.empty() ? "off (--sanitize none)" : s.note;
  return join(plan.spec.gates.sanitize, "+") + " on " + (s.mode == "all" ? "every correct trial" : "the elites") +
         " (" + s.path + ")";
}

}  // namespace

void ConsoleProgress::started(const TunePlan& plan, const RunInfo& run, int spent) {
  set_termination_note(run.id);
  const TuneOptions& o = plan.options;
  out_ << "run " << run.id << ": " << plan.spec.name << " on " << where(plan) << ", " << plan.problems.size()
       << " problem(s) + " << plan.all_problems.size() - plan.problems.size() << " check shape(s), " << o.strategy
       << " seed " << o.seed << ", budget " << run.budget << (plan.resumed ? strfmt(" (%d done)", spent) : "") << ", "
       << plan.compile_threads << " compile thread(s)"
       << (plan.ranks > 1 ? strfmt(", over %d MPI ranks", plan.ranks) : "") << ", db " << o.db_path << std::endl;
  if (plan.gpu()) out_ << "sanitizer gate: " << sanitizer_line(plan) << std::endl;
}

void ConsoleProgress::preparing(const TunePlan& plan) {
  if (quiet_) return;
  out_ << "preparing " << plan.all_problems.size() << " problem(s) on " << plan.gpus.size()
       << " GPU(s) (inputs, references)..." << std::endl;
}

void ConsoleProgress::trial(const TunePlan& plan, const Trial& t, int spent, const Trial* best) {
  if (quiet_) return;
  std::string detail;
  if (t.ok()) {
    if (plan.backend == Backend::compile_only)
      detail = strfmt("regs %3d  smem %7s  spills %d%s", t.res.registers, fmt_kib(t.res.smem_total()).c_str(),
                      t.res.spill_bytes(),
                      t.res.wgmma_serialized ? strfmt("  wgmma serialised (C%d)", t.res.wgmma_serialized).c_str() : "");
    else
      detail =
          strfmt("p50 %9s µs   best %9s µs", fmt_us(t.fitness).c_str(), best ? fmt_us(best->fitness).c_str() : "-");
  } else {
    detail = t.status == TrialStatus::compile_error ? first_error(t.error) : first_lines(t.error, 1);
    if (detail.size() > 110) detail = detail.substr(0, 107) + "...";
  }
  std::string dev_tag = plan.gpus.size() > 1 && t.device >= 0 ? strfmt("  [gpu %d]", t.device) : "";
  out_ << strfmt("[%3d/%d] %-17s %s  %s%s%s", spent, plan.budget(), to_string(t.status).c_str(), detail.c_str(),
                 t.config.canonical().c_str(), t.cache_hit ? "  (cached)" : "", dev_tag.c_str())
       << std::endl;
}

void ConsoleProgress::sanitizer_finding(const Trial& t, const SanitizerFinding& f) {
  if (quiet_) return;
  out_ << strfmt("sanitizer: trial %d is %s: %s", t.seq, to_string(f.status).c_str(),
                 first_lines(f.report, 1).substr(0, 160).c_str())
       << std::endl;
}

void ConsoleProgress::sanitizer_failed(const std::string& why) {
  out_ << "sanitizer gate failed, the remaining elites are not sanitized (--sanitize none skips it): "
       << first_lines(why, 3) << std::endl;
}

void ConsoleProgress::sanitizer_done(const std::vector<std::string>& tools, int checked, int rejected, double seconds) {
  if (quiet_) return;
  out_ << strfmt("sanitizer gate (%s): %d elite(s) checked, %d rejected, %.1f s", join(tools, "+").c_str(), checked,
                 rejected, seconds)
       << std::endl;
}

void ConsoleProgress::retime_started(size_t elites, const TuneOptions& o) {
  if (quiet_) return;
  out_ << "\nre-timing the " << elites << " elites interleaved, " << o.retime_rounds << " rounds"
       << (o.retime_ms > 0 ? strfmt(", each under sustained load (%.0f ms warm-up + %.0f ms)", o.retime_ms, o.retime_ms)
                           : std::string())
       << "..." << std::endl;
}

void ConsoleProgress::retime_round(int round, int rounds) {
  if (quiet_) return;
  out_ << strfmt("  round %d/%d done\n", round, rounds) << std::flush;
}

void ConsoleProgress::baselines_started(size_t baselines, size_t problems) {
  if (quiet_) return;
  out_ << "\nmeasuring " << baselines << " baseline(s) on " << problems
       << " problem(s), on this GPU with the elites' timing..." << std::endl;
}

void ConsoleProgress::baselines_done(double seconds) {
  if (quiet_) return;
  out_ << strfmt("  measured in %.1f s (not counted in the run's time)\n", seconds);
}

void ConsoleProgress::baseline(const TunePlan& plan, const BaselineResult& b) {
  if (quiet_) return;
  const std::string where = plan.problems.size() > 1 ? " [" + std::to_string(b.problem) + "]" : "";
  if (b.ok())
    out_ << strfmt("  %s%s: %s µs (%s)\n", b.name.c_str(), where.c_str(), fmt_us(b.m.p50_us).c_str(), b.detail.c_str());
  else
    out_ << "  " << b.name << where << ": " << b.status << ": " << first_lines(b.reason, 1) << "\n";
  out_ << std::flush;
}

// The summary, also with -q.
void ConsoleProgress::finished(const TunePlan& plan, const RunSummary& s) {
  const TuneResult& r = *s.result;
  const TuneOptions& o = plan.options;
  out_ << "\n";
  std::vector<std::string> parts;
  for (TrialStatus st : all_statuses())
    if (r.status_counts[static_cast<size_t>(st)] > 0)
      parts.push_back(to_string(st) + " " + std::to_string(r.status_counts[static_cast<size_t>(st)]));
  const std::string status = r.interrupted ? "interrupted" : "done";
  out_ << strfmt("run %lld %s: %d trials in %.1f s%s (%s)%s\n", static_cast<long long>(r.run.id), status.c_str(),
                 s.spent, s.stats.wall_s, s.simulated ? " simulated" : "", join(parts, ", ").c_str(),
                 r.exhausted ? "; the space is exhausted" : "");
  if (s.gpu_time)
    out_ << strfmt(
        "time: GPU busy %.0f%% (verify %.1f s, bench %.1f s), compile pool busy %.0f%% (%.1f s over %u threads, %d "
        "cache hits), %.1f trials/min\n",
        100 * r.gpu_busy, s.stats.verify_s, s.stats.bench_s, 100 * r.compile_busy, s.stats.compile_busy_s,
        plan.compile_threads, s.stats.cache_hits, s.stats.wall_s > 0 ? s.spent / (s.stats.wall_s / 60) : 0.0);
  if (s.gpu_time && r.search_s > 0 && r.search_trials > 0 && r.after_search_s >= 0.1)
    out_ << strfmt("search: %d trials in %.1f s, %.1f trials/min, GPU busy %.0f%% (the elites' checks and re-timing "
                   "after it: %.1f s)\n",
                   r.search_trials, r.search_s, r.search_trials / (r.search_s / 60), 100 * r.search_gpu_busy,
                   r.after_search_s);
  if (r.interrupted) out_ << "resume with: evotune run --resume " << r.run.id << " --db " << o.db_path << "\n";
  if (r.elites.empty() || o.compile_only) return;
  out_ << "\nelite population (top " << o.elites << "):\n";
  print_elites(out_, r.run, r.elites, r.default_trial, &plan.spec);
  if (r.default_trial && r.default_trial->ok())
    out_ << "\ndefault config: " << fmt_us(r.default_trial->fitness) << " µs (trial " << r.default_trial->seq << ")\n";
  else
    out_ << "\n(the default config was not measured ok; no speedup over it)\n";
  if (!r.baselines.empty()) {
    out_ << "\n";
    print_baselines(out_, r.run, r.baselines, &r.elites.front());
  }
}

void print_baselines(std::ostream& out, const RunInfo& run, const std::vector<BaselineResult>& baselines,
                     const Trial* best) {
  const std::vector<BaselineSummary> all = summarize_baselines(baselines, run.problems.size());
  if (all.empty()) return;
  out << "baselines (same GPU, the elites' timing" << (run.problems.size() > 1 ? "; µs: geomean over problems" : "")
      << "):\n";
  Table t({"baseline", "p50 µs", "best vs it", "max err", "detail"});
  for (const BaselineSummary& b : all) {
    if (const BaselineResult* bad = b.not_ok()) {
      t.add({b.name, "-", "-", "-", bad->status + ": " + first_lines(bad->reason, 1)});
      continue;
    }
    double max_err = 0;
    for (const BaselineResult* r : b.per_problem)
      if (r) max_err = std::max(max_err, r->m.err.max_abs);
    t.add({b.name, fmt_us(b.us), best ? fmt_ratio(speedup_over(*best, b)) : "-",
           b.library == "reference" ? "-" : fmt_sci(max_err), b.detail});
  }
  t.print(out);
}

TuneResult tune(const TuneOptions& options, std::ostream& out) {
  ConsoleProgress progress(out, options.quiet);
  return tune(options, static_cast<Progress&>(progress));
}

void print_elites(std::ostream& out, const RunInfo& run, const std::vector<Trial>& elites,
                  const std::optional<Trial>& default_trial, const KernelSpec* spec) {
  bool retimed = std::any_of(elites.begin(), elites.end(), [](const Trial& t) { return t.final_us > 0; });
  std::vector<std::string> head = {"#", "trial"};
  for (size_t i = 0; i < run.problems.size(); ++i)
    head.push_back(run.problems.size() == 1 ? "p50 µs" : "p50 µs [" + std::to_string(i) + "]");
  if (retimed) head.push_back("re-timed µs");
  bool tflops = spec && !spec->flops.empty() && run.problems.size() == 1 && spec->flops_of(run.problems[0]) > 0;
  if (tflops) head.push_back("TFLOP/s");
  head.insert(head.end(), {"vs default", "max err", "mean err", "regs", "smem", "config"});
  Table t(head);
  int rank = 0;
  for (const Trial& e : elites) {
    std::vector<std::string> row = {std::to_string(++rank), std::to_string(e.seq)};
    double max_err = 0, mean_err = 0;
    for (size_t i = 0; i < run.problems.size(); ++i) {
      const Measurement* m = i < e.per_problem.size() ? &e.per_problem[i] : nullptr;
      row.push_back(m ? fmt_us(m->p50_us) : "-");
    }
    if (retimed) row.push_back(fmt_us(e.final_us));
    for (const auto& m : e.per_problem) {
      max_err = std::max(max_err, m.err.max_abs);
      mean_err = std::max(mean_err, m.err.mean_abs);
    }
    if (tflops) {
      double us = e.final_us > 0 ? e.final_us : (e.per_problem.empty() ? 0 : e.per_problem[0].p50_us);
      row.push_back(us > 0 ? strfmt("%.1f", spec->flops_of(run.problems[0]) / (us * 1e-6) / 1e12) : "-");
    }
    row.push_back(fmt_ratio(speedup_vs(e, default_trial)));
    row.push_back(fmt_sci(max_err));
    row.push_back(fmt_sci(mean_err));
    row.push_back(std::to_string(e.res.registers));
    row.push_back(fmt_kib(e.res.smem_total()));
    row.push_back(e.config.canonical());
    t.add(row);
  }
  t.print(out);
}

}  // namespace evotune
