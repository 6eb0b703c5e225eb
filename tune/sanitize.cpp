#include <chrono>
#include <set>

#include "core/error.hpp"
#include "tune/elites.hpp"
#include "tune/search.hpp"

namespace evotune {

void sanitize_elites(const TunePlan& plan, GpuPool& gpu, const SanitizerGate& gate, RunRecorder& recorder,
                     Progress& progress) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const auto t0 = Clock::now();
  int checked = 0, rejected = 0;
  std::set<int64_t> seen;
  try {
    for (;;) {
      std::vector<Trial> round;
      std::vector<EvalRequest> requests;
      const Limits limits = limits_for(plan, recorder.population().best());
      for (const Trial& t : recorder.population().elites()) {
        if (!t.sanitized.empty() || !seen.insert(t.id).second) continue;
        Staged s = gpu.stage_now(t.config);
        if (s.finished) continue;  // no longer passes the gates: nothing to check
        s.job.request.abort_us = limits.abort_us;
        round.push_back(t);
        requests.push_back(std::move(s.job.request));
      }
      if (round.empty()) break;
      const auto t1 = Clock::now();
      auto findings = gate.check_all(requests, gpu.first_device(), sanitizer_limit(limits.timeout_s));
      gpu.add_gpu_time(seconds_since(t1));
      checked += static_cast<int>(round.size());
      for (size_t i = 0; i < round.size(); ++i) {
        if (findings[i]) {
          ++rejected;
          recorder.sanitizer_finding(round[i], *findings[i]);
        } else {
          recorder.sanitized(round[i], gate.tools());
        }
      }
    }
  } catch (const EngineError& err) {
    if (plan.sanitize.asked) throw;
    progress.sanitizer_failed(err.what());
  }
  progress.sanitizer_done(gate.tools(), checked, rejected, seconds_since(t0));
}

}  // namespace evotune
