#include "tune/window.hpp"

#include <algorithm>
#include <cmath>

namespace evotune {

namespace {

// Configs in flight before anything is measured: enough to start the
// pipeline, few enough that the start is not proposed blind; the window
// grows by one per result from here.
constexpr int kInitialWindow = 8;
// Head room over Little's law for compile and GPU times that vary, when the
// GPU is the bottleneck (compiled configs wait for it).
constexpr double kMargin = 1.25;

}  // namespace

WindowSizer::WindowSizer(const TunePlan& plan, int slots, int compile_slots)
    : fixed_(plan.options.window > 0 ? plan.options.window : 0),
      slots_(std::max(slots, 1)),
      compile_threads_(compile_slots > 0 ? compile_slots : std::max(1u, plan.compile_threads)) {
  cap_ = fixed_ > 0 ? plan.window : std::max(plan.window, static_cast<int>(2 * compile_threads_));
  for (const Trial& t : plan.previous) observe(t);
}

void WindowSizer::observe(const Trial& t, double staging_s, double run_s) {
  if (t.status == TrialStatus::invalid) return;
  ++results_;
  ++compiled_;
  compile_s_ += std::max(t.compile_ms / 1000.0, staging_s);
  const double gpu_s = std::max((t.verify_ms + t.bench_ms) / 1000.0, run_s);
  if (gpu_s > 0) {
    ++ran_;
    gpu_s_ += gpu_s;
  }
}

int WindowSizer::window() const {
  if (fixed_ > 0) return fixed_;
  if (compiled_ == 0) return std::min(cap_, kInitialWindow);
  const double compile_s = compile_s_ / compiled_;
  const double gpu_s = ran_ > 0 ? gpu_s_ / ran_ : 0;
  const double compile_rate = compile_s > 0 ? compile_threads_ / compile_s : HUGE_VAL;  // configs per second
  const double gpu_rate = gpu_s > 0 ? slots_ / gpu_s : HUGE_VAL;
  double in_flight = 0;
  if (compile_rate < gpu_rate)  // compile-bound: every compile process busy, no queue before them
    in_flight = compile_threads_ + compile_rate * gpu_s;
  else if (std::isfinite(gpu_rate))  // GPU-bound: a margin of compiled configs waiting for it
    in_flight = kMargin * gpu_rate * (compile_s + gpu_s);
  const int w = std::min(static_cast<int>(std::ceil(in_flight)) + slots_, kInitialWindow + results_);
  return std::clamp(w, std::min(cap_, slots_ + 1), cap_);
}

}  // namespace evotune
