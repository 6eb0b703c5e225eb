// The evotune binary as a user meets it: help, listing, and clear errors with
// the documented exit codes for bad input — with nothing lost or written that
// is not true. Runs the real binary; needs no GPU.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "engine/device_info.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out;
};

Result run_cli(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " " + evotune_test::binary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  Result r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

using evotune_test::TempDir;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool has_gpu() {
  return !evotune::query_devices().devices.empty();
}

// A recorded sweep: `run --replay` evaluates from it without a GPU.
std::string sdpa_dataset() {
  return " --replay " + evotune_test::source_dir() + "/tests/data/sdpa_fwd_h200.json";
}

}  // namespace

TEST_CASE("--help teaches the subcommands", "[cli]") {
  Result r = run_cli("--help");
  CHECK(r.code == 0);
  for (const char* sub : {"run", "kernels", "runs", "top", "trials", "export", "report"})
    CHECK(r.out.find(sub) != std::string::npos);
  CHECK(r.out.find("worker") == std::string::npos);  // internal
  Result run = run_cli("run --help");
  CHECK(run.code == 0);
  CHECK(run.out.find("--compile-only") != std::string::npos);
  CHECK(run.out.find("Examples") != std::string::npos);
  // Its options in groups, each under its heading, in the order a run needs them.
  size_t at = 0;
  for (const char* group : {"What to tune:", "The search:", "Where it runs:", "Timing:", "Gates, output"}) {
    const size_t next = run.out.find(group, at);
    CHECK(next != std::string::npos);
    if (next != std::string::npos) at = next;
  }
  CHECK(run.out.find("--sustain-ms", run.out.find("Timing:")) != std::string::npos);
  CHECK(run_cli("").code == 2);  // a subcommand is required
  CHECK(run_cli("frobnicate").code == 2);
}

TEST_CASE("kernels lists the built-ins and describes one", "[cli]") {
  Result r = run_cli("kernels");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("gemm") != std::string::npos);
  CHECK(r.out.find("sdpa_fwd") != std::string::npos);
  Result j = run_cli("kernels --json");
  REQUIRE(j.code == 0);
  auto list = nlohmann::json::parse(j.out);
  REQUIRE(list.size() >= 2);
  for (const auto& k : list) CHECK(k.at("valid_configs").get<long long>() >= 1000);
  Result d = run_cli("kernels sdpa_fwd");
  REQUIRE(d.code == 0);
  for (const char* what : {"BLOCK_M", "PRODUCER_WARPS", "SPLIT_KV", "constraints", "tolerances", "resource gates"})
    CHECK(d.out.find(what) != std::string::npos);
  CHECK(d.out.find("headers      evotune_ptx.cuh") != std::string::npos);  // what the kernel is compiled with
  Result bad = run_cli("kernels nope");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("unknown kernel 'nope'") != std::string::npos);
}

TEST_CASE("bad input to run: a clear message, exit code 2, nothing written", "[cli]") {
  TempDir t;
  std::string db = " --db " + t.db();
  struct Case {
    std::string args, message;
  } cases[] = {
      {"run --kernel nope --shape 1,2", "unknown kernel 'nope'"},
      {"run --kernel gemm --shape 4096,x,4096 --compile-only --arch sm_90a", "malformed shape"},
      {"run --kernel gemm --shape 4096,4096 --compile-only --arch sm_90a", "malformed shape"},
      {"run --kernel gemm --shape 0,4096,4096 --compile-only --arch sm_90a", "must be positive"},
      {"run --kernel gemm --problem M=1,N=2,Q=3 --compile-only --arch sm_90a", "no dimension Q"},
      {"run --kernel gemm --shape 64,64,64 --dtype fp8 --compile-only --arch sm_90a", "unknown dtype 'fp8'"},
      {"run --kernel gemm --shape 64,64,64 --budget 0 --compile-only --arch sm_90a", "budget"},
      {"run --kernel sdpa_fwd --shape 1,1,64,96 --compile-only --arch sm_90a", "does not accept"},
      {"run --kernel gemm --shape 64,64,64 --compile-only", ""},  // exit 2 without a GPU, fine with one
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_9x", "malformed architecture"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --config BLOCK_M", "NAME=VALUE"},
      {"top abc", "not a run id"},
      // Integers are decimal: no octal, hex or exponent, no negative unsigned value.
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --budget 0x10", "'0x10' is not a decimal"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --budget 1e3", "'1e3' is not a decimal"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --elites 12abc", "'12abc' is not a decimal"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --seed -1", "--seed: '-1' is negative"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a -j -1", "--compile-threads"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a -j 0", "--compile-threads"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --window -3", "--window"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --compile-timeout -5", "--compile-timeout"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --timeout -1", "--timeout"},
      {"run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --device -2", "--device"},
      {"run" + sdpa_dataset() + " --dtype bf16", "holds fp16"},
      {"run" + sdpa_dataset() + " --gpus 0", "--gpus 0"},
      {"run" + sdpa_dataset() + " --gpus all", "--gpus all"},
      {"run --resume 1", "no run"},
      {"top 1 -k -2", "-k"},
  };
  for (const auto& c : cases) {
    if (c.message.empty() && has_gpu()) continue;
    Result r = run_cli(c.args + db);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == 2);
    if (!c.message.empty()) CHECK(r.out.find(c.message) != std::string::npos);
    CHECK_FALSE(fs::exists(t.db()));
  }
}

TEST_CASE("a spec file with a typo is a spec error naming the place", "[cli]") {
  TempDir t;
  fs::path spec = t.path / "spec.toml";
  std::ofstream(spec) << "[kernel]\nname = \"x\"\nsourc = \"k.cu\"\n";
  Result r = run_cli("kernels " + spec.string());
  CHECK(r.code == 2);
  CHECK(r.out.find("unknown key 'sourc'") != std::string::npos);
}

TEST_CASE("database errors: unwritable path, corrupt file, missing file", "[cli]") {
  TempDir t;
  // A directory that does not exist.
  Result r = run_cli("run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --budget 1 --db " +
                     (t.path / "no/such/dir/x.db").string());
  CHECK(r.code == 3);
  CHECK(r.out.find("no/such/dir") != std::string::npos);
  // A file that is not a database is refused and left exactly as it was.
  fs::path junk = t.path / "junk.db";
  std::string content = "these are my notes, not a database\n";
  std::ofstream(junk) << content;
  for (const std::string& cmd :
       {std::string("runs"),
        std::string("run --kernel gemm --shape 64,64,64 --compile-only --arch sm_90a --budget 1")}) {
    Result j = run_cli(cmd + " --db " + junk.string());
    INFO(cmd << "\n" << j.out);
    CHECK(j.code == 3);
    CHECK(j.out.find("not an evotune database") != std::string::npos);
    CHECK(slurp(junk) == content);
  }
  // EVOTUNE_DB names the database too.
  Result e = run_cli("runs", "EVOTUNE_DB=" + junk.string());
  CHECK(e.code == 3);
}

TEST_CASE("without a GPU, run says so and writes nothing", "[cli]") {
  if (has_gpu()) {
    WARN("skipped: this machine has a GPU");
    return;
  }
  TempDir t;
  Result r = run_cli("run --kernel gemm --shape 256,256,256 --budget 4 --db " + t.db());
  CHECK(r.code == 4);
  CHECK(r.out.find("no CUDA device") != std::string::npos);
  CHECK(r.out.find("--compile-only") != std::string::npos);  // tells what does work
  CHECK_FALSE(fs::exists(t.db()));
}

TEST_CASE("a --config given twice, or already in a resumed run, is evaluated once", "[cli]") {
  TempDir t;
  std::string db = " --db " + t.db();
  std::string env = "EVOTUNE_CACHE_DIR=" + (t.path / "cache").string();
  auto distinct_trials = [&] {
    Result trials = run_cli("trials 1 --json" + db);
    REQUIRE(trials.code == 0);
    auto tj = nlohmann::json::parse(trials.out);
    std::set<std::string> configs;
    for (const auto& x : tj) configs.insert(x.at("config").dump());
    CHECK(configs.size() == tj.size());
    return tj.size();
  };
  // BLOCK_M=64 and BLOCK_M=64,STAGES=3 are one config (STAGES defaults to 3).
  Result r = run_cli(
      "run --kernel gemm --shape 1000,777,520 --dtype bf16 --compile-only --arch sm_90a --budget 3"
      " --config BLOCK_M=64 --config BLOCK_M=64,STAGES=3 --config STAGES=2" +
          db,
      env);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("already in this run") != std::string::npos);
  CHECK(distinct_trials() == 3);
  // Resumed with a --config the run already has and a new one.
  Result more = run_cli("run --resume 1 --arch sm_90a --budget 5 --config STAGES=2 --config STAGES=4" + db, env);
  INFO(more.out);
  REQUIRE(more.code == 0);
  CHECK(more.out.find("already in this run") != std::string::npos);
  CHECK(distinct_trials() == 5);
}

TEST_CASE("compile-only runs work without a GPU and are queryable", "[cli]") {
  TempDir t;
  std::string db = " --db " + t.db();
  Result r = run_cli(
      "run --kernel gemm --shape 1000,777,520 --dtype bf16 --compile-only --arch sm_90a --budget 3 --seed 5" + db,
      "EVOTUNE_CACHE_DIR=" + (t.path / "cache").string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("[  3/3]") != std::string::npos);
  CHECK(r.out.find("regs") != std::string::npos);
  Result runs = run_cli("runs --json" + db);
  REQUIRE(runs.code == 0);
  auto j = nlohmann::json::parse(runs.out);
  REQUIRE(j.size() == 1);
  CHECK(j[0].at("compile_only").get<bool>());
  CHECK(j[0].at("status") == "done");
  Result trials = run_cli("trials 1 --json" + db);
  REQUIRE(trials.code == 0);
  auto tj = nlohmann::json::parse(trials.out);
  REQUIRE(tj.size() == 3);
  for (const auto& x : tj) {
    CHECK(x.at("resources").at("registers").get<int>() > 0);
    std::string st = x.at("status");
    CHECK((st == "ok" || st == "resource_rejected"));
  }
  Result exp = run_cli("export 1" + db);
  CHECK(exp.code == 2);
  CHECK(exp.out.find("no measured winner") != std::string::npos);
  CHECK(run_cli("top last" + db).code == 0);
  CHECK(run_cli("trials 2" + db).code == 2);  // no such run
  Result rep = run_cli("report 1" + db);
  CHECK(rep.code == 0);
  CHECK(rep.out.find("# evotune report") != std::string::npos);
}

TEST_CASE("8-bit float buffers: a kernel and reference on e4m3 and e5m2 compile for sm_80 and sm_90a", "[cli][fp8]") {
  TempDir t;
  const std::string spec = evotune_test::source_dir() + "/tests/data/fp8/spec.toml";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Result r = run_cli(std::string("run -q --kernel ") + spec + " --problem N=1000 --compile-only --arch " + arch +
                           " --budget 2 --db " + t.db(),
                       "EVOTUNE_CACHE_DIR=" + (t.path / "cache").string());
    INFO(arch << ": " << r.out);
    CHECK(r.code == 0);
    CHECK(r.out.find("(ok 2)") != std::string::npos);
  }
  Result k = run_cli("kernels " + spec + " --json");
  REQUIRE(k.code == 0);
  CHECK(k.out.find("e4m3") != std::string::npos);
}

TEST_CASE("compile-only compiles the reference and names a missing entry point", "[cli]") {
  TempDir t;
  const fs::path spec_dir = t.path / "k";
  fs::copy(fs::path(evotune_test::source_dir()) / "tests/data/faulty", spec_dir);
  const std::string env = "EVOTUNE_CACHE_DIR=" + (t.path / "cache").string();
  const std::string args = "run --kernel " + (spec_dir / "spec.toml").string() +
                           " --compile-only --arch sm_90 --budget 2 --config MODE=0,BLOCK=128 --db " + t.db();

  // A reference that does not compile is the spec's fault: exit 2, the
  // compiler's message, and no run left behind.
  std::ofstream(spec_dir / "reference.cu") << "extern \"C\" __global__ void faulty_reference(float* y) { y[0] = ; }\n";
  Result bad_ref = run_cli(args, env);
  INFO(bad_ref.out);
  CHECK(bad_ref.code == 2);
  CHECK(bad_ref.out.find("the reference of kernel faulty does not compile") != std::string::npos);
  CHECK(bad_ref.out.find("reference.cu(1): error") != std::string::npos);
  CHECK(run_cli("runs --json --db " + t.db()).out.find("\"id\"") == std::string::npos);

  // An entry point the source does not define: the trial's one-line summary says so.
  fs::copy_file(fs::path(evotune_test::source_dir()) / "tests/data/faulty/reference.cu", spec_dir / "reference.cu",
                fs::copy_options::overwrite_existing);
  std::string spec = slurp(spec_dir / "spec.toml");
  spec.replace(spec.find("entry = \"faulty\""), 16, "entry = \"faulty_kernel\"");
  std::ofstream(spec_dir / "spec.toml") << spec;
  Result bad_entry = run_cli(args, env);
  INFO(bad_entry.out);
  CHECK(bad_entry.code == 0);
  CHECK(bad_entry.out.find("compile_error     error: entry point 'faulty_kernel' not found") != std::string::npos);
}

TEST_CASE("integer options are decimal: a leading zero is not octal", "[cli]") {
  TempDir t;
  std::string db = " --db " + t.db();
  Result r =
      run_cli("run -q" + sdpa_dataset() + " --budget 010 --seed 010 --elites 08 -j 09 --window 010 --retime -0" + db);
  INFO(r.out);
  REQUIRE(r.code == 0);
  Result runs = run_cli("runs --json" + db);
  REQUIRE(runs.code == 0);
  auto j = nlohmann::json::parse(runs.out).at(0);
  CHECK(j.at("budget") == 10);
  CHECK(j.at("seed") == 10);
  CHECK(j.at("elites_k") == 8);
  CHECK(j.at("stats").at("trials") == 10);
  CHECK(j.at("options").at("compile_threads") == 9);
  CHECK(j.at("options").at("retime_rounds") == 0);
}

TEST_CASE("an unknown command is named as such", "[cli]") {
  Result r = run_cli("bogus");
  CHECK(r.code == 2);
  CHECK(r.out.find("unknown command 'bogus'") != std::string::npos);
  CHECK(r.out.find("subcommand is required") == std::string::npos);
  Result none = run_cli("--db x.db");
  CHECK(none.code == 2);
  CHECK(none.out.find("subcommand is required") != std::string::npos);
}

TEST_CASE("reading commands in a fresh directory: no runs yet, nothing created", "[cli]") {
  TempDir t;
  std::string db = " --db " + t.db();
  Result runs = run_cli("runs" + db);
  CHECK(runs.code == 0);
  CHECK(runs.out.find("no runs yet") != std::string::npos);
  Result json = run_cli("runs --json" + db);
  CHECK(json.code == 0);
  CHECK(nlohmann::json::parse(json.out) == nlohmann::json::array());
  for (const char* cmd : {"top last", "top 1", "trials 1", "export last", "report 1"}) {
    Result r = run_cli(cmd + db);
    INFO(cmd << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("no runs yet") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(t.db()));
}

TEST_CASE("run -q hides the per-trial lines, not the summary", "[cli]") {
  TempDir t;
  Result r = run_cli("run -q" + sdpa_dataset() + " --budget 8 --db " + t.db());
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("[  1/8]") == std::string::npos);
  CHECK(r.out.find("run 1 done: 8 trials") != std::string::npos);
  CHECK(r.out.find("elite population") != std::string::npos);
}

TEST_CASE("a spec expression that cannot be evaluated, or a number that is not decimal, exits 2 naming it", "[cli]") {
  TempDir t;
  const fs::path example = fs::path(evotune_test::source_dir()) / "examples" / "transpose";
  // The example with its [space] constraints changed, in a folder of its own.
  auto variant = [&](const std::string& name, const std::string& constraints) {
    const fs::path dir = t.path / name;
    fs::create_directories(dir);
    for (const char* f : {"kernel.cu", "reference.cu"}) fs::copy_file(example / f, dir / f);
    std::string text = slurp(example / "spec.toml");
    const std::string from = "constraints = [\"BLOCK_ROWS <= TILE\"";
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    std::ofstream(dir / "spec.toml") << text.replace(at, from.size(), "constraints = [" + constraints);
    return (dir / "spec.toml").string();
  };
  struct Case {
    std::string name, constraints, says;
  };
  const std::vector<Case> cases = {
      {"min_div", "\"(-9223372036854775807 - 1) / -1 != 0\"", "integer overflow"},
      {"min_mod", "\"(-9223372036854775807 - 1) % -1 == 0\"", "integer overflow"},
      {"min_abs", "\"abs(-9223372036854775807 - 1) > 0\"", "integer overflow"},
      {"deep", "\"" + std::string(5000, '(') + "1" + std::string(5000, ')') + " > 0\"", "nested deeper than"},
      {"sqrt", "\"sqrt(1 - TILE) < 100\"", "sqrt() of a negative number (-31)"},
      {"pad", "\"N % (PAD * 64) == 0\"", "modulo by zero"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string spec = variant(c.name, c.constraints + ", \"BLOCK_ROWS <= TILE\"");
    const std::string db = " --db " + t.file(c.name + ".db");
    for (const std::string& args :
         {"kernels " + spec, "run --kernel " + spec + " --shape 64,64 --compile-only --arch sm_90a --budget 2" + db}) {
      Result r = run_cli(args);
      INFO(r.out);
      CHECK(r.code == 2);
      CHECK(r.out.find("spec error: " + spec + ": [space].constraints[0]") != std::string::npos);
      CHECK(r.out.find(c.says) != std::string::npos);
    }
    // Refused before a run was recorded (a spec refused at load opens no database).
    if (fs::exists(t.file(c.name + ".db"))) CHECK(nlohmann::json::parse(run_cli("runs --json" + db).out).empty());
  }
  // 0512 is not octal 330; 0x20 is not hex in a shape.
  for (const char* shape : {"64,0512", "0x20,64"}) {
    Result r = run_cli("run --kernel " + (example / "spec.toml").string() + " --shape " + shape +
                       " --compile-only --arch sm_90a --budget 1 --db " + t.db());
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(r.out.find("is not a decimal integer") != std::string::npos);
  }
}

TEST_CASE("a spec error found on a config mid-run stops the run, exit 2, recorded as failed", "[cli]") {
  TempDir t;
  const fs::path example = fs::path(evotune_test::source_dir()) / "examples" / "transpose";
  const fs::path dir = t.path / "k";
  fs::create_directories(dir);
  for (const char* f : {"kernel.cu", "reference.cu"}) fs::copy_file(example / f, dir / f);
  // A division by zero only for TILE=16 with PAD=0: two steps from the
  // default (TILE=32, PAD=1), beyond what problem binding evaluates.
  std::ofstream(dir / "spec.toml") << slurp(example / "spec.toml")
                                   << "\n[defines]\nSTEP = \"1024 / (TILE - 16 + 100 * PAD)\"\n";
  const std::string db = " --db " + t.db();
  Result r = run_cli("run --kernel " + (dir / "spec.toml").string() +
                         " --shape 64,64 --compile-only --arch sm_90 --strategy exhaustive --budget 40" + db,
                     "EVOTUNE_CACHE_DIR=" + (t.path / "cache").string());
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find("[defines].STEP") != std::string::npos);
  CHECK(r.out.find("division by zero") != std::string::npos);
  auto runs = nlohmann::json::parse(run_cli("runs --json" + db).out);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].at("status") == "failed");
  // What was recorded before it stays readable.
  Result trials = run_cli("trials 1 --json" + db);
  CHECK(trials.code == 0);
  CHECK(nlohmann::json::parse(trials.out).size() == runs[0].at("stats").at("trials").get<size_t>());
}
