#include "tune/profile.hpp"

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

// This binary evaluating one trial's config on the run's problems, nothing
// but the timing (the run's own gates passed it already).
std::vector<std::string> evaluation(const ProfileOptions& o, const RunInfo& r, const Trial& t,
                                    const std::string& scratch_db) {
  std::vector<std::string> a = {
      o.exe.empty() ? self_exe() : o.exe, "--db", scratch_db, "run", "-q", "--kernel", r.kernel_ref()};
  for (const Problem& p : r.problems) {
    a.push_back("--problem");
    a.push_back(p.canonical());
  }
  for (const char* x : {"--strategy", "exhaustive", "--budget", "1", "--samples", "3", "--retime", "0", "--sanitize",
                        "none", "--dtype"})
    a.push_back(x);
  a.push_back(r.dtype);
  a.push_back("--config");
  a.push_back(t.config.canonical());
  return a;
}

std::string last_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines = split(text, '\n');
  size_t from = lines.size() > n ? lines.size() - n : 0;
  return join(std::vector<std::string>(lines.begin() + static_cast<long>(from), lines.end()), "\n");
}

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
  const fs::path scratch = fs::temp_directory_path() / ("evotune-profile-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{scratch};

  ProfileSummary sum;
  int i = 0;
  for (const Trial& t : todo) {
    const std::string db = (scratch / strfmt("t%lld.db", static_cast<long long>(t.id))).string();
    log << "profiling trial " << t.seq << " (" << ++i << "/" << todo.size() << "): " << t.config.canonical() << "\n"
        << std::flush;
    NcuOutput out = run_ncu(ncu, evaluation(o, *run, t, db), static_cast<int>(run->problems.size()), o.timeout_s);
    if (std::string why = ncu_failure(out.text); !why.empty())
      throw EngineError(why + "; ncu printed:\n" + last_lines(out.text, 12));
    if (out.exit_code != 0)
      throw EngineError(out.exit_code < 0 ? "ncu did not finish in " + strfmt("%.0f", o.timeout_s) + " s"
                                          : "ncu exited with " + std::to_string(out.exit_code) + "; it printed:\n" +
                                                last_lines(out.text, 12));
    std::vector<KernelProfile> got = parse_ncu_raw_csv(out.text);
    if (got.size() != run->problems.size())
      throw EngineError("ncu profiled " + std::to_string(got.size()) + " launches for " +
                        std::to_string(run->problems.size()) + " problems; it printed:\n" + last_lines(out.text, 12));
    std::string tool;
    for (const std::string& line : split(out.text, '\n'))
      if (line.rfind("==PROF==", 0) == 0 && line.find("Version") != std::string::npos) tool = line;
    for (size_t pi = 0; pi < got.size(); ++pi) {
      TrialProfile tp{t.id, static_cast<int>(pi), got[pi], tool.empty() ? "ncu" : tool, ""};
      s.record_profile(run->id, tp);
      sum.profiles.push_back(tp);
      log << "  " << run->problems[pi].canonical() << ": " << fmt_us(got[pi].duration_us) << " µs, " << limiter(got[pi])
          << "\n";
    }
  }
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log << "profiled " << todo.size() << " trial(s) in " << strfmt("%.1f", sum.wall_s) << " s\n";
  return sum;
}

}  // namespace evotune
