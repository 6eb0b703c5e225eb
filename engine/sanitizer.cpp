#include "engine/sanitizer.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <regex>
#include <thread>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/cuda_tools.hpp"
#include "engine/worker_client.hpp"

namespace evotune {

namespace {

// A temporary file that is removed when it goes out of scope.
class TempFile {
 public:
  TempFile() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "evotune-sanitizer-XXXXXX").string();
    int fd = ::mkstemp(tmpl.data());
    if (fd < 0) throw EngineError("creating a temporary file for compute-sanitizer's log failed");
    ::close(fd);
    path_ = tmpl;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TrialStatus sanitizer_finding_status(const std::string& tool) {
  return tool == "memcheck" ? TrialStatus::crashed : TrialStatus::incorrect;
}

std::string locate_compute_sanitizer() {
  return locate_cuda_tool("compute-sanitizer", "EVOTUNE_SANITIZER");
}

std::optional<std::string> first_sanitizer_report(const std::string& log) {
  // Every line of the tool's output starts with "========= "; a report is a
  // run of such lines ended by a bare "=========", and the log ends with a
  // summary: "ERROR SUMMARY: 2 errors" (memcheck, synccheck) or "RACECHECK
  // SUMMARY: 3 hazards displayed (1 error, 2 warnings)".
  static const std::regex errors(R"(ERROR SUMMARY: (\d+) error)");
  static const std::regex hazards(R"(RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?)");
  std::smatch m;
  long long count = -1;
  if (std::regex_search(log, m, hazards) || std::regex_search(log, m, errors)) count = std::stoll(m[1]);
  if (count < 0)
    throw EngineError("compute-sanitizer's log has no summary (did the tool finish?):\n" +
                      log.substr(0, std::min<size_t>(log.size(), 2000)));
  if (count == 0) return std::nullopt;
  std::vector<std::string> report;
  bool in_backtrace = false;
  for (const auto& raw : split(log, '\n')) {
    if (!starts_with(raw, "=========")) continue;
    std::string line = trim(raw.substr(9));
    if (line.empty()) {
      if (!report.empty()) break;
      continue;
    }
    if (line == "COMPUTE-SANITIZER" || line.find("SUMMARY:") != std::string::npos) continue;
    if (starts_with(line, "Saved host backtrace")) in_backtrace = true;
    if (in_backtrace) continue;  // host frames of the worker, not the kernel's fault
    if (report.size() < 8) report.push_back(line);
  }
  if (report.empty()) report.push_back(strfmt("%lld error(s), no report text", count));
  return join(report, " | ");
}

SanitizerGate::SanitizerGate(std::string sanitizer, std::string exe, const SetupRequest& setup,
                             const std::vector<size_t>& problems, std::vector<std::string> tools)
    : sanitizer_(std::move(sanitizer)),
      exe_(std::move(exe)),
      setup_(setup),
      problems_(problems),
      tools_(std::move(tools)) {
  setup_.guard_buffers = false;
  setup_.problems.clear();
  for (size_t i : problems_) {
    setup_.problems.push_back(setup.problems.at(i));
    setup_.problems.back().timed = false;
  }
}

std::optional<SanitizerFinding> SanitizerGate::check(const EvalRequest& req, int device, double timeout_s) const {
  return check_all({req}, device, timeout_s).front();
}

std::vector<std::optional<SanitizerFinding>> SanitizerGate::check_all(const std::vector<EvalRequest>& reqs, int device,
                                                                      double timeout_s, int parallel) const {
  std::vector<EvalRequest> subs;
  for (const EvalRequest& req : reqs) {
    EvalRequest sub;
    sub.cubins = req.cubins;
    for (size_t i : problems_) {
      sub.launches.push_back(req.launches.at(i));
      sub.abort_us.push_back(0);
    }
    subs.push_back(std::move(sub));
  }
  // Job k is candidate k / tools, tool k % tools.
  const size_t n_tools = tools_.size(), n_jobs = subs.size() * n_tools;
  std::vector<std::optional<SanitizerFinding>> found(n_jobs);
  std::vector<std::exception_ptr> failed(n_jobs);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < n_jobs;) {
      try {
        found[k] = run_tool(tools_[k % n_tools], subs[k / n_tools], device, timeout_s);
      } catch (...) {
        failed[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 0; i < std::min<size_t>(n_jobs, static_cast<size_t>(std::max(parallel, 1))); ++i)
    threads.emplace_back(work);
  for (auto& t : threads) t.join();
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
  std::vector<std::optional<SanitizerFinding>> out(subs.size());
  for (size_t k = 0; k < n_jobs; ++k)
    if (found[k] && !out[k / n_tools]) out[k / n_tools] = found[k];
  return out;
}

std::optional<SanitizerFinding> SanitizerGate::run_tool(const std::string& tool, const EvalRequest& req, int device,
                                                        double timeout_s) const {
  TempFile log;
  SetupRequest setup = setup_;
  setup.device = device;
  // Only the candidate's kernel is checked: evotune's own kernels and the
  // reference are not the candidate's doing.
  const std::string entry = req.launches.empty() ? std::string() : req.launches.front().entry;
  std::vector<std::string> launcher = {
      sanitizer_, "--tool", tool, "--log-file", log.path(), "--print-limit", "10", "--report-api-errors", "no"};
  if (!entry.empty()) launcher.insert(launcher.end(), {"--kernel-name", "kne=" + entry});
  // Races only: racecheck's warnings include intra-warp orderings that
  // collective instructions (ldmatrix) guarantee.
  if (tool == "racecheck") launcher.insert(launcher.end(), {"--racecheck-detect-level", "error"});
  WorkerClient worker(exe_, setup, launcher);
  SanitizerFinding f;
  f.tool = tool;
  f.status = sanitizer_finding_status(tool);
  EvalReply reply;
  try {
    worker.start();
    reply = worker.evaluate(req, timeout_s);
  } catch (const EngineError& e) {
    throw EngineError(std::string("compute-sanitizer --tool ") + tool + ": " + e.what());
  }
  if (reply.status == TrialStatus::timeout)
    throw EngineError(strfmt("compute-sanitizer --tool %s: no result within %.0f s", tool.c_str(), timeout_s));
  worker.finish(60 * 1000);
  std::string text;
  try {
    text = read_file(log.path());
  } catch (const std::exception& e) {
    throw EngineError(std::string("compute-sanitizer --tool ") + tool + " wrote no log: " + e.what());
  }
  std::optional<std::string> report;
  try {
    report = first_sanitizer_report(text);
  } catch (const EngineError& e) {
    // A worker the tool stopped mid-evaluation leaves no summary; its reply
    // still says what happened to the candidate.
    if (reply.status == TrialStatus::ok) throw EngineError(std::string("--tool ") + tool + ": " + e.what());
  }
  if (report) {
    f.report = "compute-sanitizer " + tool + ": " + *report;
    return f;
  }
  if (reply.status != TrialStatus::ok) {
    f.status = reply.status;
    f.report = "under compute-sanitizer " + tool + ": " + reply.error;
    return f;
  }
  return std::nullopt;
}

}  // namespace evotune
