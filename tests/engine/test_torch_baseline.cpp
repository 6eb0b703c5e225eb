// PyTorch's attention baseline where it cannot run: no python3, or no torch
// (as on CI): skipped with the reason, never a failure.
#include <cstdlib>

#include "engine/torch_baseline.hpp"
#include "tests/catch.hpp"

using namespace evotune;

namespace {

TorchSdpaRequest small_request() {
  TorchSdpaRequest r;
  r.name = "cudnn";
  r.dtype = "fp16";
  r.backend = "cudnn";
  r.values = {{"b", 1}, {"h", 2}, {"hkv", 2}, {"s", 64}, {"skv", 64}, {"d", 64}, {"causal", 0}};
  return r;
}

struct EnvVar {
  std::string name;
  EnvVar(std::string n, const std::string& v) : name(std::move(n)) { setenv(name.c_str(), v.c_str(), 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("torch_sdpa without python3: skipped, saying where it looked", "[engine][baselines]") {
  EnvVar py("EVOTUNE_PYTHON", "/nonexistent/python3");
  BaselineResult r = torch_sdpa_baseline(small_request(), 60);
  CHECK(r.status == "skipped");
  CHECK(r.reason.find("python3 not found") != std::string::npos);
  CHECK(r.name == "cudnn");
}

TEST_CASE("torch_sdpa runs its embedded script, without torch or a GPU it is skipped with the reason",
          "[engine][baselines]") {
  REQUIRE_FALSE(locate_python().empty());  // the build and CI run python3
  BaselineResult r = torch_sdpa_baseline(small_request(), 120);
  INFO(r.status << ": " << r.reason);
  if (r.status == "ok") {  // a host with PyTorch and a GPU: timed and checked
    CHECK(r.m.p50_us > 0);
    CHECK(r.m.err.max_abs < 1e-2);
    CHECK(r.detail.find("PyTorch") != std::string::npos);
  } else {
    CHECK(r.status == "skipped");
    const bool why = r.reason.find("PyTorch not installed") != std::string::npos ||
                     r.reason.find("PyTorch sees no CUDA device") != std::string::npos;
    CHECK(why);
  }
}
