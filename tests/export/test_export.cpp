// Export: the header compiles on its own (g++, and nvcc where installed), its
// helpers agree with the tuner's own evaluation, and the JSON carries the same.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/spec.hpp"
#include "export/export.hpp"
#include "tests/catch.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;
namespace fs = std::filesystem;

namespace {

using evotune_test::TempDir;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command; returns its exit status, output in `out`.
int run_cmd(const std::string& cmd, const TempDir& dir, std::string& out) {
  const std::string log = dir.file("cmd.log");
  int rc = std::system((cmd + " > " + log + " 2>&1").c_str());
  out = slurp(log);
  return rc;
}

bool have_tool(const std::string& name) {
  return std::system(("command -v " + name + " > /dev/null 2>&1").c_str()) == 0;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A GEMM-like spec that exercises the translation: [lets] chains, dtype_bytes,
// num_sms, a double literal that C++ must not divide as integers, sqrt (not
// translatable), an optional dimension, a cluster and [defines].
const char* const kSpec = R"toml(
[kernel]
name = "gemm-test"
description = "C = A*B for the export tests"
source = "kernel.cu"
entry = "gemm_kernel"
min_cc = 80

[problem]
dims = ["M", "N", "K"]
defaults = { SPLIT = 1 }
dtypes = ["fp16", "bf16"]

[defines]
KDIM = "K"
HALF_K = "K / 2.0"

[[param]]
name = "BLOCK_M"
values = [64, 128, 256]
default = 128
help = "rows of C per block"

[[param]]
name = "BLOCK_N"
values = [32, 64, 128]
default = 64

[[param]]
name = "WARPS"
values = [2, 4, 8]
default = 4

[[param]]
name = "STAGES"
values = [2, 3, 4]
default = 2

[[param]]
name = "SPLIT_K"
values = [1, 2, 4]
default = 1

[lets]
threads = "32*WARPS"
tile_bytes = "(BLOCK_M + BLOCK_N) * 32 * dtype_bytes"
smem_bytes = "STAGES * tile_bytes"
tiles = "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)"
waves = "cdiv(tiles, num_sms)"
root = "sqrt(M)"

[space]
constraints = ["BLOCK_M >= 16*WARPS", "smem_bytes <= 227*1024"]

[launch]
grid = ["cdiv(N, BLOCK_N)", "min(cdiv(M, BLOCK_M), 65535)", "SPLIT_K * SPLIT"]
block = ["threads"]
smem = "smem_bytes"
cluster = ["SPLIT_K > 1 ? 2 : 1"]

[[arg]]
name = "A"
type = "elem*"
count = "M*K"

[[arg]]
name = "B"
type = "elem*"
count = "K*N"

[[arg]]
name = "C"
type = "elem*"
count = "M*N"
role = "out"

[[arg]]
name = "workspace"
type = "f32*"
count = "SPLIT_K == 1 ? 0 : M*N*SPLIT_K"
role = "scratch"

[[arg]]
name = "counters"
type = "u32*"
count = "waves * num_sms + max(M, N, 7)"
role = "scratch"

[[arg]]
name = "halves"
type = "f32*"
count = "int(K / 2.0 * 3)"
role = "scratch"

[[arg]]
name = "debug"
type = "f32*"
count = "int(root)"
role = "scratch"

[[arg]]
name = "M"
type = "i32"
value = "M"

[[arg]]
name = "alpha"
type = "f32"
value = "1.0/sqrt(K)"

[reference]
source = "reference.cu"
entry = "gemm_reference"
grid = ["cdiv(M*N, 256)"]
block = ["256"]
args = ["A", "B", "C", "M"]

[tolerance]
max_abs = "0.05"
)toml";

KernelSpec test_spec() {
  return parse_spec(kSpec, "test/gemm/spec.toml", [](const std::string& f) { return "// " + f + "\n"; });
}

Measurement meas(int problem, double p50) {
  Measurement m;
  m.problem = problem;
  m.p50_us = p50;
  m.p90_us = p50 * 1.05;
  m.min_us = p50 * 0.95;
  m.mean_us = p50;
  m.cv = 0.01;
  m.samples = 100;
  m.err.max_abs = 0.0123;
  m.err.mean_abs = 0.000456;
  return m;
}

Trial trial(int64_t id, const std::string& config, const std::vector<double>& p50s) {
  Trial t;
  t.id = id;
  t.run_id = 5;
  t.seq = static_cast<int>(id);
  t.config = Config::parse(config);
  t.status = TrialStatus::ok;
  for (size_t i = 0; i < p50s.size(); ++i) t.per_problem.push_back(meas(static_cast<int>(i), p50s[i]));
  std::vector<double> xs = p50s;
  t.fitness = geomean(xs);
  t.res = {168, 0, 49152, 0, 0, 0};
  return t;
}

RunInfo run_of(const KernelSpec& spec, const std::vector<std::string>& shapes, Dtype dtype = Dtype::fp16) {
  RunInfo r;
  r.id = 5;
  r.kernel = spec.name;
  r.spec_origin = spec.origin;
  r.spec_hash = spec.content_hash();
  r.spec_text = spec.spec_text;
  for (const auto& s : shapes) r.problems.push_back(spec.parse_problem(s, dtype));
  r.dtype = to_string(dtype);
  r.strategy = "evo";
  r.seed = 42;
  r.budget = 128;
  r.elites_k = 6;
  r.device = {"NVIDIA H200", "GPU-abcd", 90, 132, 13000, "580.159.04", 12080, "13.0", "sm_90a"};
  r.evotune_version = "0.1.0";
  r.status = "done";
  r.created_at = "2026-11-21T10:00:00Z";
  r.finished_at = "2026-11-21T10:30:00Z";
  r.stats.trials = 128;
  return r;
}

// g++ -fsyntax-only on the header alone, warnings as errors.
void check_gxx_standalone(const std::string& header, const TempDir& dir) {
  const std::string h = dir.file("tuned.h");
  write_file(h, header);
  std::string out;
  int rc = run_cmd("g++ -std=c++17 -fsyntax-only -Wall -Wextra -Wpedantic -Wshadow -Werror -x c++ " + h, dir, out);
  INFO(header);
  INFO(out);
  REQUIRE(rc == 0);
}

void check_nvcc_standalone(const std::string& header, const TempDir& dir) {
  if (!have_tool("nvcc")) {
    WARN("nvcc is not on PATH: the nvcc compile of the exported header is skipped");
    return;
  }
  const std::string h = dir.file("tuned_nvcc.h");
  write_file(h, header);
  std::string out;
  int rc = run_cmd("nvcc -std=c++17 -c -x cu " + h + " -o " + dir.file("tuned_nvcc.o"), dir, out);
  INFO(header);
  INFO(out);
  REQUIRE(rc == 0);
}

}  // namespace

TEST_CASE("the header of a single-problem run is complete and compiles alone with g++", "[export]") {
  TempDir dir;
  KernelSpec spec = test_spec();
  RunInfo run = run_of(spec, {"M=4096,N=2048,K=1001"});
  Trial winner = trial(57, "BLOCK_M=256,BLOCK_N=128,WARPS=8,STAGES=3,SPLIT_K=2", {61.25});
  winner.sanitized = "memcheck,racecheck";
  Trial def = trial(1, "BLOCK_M=128,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_K=1", {122.5});
  REQUIRE_FALSE(spec.invalid_reason(winner.config, run.problems, DeviceTraits::for_arch(90)));
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &winner;
  in.ok_trials = {def, winner};
  in.default_trial = def;
  std::string h = export_header(in);
  INFO(h);

  // Provenance.
  for (const char* s :
       {"gemm-test", "run 5", "NVIDIA H200", "cc 9.0", "sm_90a", "580.159.04", "runtime 12.8", "NVRTC 13.0", "API 13.0",
        "strategy evo, seed 42, budget 128", "M=4096,N=2048,K=1001,SPLIT=1", "fp16", "p50 61.250 us",
        "max abs err 0.0123", "mean abs err 0.000456", "2.00x over the default", "2026-11-21T10:30:00Z", "trial 57",
        "compute-sanitizer memcheck,racecheck found nothing"})
    CHECK(contains(h, s));
  // Include guard, macros and constexpr values.
  CHECK(contains(h, "#ifndef EVOTUNE_TUNED_GEMM_TEST_H_"));
  CHECK(contains(h, "#define BLOCK_M 256  // rows of C per block\n"));
  CHECK(contains(h, "#define SPLIT_K 2\n"));
  CHECK(contains(h, "#define EVOTUNE_DTYPE_FP16 1\n"));
  CHECK(contains(h, "#define KDIM 1001\n"));
  CHECK(contains(h, "#define HALF_K 500.5\n"));
  CHECK(contains(h, "namespace gemm_test {"));
  CHECK(contains(h, "constexpr int kBLOCK_M = 256;"));
  CHECK(contains(h, "constexpr double kHALF_K = 500.5"));
  // Helpers: num_sms becomes a parameter; sqrt is skipped with a reason.
  CHECK(contains(h, "grid_x(long long /*M*/, long long N, long long /*K*/, long long /*SPLIT*/)"));
  CHECK(
      contains(h, "counters_count(long long M, long long N, long long /*K*/, long long /*SPLIT*/, long long num_sms)"));
  CHECK(contains(h, "debug_count() not generated: uses sqrt()"));
  CHECK(contains(h, "cluster_x("));
  CHECK(contains(h, "static_assert(halves_count(4096LL, 2048LL, 1001LL, 1LL) == 1501LL"));
  CHECK_FALSE(contains(h, "kTunedProblems"));  // one problem: no lookup table

  check_gxx_standalone(h, dir);

  // The helpers agree with the tuner on a problem the run never saw.
  Problem other = spec.parse_problem("M=1000,N=777,K=333,SPLIT=3", Dtype::fp16);
  DeviceTraits dev{90, 132};
  LaunchDims want = spec.launch_dims(winner.config, other, dev);
  Scope scope(spec, &other, &winner.config, dev);
  write_file(dir.file("tuned.h"), h);
  write_file(
      dir.file("main.cpp"),
      "#include \"tuned.h\"\n#include <cstdio>\n"
      "namespace t = evotune_tuned::gemm_test;\n"
      "static_assert(BLOCK_M == 256 && t::kBLOCK_M == 256, \"macro and constant\");\n"
      "int main() {\n"
      "  std::printf(\"%lld %lld %lld %lld %lld %lld %lld %lld\\n\", t::grid_x(1000, 777, 333, 3),\n"
      "              t::grid_y(1000, 777, 333, 3), t::grid_z(1000, 777, 333, 3), t::block_x(1000, 777, 333, 3),\n"
      "              t::dynamic_smem_bytes(1000, 777, 333, 3), t::cluster_x(1000, 777, 333, 3),\n"
      "              t::counters_bytes(1000, 777, 333, 3, 132), t::halves_count(1000, 777, 333, 3));\n"
      "}\n");
  std::string out;
  int rc = run_cmd("g++ -std=c++17 -Wall -Wextra -Werror -o " + dir.file("main") + " " + dir.file("main.cpp") + " && " +
                       dir.file("main"),
                   dir, out);
  INFO(out);
  REQUIRE(rc == 0);
  std::ostringstream expect;
  const ArgSpec* counters = nullptr;
  const ArgSpec* halves = nullptr;
  for (const auto& a : spec.args) {
    if (a.name == "counters") counters = &a;
    if (a.name == "halves") halves = &a;
  }
  expect << want.grid[0] << " " << want.grid[1] << " " << want.grid[2] << " " << want.block[0] << " " << want.smem
         << " " << want.cluster[0] << " " << scope.eval(counters->count).as_int() * 4 << " "
         << scope.eval(halves->count).as_int() << "\n";
  CHECK(out == expect.str());
}

TEST_CASE("a multi-problem header carries a constexpr lookup from problem to its best config", "[export]") {
  TempDir dir;
  KernelSpec spec = test_spec();
  RunInfo run = run_of(spec, {"4096,4096,4096", "128,4096,512", "M=4096,N=4096,K=4096,SPLIT=2"}, Dtype::bf16);
  // The winner is best on average; trial 12 wins the small problem alone.
  Trial winner = trial(40, "BLOCK_M=256,BLOCK_N=128,WARPS=8,STAGES=3,SPLIT_K=1", {100, 30, 110});
  Trial small = trial(12, "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_K=4", {300, 10, 330});
  Trial other = trial(20, "BLOCK_M=128,BLOCK_N=128,WARPS=4,STAGES=4,SPLIT_K=2", {120, 40, 105});
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &winner;
  in.ok_trials = {small, other, winner};
  std::string h = export_header(in);
  INFO(h);
  CHECK(contains(h, "#define EVOTUNE_DTYPE_BF16 1"));
  CHECK(contains(h, "const long long dtype_bytes = 2;"));
  CHECK(contains(h, "struct TunedProblem"));
  CHECK(contains(h, "constexpr int kNumTunedProblems = 3;"));
  CHECK_FALSE(contains(h, "over the default"));  // no default trial measured

  check_gxx_standalone(h, dir);

  write_file(dir.file("tuned.h"), h);
  write_file(
      dir.file("main.cpp"),
      "#include \"tuned.h\"\n#include <cstdio>\n"
      "namespace t = evotune_tuned::gemm_test;\n"
      "static_assert(t::lookup(128, 4096, 512, 1) == 1, \"small problem\");\n"
      "static_assert(t::kTunedProblems[1].kBLOCK_M == 64 && t::kTunedProblems[1].kSPLIT_K == 4, \"its config\");\n"
      "static_assert(t::kTunedProblems[0].kBLOCK_M == 256, \"winner on the first\");\n"
      "static_assert(t::kTunedProblems[2].trial_id == 20 && t::kTunedProblems[2].SPLIT == 2, \"third\");\n"
      "static_assert(t::lookup(1, 2, 3, 1) == -1, \"unknown problem\");\n"
      "int main() { std::printf(\"%d %g\\n\", t::lookup(4096, 4096, 4096, 2), t::kTunedProblems[1].p50_us); }\n");
  std::string out;
  int rc = run_cmd("g++ -std=c++17 -Wall -Wextra -Werror -o " + dir.file("main") + " " + dir.file("main.cpp") + " && " +
                       dir.file("main"),
                   dir, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out == "2 10\n");
}

TEST_CASE("the exported header compiles with nvcc", "[export]") {
  TempDir dir;
  KernelSpec spec = test_spec();
  RunInfo run = run_of(spec, {"4096,4096,4096", "128,4096,512"});
  Trial winner = trial(40, "BLOCK_M=256,BLOCK_N=128,WARPS=8,STAGES=3,SPLIT_K=1", {100, 30});
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &winner;
  in.ok_trials = {winner};
  std::string h = export_header(in);
  check_nvcc_standalone(h, dir);
  if (!have_tool("nvcc")) return;
  // The constants and helpers are usable in device code too.
  write_file(dir.file("tuned.h"), h);
  write_file(dir.file("use.cu"),
             "#include \"tuned.h\"\n"
             "namespace t = evotune_tuned::gemm_test;\n"
             "__global__ void k(long long* out) {\n"
             "  __shared__ float tile[t::kBLOCK_M];\n"
             "  tile[threadIdx.x % BLOCK_M] = 1.0f;\n"
             "  out[0] = t::grid_x(out[1], out[2], out[3], 1) + static_cast<long long>(tile[0]);\n"
             "}\n");
  std::string out;
  int rc = run_cmd("nvcc -std=c++17 -c " + dir.file("use.cu") + " -o " + dir.file("use.o"), dir, out);
  INFO(out);
  CHECK(rc == 0);
}

TEST_CASE("export_json carries the winner, geometry and per-problem bests", "[export]") {
  KernelSpec spec = test_spec();
  RunInfo run = run_of(spec, {"4096,4096,4096", "128,4096,512"});
  Trial winner = trial(40, "BLOCK_M=256,BLOCK_N=128,WARPS=8,STAGES=3,SPLIT_K=1", {100, 30});
  Trial small = trial(12, "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_K=4", {300, 10});
  Trial def = trial(1, "BLOCK_M=128,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_K=1", {200, 90});
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &winner;
  in.ok_trials = {def, small, winner};
  in.default_trial = def;
  nlohmann::json j = nlohmann::json::parse(export_json(in));
  CHECK(j["format"] == "evotune-export");
  CHECK(j["kernel"]["name"] == "gemm-test");
  CHECK(j["kernel"]["entry"] == "gemm_kernel");
  CHECK(j["run"]["id"] == 5);
  CHECK(j["run"]["seed"] == 42);
  CHECK(j["device"]["name"] == "NVIDIA H200");
  CHECK(j["winner"]["trial_id"] == 40);
  CHECK(j["winner"]["config"]["BLOCK_M"] == 256);
  CHECK(j["winner"]["config_str"] == winner.config.canonical());
  CHECK(j["macros"]["BLOCK_M"] == 256);
  CHECK(j["macros"]["EVOTUNE_DTYPE_FP16"] == 1);
  CHECK(j["macros"]["KDIM"] == 4096);
  CHECK(j["macros"]["HALF_K"] == 2048.0);
  CHECK(j["launch_exprs"]["grid"][0] == "cdiv(N, BLOCK_N)");
  CHECK(j["launch_exprs"]["block"][1] == "1");
  REQUIRE(j["problems"].size() == 2);
  const auto& p0 = j["problems"][0];
  CHECK(p0["dims"]["M"] == 4096);
  CHECK(p0["dims"]["SPLIT"] == 1);
  CHECK(p0["winner"]["p50_us"] == 100.0);
  CHECK(p0["default_p50_us"] == 200.0);
  CHECK(p0["speedup_over_default"] == 2.0);
  CHECK(p0["launch"]["grid"] == nlohmann::json({32, 16, 1}));
  CHECK(p0["launch"]["block"][0] == 256);
  CHECK(p0["defines"]["KDIM"] == 4096);
  CHECK(p0["defines"]["HALF_K"] == 2048.0);
  bool found_c = false;
  for (const auto& b : p0["buffers"]) {
    if (b["name"] == "C") {
      found_c = true;
      CHECK(b["count"] == 4096 * 4096);
      CHECK(b["bytes"] == 4096LL * 4096 * 2);
    }
  }
  CHECK(found_c);
  CHECK(p0["best"]["trial_id"] == 40);
  CHECK(j["problems"][1]["best"]["trial_id"] == 12);
  CHECK(j["problems"][1]["best"]["config"]["SPLIT_K"] == 4);
  CHECK(j["default"]["trial_id"] == 1);
  CHECK(j["speedup_over_default"].get<double>() == Approx(def.fitness / winner.fitness));
  auto params = j["params"];
  REQUIRE(params.size() == 5);
  CHECK(params[0]["name"] == "BLOCK_M");
  CHECK(params[0]["value"] == 256);
  CHECK(params[0]["default"] == 128);
}

TEST_CASE("export refuses a run without a correct winner", "[export]") {
  KernelSpec spec = test_spec();
  RunInfo run = run_of(spec, {"4096,4096,4096"});
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  CHECK_THROWS_AS(export_header(in), UsageError);
  CHECK_THROWS_AS(export_json(in), UsageError);
  Trial bad = trial(3, "BLOCK_M=64,BLOCK_N=64,WARPS=4,STAGES=2,SPLIT_K=1", {1});
  bad.status = TrialStatus::incorrect;
  in.winner = &bad;
  CHECK_THROWS_AS(export_header(in), UsageError);
}

TEST_CASE("a [defines] macro named like a dimension does not break the header", "[export]") {
  TempDir dir;
  std::string text = kSpec;
  text.replace(text.find("KDIM = \"K\""), 10, "K = \"K\"");
  KernelSpec spec = parse_spec(text, "test/spec.toml", [](const std::string&) { return std::string("//\n"); });
  RunInfo run = run_of(spec, {"4096,4096,4096", "128,4096,512"});
  Trial winner = trial(40, "BLOCK_M=256,BLOCK_N=128,WARPS=8,STAGES=3,SPLIT_K=1", {100, 30});
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &winner;
  in.ok_trials = {winner};
  std::string h = export_header(in);
  INFO(h);
  CHECK(contains(h, "#define K 4096"));
  CHECK(contains(h, "halves_count() not generated: 'K' is also the name of a macro"));
  CHECK(contains(h, "long long dim_K;"));
  check_gxx_standalone(h, dir);
}

#ifdef EVOTUNE_SOURCE_DIR
TEST_CASE("the built-in sdpa_fwd spec exports a header that compiles", "[export]") {
  const std::string path = std::string(EVOTUNE_SOURCE_DIR) + "/kernel_templates/sdpa_fwd/spec.toml";
  if (!fs::exists(path)) {
    WARN("no " + path + ": skipped");
    return;
  }
  TempDir dir;
  KernelSpec spec = load_spec_file(path);
  RunInfo run = run_of(spec, {"2,8,512,64", "B=1,H=16,S=4096,D=64,CAUSAL=1"});
  Trial winner = trial(9, spec.default_config().canonical(), {20, 900});
  auto invalid = spec.invalid_reason(winner.config, run.problems, DeviceTraits::for_arch(90));
  INFO(invalid.value_or(""));
  REQUIRE_FALSE(invalid);
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &winner;
  in.ok_trials = {winner};
  in.default_trial = winner;
  std::string h = export_header(in);
  INFO(h);
  CHECK(contains(h, "#define HEAD_DIM 64"));
  CHECK(contains(h, "(problem 1 needs IS_CAUSAL 1)"));
  CHECK(contains(h, "grid_x("));
  check_gxx_standalone(h, dir);
  check_nvcc_standalone(h, dir);
  CHECK_NOTHROW(nlohmann::json::parse(export_json(in)));
}
#endif
