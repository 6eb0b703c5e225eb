#include "engine/torch_baseline.hpp"

#include <nlohmann/json.hpp>

#include "core/format.hpp"
#include "core/strings.hpp"
#include "engine/child_process.hpp"
#include "engine/cuda_tools.hpp"
#include "engine/ncu.hpp"

namespace evotune {

const std::map<std::string, std::string>& embedded_engine_files();  // generated

namespace {

constexpr const char* kMarker = "EVOTUNE_BASELINE ";

std::string tail(const std::string& text, size_t lines) {
  std::vector<std::string> all = split(text, '\n');
  while (!all.empty() && all.back().empty()) all.pop_back();
  const size_t from = all.size() > lines ? all.size() - lines : 0;
  return join(std::vector<std::string>(all.begin() + static_cast<long>(from), all.end()), "\n");
}

// The script's timing: the set-up's options, or the sustained ones.
nlohmann::json timing_of(const TorchSdpaRequest& r) {
  const TimingOptions& t = r.timing;
  const SustainedTiming& s = r.sustained;
  return {{"flush_l2", t.flush_l2},
          {"flush_bytes_factor", t.flush_bytes_factor},
          {"warmup_ms", t.warmup_ms},
          {"sustain_ms", s.on() ? s.warmup_ms : t.sustain_ms},
          {"target_ms", s.on() && s.target_ms > 0 ? s.target_ms : t.target_ms},
          {"min_samples", t.min_samples},
          {"max_samples", std::max(t.min_samples, s.on() && s.max_samples > 0 ? s.max_samples : t.max_samples)}};
}

}  // namespace

std::string locate_python() {
  return locate_cuda_tool("python3", "EVOTUNE_PYTHON");
}

BaselineResult torch_sdpa_baseline(const TorchSdpaRequest& req, double timeout_s) {
  BaselineResult r;
  r.problem = req.problem;
  r.name = req.name;
  r.library = "torch_sdpa";
  const std::string python = locate_python();
  if (python.empty()) {
    r.status = "skipped";
    r.reason = "python3 not found (PATH, or set EVOTUNE_PYTHON): PyTorch's attention is not measured";
    return r;
  }
  nlohmann::json args = {{"device", req.device},
                         {"seed", req.seed},
                         {"dtype", req.dtype},
                         {"backend", req.backend},
                         {"nvtx_range", baseline_range(req.name, req.problem)},
                         {"timing", timing_of(req)}};
  for (const auto& [k, v] : req.values) args[k] = v;
  const CapturedRun run =
      run_captured({python, "-c", embedded_engine_files().at("engine/torch_sdpa.py"), args.dump()}, timeout_s);
  const size_t at = run.text.rfind(kMarker);
  if (run.exit_code != 0 || at == std::string::npos) {
    r.status = "failed";
    r.reason = (run.exit_code < 0 ? "python3 did not finish in " + strfmt("%.0f", timeout_s) + " s"
                                  : "python3 exited with " + std::to_string(run.exit_code)) +
               "; it printed:\n" + tail(run.text, 8);
    return r;
  }
  const size_t from = at + std::string(kMarker).size();
  const nlohmann::json got = nlohmann::json::parse(run.text.substr(from, run.text.find('\n', from) - from));
  r.status = got.value("status", "failed");
  r.reason = got.value("reason", "");
  r.detail = got.value("detail", "");
  if (got.contains("m")) r.m = got.at("m").get<Measurement>();
  r.m.problem = req.problem;
  if (r.ok()) {
    const ErrorStats& e = r.m.err;
    std::vector<std::string> why;
    if (e.nan_count > 0) why.push_back(std::to_string(e.nan_count) + " NaN outputs");
    if (e.max_abs > req.tol.max_abs)
      why.push_back("max |error| " + fmt_err(e.max_abs) + " > " + fmt_err(req.tol.max_abs));
    if (e.mean_abs > req.tol.mean_abs)
      why.push_back("mean |error| " + fmt_err(e.mean_abs) + " > " + fmt_err(req.tol.mean_abs));
    if (!why.empty()) {
      r.status = "wrong";
      r.reason = join(why, ", ") + " against fp32 attention";
    }
  }
  return r;
}

}  // namespace evotune
