// The profile step's reading of Nsight Compute: its raw CSV page as recorded
// on an H100 (tests/data/ncu), what limits a kernel, and ncu's failures.
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "engine/ncu.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"

using namespace evotune;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(evotune_test::source_dir() + "/tests/data/ncu/" + name, std::ios::binary);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("ncu's raw CSV: one profile per launch, numbers with thousands separators, stalls ranked", "[ncu]") {
  std::vector<KernelProfile> ps = parse_ncu_raw_csv(fixture("sdpa_fwd_sm90_h100_raw.csv"));
  REQUIRE(ps.size() == 1);
  const KernelProfile& p = ps[0];
  CHECK(p.kernel == "sdpa_fwd_sm90");
  CHECK(p.duration_us == Approx(7.52));  // "7,520" ns
  CHECK(p.grid == 6);
  CHECK(p.block == 384);
  CHECK(p.registers == 168);
  CHECK(p.smem_bytes == 83200);
  CHECK(p.tensor_pct == Approx(8.30));
  CHECK(p.occupancy_pct == Approx(14.23));
  CHECK(p.dram_pct == Approx(0.56));
  CHECK(p.l2_hit_pct == Approx(88.91));
  CHECK(p.sm_pct == Approx(0.41));
  CHECK(p.sm_clock_mhz == Approx(1949.996).epsilon(1e-4));
  REQUIRE(p.stalls.size() >= 3);
  CHECK(p.stalls[0] == std::make_pair(std::string("long_scoreboard"), 5.74));
  CHECK(p.stalls[1].first == "wait");
  CHECK(p.stalls[2].first == "barrier");
  for (const auto& [reason, v] : p.stalls) {
    CHECK(reason != "selected");  // issuing, not a stall
    CHECK(v > 0);
  }
  std::vector<KernelProfile> g = parse_ncu_raw_csv(fixture("gemm_sm90_h100_raw.csv"));
  REQUIRE(g.size() == 1);
  CHECK(g[0].kernel == "gemm_sm90");
  CHECK(g[0].registers == 166);
  CHECK(g[0].smem_bytes == 214272);
}

TEST_CASE("what limits a kernel follows its busiest unit, else its stalls", "[ncu]") {
  KernelProfile p = parse_ncu_raw_csv(fixture("sdpa_fwd_sm90_h100_raw.csv")).at(0);
  std::string l = limiter(p);
  CHECK(l.rfind("latency-bound", 0) == 0);
  CHECK(l.find("long_scoreboard 5.74") != std::string::npos);
  p.tensor_pct = 71;
  CHECK(limiter(p).rfind("tensor-bound (tensor pipe 71%", 0) == 0);
  p.tensor_pct = 20, p.dram_pct = 85;
  CHECK(limiter(p).rfind("memory-bound", 0) == 0);
  p.dram_pct = 10, p.sm_pct = 75;
  CHECK(limiter(p).rfind("compute-bound", 0) == 0);
}

TEST_CASE("ncu's failures are named, output without a profile is refused", "[ncu]") {
  CHECK(ncu_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission").find("permission") !=
        std::string::npos);
  CHECK(ncu_failure("==WARNING== No kernels were profiled.") == "ncu profiled no kernel");
  CHECK(ncu_failure(fixture("gemm_sm90_h100_raw.csv")).empty());
  CHECK_THROWS_AS(parse_ncu_raw_csv("==PROF== Disconnected from process 1\n"), EngineError);
  CHECK(ncu_metrics().find("gpu__time_duration.sum") != std::string::npos);
}
