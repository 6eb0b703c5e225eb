#include "tune/profile.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <set>

#include <unistd.h>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/strings.hpp"
#include "engine/ncu.hpp"
#include "tune/plan.hpp"

namespace evotune {

namespace {

namespace fs = std::filesystem;

// The trials to profile: the elites (best first, at most `top`), then the
// default config.
std::vector<Trial> targets(const Store& s, const RunInfo& r, const ProfileOptions& o) {
  std::vector<Trial> out;
  std::set<int64_t> seen;
  for (const Trial& e : s.elites(r.id))
    if (static_cast<int>(out.size()) < o.top && seen.insert(e.id).second) out.push_back(e);
  if (o.with_default && r.default_trial_id)
    if (auto d = s.trial(*r.default_trial_id); d && d->ok() && seen.insert(d->id).second) out.push_back(*d);
  return out;
}

// This binary evaluating one config on some of the run's problems, nothing
// but the timing (the run's own gates passed it already), and measuring the
// baselines `baselines` selects ("none" for a trial's profile).
std::vector<std::string> evaluation(const ProfileOptions& o, const RunInfo& r, const Config& config,
                                    const std::vector<Problem>& problems, const std::string& baselines,
                                    const std::string& scratch_db) {
  std::vector<std::string> a = {
      o.exe.empty() ? self_exe() : o.exe, "--db", scratch_db, "run", "-q", "--kernel", r.kernel_ref()};
  for (const Problem& p : problems) {
    a.push_back("--problem");
    a.push_back(p.canonical());
  }
  for (const char* x : {"--strategy", "exhaustive", "--budget", "1", "--samples", "3", "--retime", "0", "--sanitize",
                        "none", "--dtype"})
    a.push_back(x);
  a.push_back(r.dtype);
  a.push_back("--config");
  a.push_back(config.canonical());
  a.push_back("--baselines");
  a.push_back(baselines);
  return a;
}

std::string last_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines = split(text, '\n');
  size_t from = lines.size() > n ? lines.size() - n : 0;
  return join(std::vector<std::string>(lines.begin() + static_cast<long>(from), lines.end()), "\n");
}

// Throws EngineError when ncu failed or timed out.
void check_ncu(const NcuOutput& out, double timeout_s) {
  if (std::string why = ncu_failure(out.text); !why.empty())
    throw EngineError(why + "; ncu printed:\n" + last_lines(out.text, 12));
  if (out.exit_code != 0)
    throw EngineError(out.exit_code < 0 ? "ncu did not finish in " + strfmt("%.0f", timeout_s) + " s"
                                        : "ncu exited with " + std::to_string(out.exit_code) + "; it printed:\n" +
                                              last_lines(out.text, 12));
}

// The kernels ncu profiled in `range` while `program` ran. Throws EngineError when ncu failed, timed out or profiled
// nothing.
struct Profiled {
  std::vector<KernelProfile> kernels;
};
Profiled profile_program(const std::string& ncu, const std::vector<std::string>& program, const std::string& range,
                         int launches, double timeout_s) {
  NcuOutput out = run_ncu(ncu, program, range, launches, timeout_s);
  check_ncu(out, timeout_s);
  Profiled p{parse_ncu_raw_csv(out.text)};
  if (p.kernels.empty()) throw EngineError("ncu profiled no kernel; it printed:\n" + last_lines(out.text, 12));
  return p;
}

// The same launches once more into `dir`/`stem`.ncu-rep (the full set, source
// counters); returns its path. Throws EngineError when ncu failed or wrote no
// report.
std::string report_program(const std::string& ncu, const std::vector<std::string>& program, const std::string& range,
                           int launches, const fs::path& dir, const std::string& stem, double timeout_s) {
  const fs::path base = dir / stem;
  NcuOutput out = run_ncu_report(ncu, program, range, launches, base.string(), timeout_s);
  check_ncu(out, timeout_s);
  const fs::path rep = base.string() + ".ncu-rep";
  if (!fs::is_regular_file(rep))
    throw EngineError("ncu wrote no report " + rep.string() + "; it printed:\n" + last_lines(out.text, 12));
  return rep.string();
}

// A file name's stem from a baseline's name (letters, digits, '.', '-', '_').
std::string file_stem(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return s;
}

// The reports' directory, made if missing; "" for none. Throws UsageError
// when the path exists and is not a directory, or cannot be made.
fs::path reports_dir(const std::string& path) {
  if (path.empty()) return {};
  std::error_code ec;
  fs::create_directories(path, ec);
  if (!fs::is_directory(path))
    throw UsageError("--reports " + path + ": not a directory" + (ec ? " (" + ec.message() + ")" : std::string()) +
                     "; nothing was profiled");
  return fs::path(path);
}

// The spec's [[baseline]] that measures a stored result: its name, less the
// "-top<N>" of cuBLASLt's fastest of its first N.
std::string spec_baseline_of(const BaselineResult& b) {
  const size_t at = b.name.rfind("-top");
  return b.library == "cublaslt" && at != std::string::npos ? b.name.substr(0, at) : b.name;
}

class Scratch {
 public:
  Scratch() : dir_(fs::temp_directory_path() / ("evotune-profile-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string db(const std::string& stem) { return (dir_ / (stem + ".db")).string(); }

 private:
  fs::path dir_;
};

}  // namespace

ProfileSummary profile_run(const ProfileOptions& o, std::ostream& log) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string ncu = o.ncu.empty() ? locate_ncu() : o.ncu;
  if (const char* e = std::getenv("EVOTUNE_NCU"); ncu.empty() && o.ncu.empty() && e && *e)
    throw EngineError(std::string("EVOTUNE_NCU=") + e + " is not an executable; nothing was changed");
  if (ncu.empty())
    throw EngineError(
        "Nsight Compute (ncu) not found: looked in $EVOTUNE_NCU, PATH, $CUDA_HOME/bin and /usr/local/cuda/bin. "
        "Install it (it ships with the CUDA toolkit) or point EVOTUNE_NCU at it; nothing was changed");
  Store s = Store::open(o.db_path);
  auto run = s.run(o.run_id);
  if (!run) throw UsageError("no run " + std::to_string(o.run_id) + " in " + o.db_path);
  if (run->compile_only) throw UsageError("run " + std::to_string(run->id) + " was compile-only: nothing to profile");
  const std::vector<Trial> todo = targets(s, *run, o);
  if (todo.empty()) throw UsageError("run " + std::to_string(run->id) + " has no correct trial to profile");
  const fs::path reports = reports_dir(o.reports_dir);
  const std::string run_stem = "run" + std::to_string(run->id);
  auto keep_report = [&](const std::vector<std::string>& program, const std::string& range, int launches,
                         const std::string& stem) {
    if (reports.empty()) return;
    log << "  report: " << report_program(ncu, program, range, launches, reports, stem, o.timeout_s) << "\n"
        << std::flush;
  };
  std::vector<BaselineResult> baselines;
  if (o.baselines)
    for (BaselineResult& b : s.baselines(run->id))
      if (b.ok()) baselines.push_back(std::move(b));
  Scratch scratch;
  const std::string tool = ncu_version(ncu);
  ProfileSummary sum;
  const size_t total = todo.size() + baselines.size();
  size_t i = 0;
  auto store = [&](TrialProfile tp) {
    s.record_profile(run->id, tp);
    log << "  " << run->problems[static_cast<size_t>(tp.problem)].canonical() << ": " << fmt_us(tp.profile.duration_us)
        << " µs, " << limiter(tp.profile) << "\n";
    sum.profiles.push_back(std::move(tp));
  };

  for (const Trial& t : todo) {
    log << "profiling trial " << t.seq << " (" << ++i << "/" << total << "): " << t.config.canonical() << "\n"
        << std::flush;
    const auto program = evaluation(o, *run, t.config, run->problems, "none", scratch.db("t" + std::to_string(t.id)));
    const int n = static_cast<int>(run->problems.size());
    Profiled got = profile_program(ncu, program, kTimedRange, n, o.timeout_s);
    if (got.kernels.size() != run->problems.size())
      throw EngineError("ncu profiled " + std::to_string(got.kernels.size()) + " launches for " + std::to_string(n) +
                        " problems");
    for (int pi = 0; pi < n; ++pi) store({t.id, "", pi, got.kernels[static_cast<size_t>(pi)], tool, ""});
    keep_report(program, kTimedRange, n, run_stem + "-trial" + std::to_string(t.seq));
  }

  // A baseline's call may launch several kernels (a split-K reduction, a
  // softmax-statistics pass): the longest is the one stored.
  for (const BaselineResult& b : baselines) {
    log << "profiling baseline " << b.name << " (" << ++i << "/" << total << ")\n" << std::flush;
    const Problem& p = run->problems.at(static_cast<size_t>(b.problem));
    const auto program =
        evaluation(o, *run, todo.front().config, {p}, spec_baseline_of(b), scratch.db("b" + std::to_string(b.id)));
    Profiled got = profile_program(ncu, program, baseline_range(b.name, 0), 0, o.timeout_s);
    auto longest = std::max_element(got.kernels.begin(), got.kernels.end(),
                                    [](const auto& x, const auto& y) { return x.duration_us < y.duration_us; });
    if (got.kernels.size() > 1) log << "  (" << got.kernels.size() << " kernels in one call; the longest stored)\n";
    store({0, b.name, b.problem, *longest, tool, ""});
    keep_report(program, baseline_range(b.name, 0), 0,
                run_stem + "-" + file_stem(b.name) + "-p" + std::to_string(b.problem));
  }
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log << "profiled " << todo.size() << " trial(s)";
  if (!baselines.empty()) log << " and " << baselines.size() << " baseline result(s)";
  log << " in " << strfmt("%.1f", sum.wall_s) << " s\n";
  if (!reports.empty())
    log << "full reports in " << reports.string()
        << ": open them in Nsight Compute (ncu-ui), or list the stalls per SASS instruction with `ncu -i FILE --page "
           "source --csv --print-source sass`\n";
  return sum;
}

}  // namespace evotune
