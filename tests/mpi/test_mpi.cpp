// A run over the ranks of an MPI job, without a GPU: `mpirun --oversubscribe`
// starts ranks on this machine, each replaying a dataset as if it were a GPU
// host. The same trials as one process for a seed, each recorded once; a
// rank killed mid-run, then the run resumed on another number of ranks:
// nothing lost, nothing duplicated; ranks of different GPU models refused.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/device_info.hpp"
#include "store/store.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;
namespace fs = std::filesystem;

namespace {

using evotune_test::TempDir;

std::string quoted(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += " '" + a + "'";
  return out;
}

// Runs a shell command line; its exit code, its output (stdout and stderr).
int shell(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  if (output) *output = out;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Whether mpirun is installed (scripts/bootstrap.sh --mpi installs it with
// the library this build links); a test without it says so and passes.
bool have_mpirun() {
  if (shell("command -v mpirun", nullptr) == 0) return true;
  WARN("skipped: mpirun not found (scripts/bootstrap.sh --mpi installs openmpi-bin)");
  return false;
}

// mpirun of `ranks` evotune processes on this machine (as root too, as CI
// runs). Ranks on one host exchange large messages through shared memory
// without cross-memory attach, which containers often deny.
std::string mpirun(int ranks) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  return "mpirun --oversubscribe --bind-to none -np " + std::to_string(ranks) + " '" + evotune_test::binary() + "'";
}

int evotune_alone(const std::vector<std::string>& args, std::string* output = nullptr) {
  return shell("'" + evotune_test::binary() + "'" + quoted(args), output);
}

int evotune_on(int ranks, const std::vector<std::string>& args, std::string* output = nullptr) {
  return shell(mpirun(ranks) + quoted(args), output);
}

std::string dataset() {
  const std::string data = evotune_test::source_dir() + "/tests/data/gemm_h200.json";
  REQUIRE(fs::exists(data));
  return data;
}

// A run's trials as (seq, config, status, fitness) lines, in order.
std::vector<std::string> trials_of(const std::string& db, int64_t run) {
  Store s = Store::open(db, Store::Mode::read_only);
  std::vector<std::string> out;
  for (const Trial& t : s.trials(run))
    out.push_back(std::to_string(t.seq) + " " + t.config.canonical() + " " + to_string(t.status) + " " +
                  std::to_string(t.fitness));
  return out;
}

}  // namespace

TEST_CASE("on 2 and 3 ranks, a replay gives one process's trials for a seed, each recorded once with its host",
          "[mpi]") {
  if (!have_mpirun()) return;
  TempDir t;
  const std::string data = dataset();
  const std::vector<std::string> run = {"run",    "-q", "--replay", data, "--budget", "40",
                                        "--seed", "5",  "--gpus",   "3",  "-j",       "4"};
  const std::string one = (t.path / "one.db").string();
  std::string log;
  std::vector<std::string> args = {"--db", one};
  args.insert(args.end(), run.begin(), run.end());
  REQUIRE(evotune_alone(args, &log) == 0);
  const std::vector<std::string> expected = trials_of(one, 1);
  REQUIRE(expected.size() == 40);

  for (int ranks : {2, 3}) {
    const std::string db = (t.path / ("ranks" + std::to_string(ranks) + ".db")).string();
    args = {"--db", db};
    args.insert(args.end(), run.begin(), run.end());
    const int rc = evotune_on(ranks, args, &log);
    INFO(ranks << " ranks:\n" << log);
    REQUIRE(rc == 0);
    CHECK(trials_of(db, 1) == expected);
    Store s = Store::open(db, Store::Mode::read_only);
    REQUIRE(s.runs().size() == 1);
    CHECK(s.run(1)->status == "done");
    CHECK(nlohmann::json::parse(s.run(1)->options_json).at("ranks") == ranks);
    CHECK(log.find(", over " + std::to_string(ranks) + " MPI ranks, db ") != std::string::npos);
    std::set<std::string> configs;
    std::set<int> devices;
    for (const Trial& tr : s.trials(1)) {
      CHECK(configs.insert(tr.config.canonical()).second);
      if (tr.device < 0) continue;  // never reached a GPU
      CHECK(tr.host == host_name());
      devices.insert(tr.device);
    }
    // 3 simulated GPUs: all on rank 1 of 2; 2 and 1 on ranks 1 and 2 of 3.
    CHECK(devices == (ranks == 2 ? std::set<int>{0, 1, 2} : std::set<int>{0, 1}));
  }
}

TEST_CASE(
    "a rank killed mid-run ends the job with a message, and the run resumed on other ranks loses or repeats nothing",
    "[mpi][resume]") {
  if (!have_mpirun()) return;
  TempDir t;
  const std::string db = (t.path / "k.db").string();
  std::string log;
  // Rank 2 dies as it is sent its third candidate to run.
  setenv("EVOTUNE_TEST_RANK_EXIT", "2:3", 1);
  const int rc = shell(mpirun(3) + quoted({"--db", db, "run", "-q", "--replay", dataset(), "--budget", "40", "--seed",
                                           "3", "--gpus", "2", "-j", "4"}),
                       &log);
  unsetenv("EVOTUNE_TEST_RANK_EXIT");
  INFO(log);
  CHECK(rc != 0);
  CHECK(log.find("rank 2") != std::string::npos);  // mpirun names the rank that died
  CHECK(log.find("run 1 keeps every trial it recorded: `evotune run --resume 1` continues it") != std::string::npos);

  std::vector<Trial> before;
  {
    Store s = Store::open(db, Store::Mode::read_only);
    CHECK(s.run(1)->status == "running");
    before = s.trials(1);
  }
  REQUIRE(!before.empty());
  REQUIRE(before.size() < 40);

  // Resumed on two ranks: one evaluates.
  REQUIRE(evotune_on(2, {"--db", db, "run", "-q", "--resume", "1"}, &log) == 0);
  Store s = Store::open(db, Store::Mode::read_only);
  CHECK(s.run(1)->status == "done");
  const std::vector<Trial> after = s.trials(1);
  REQUIRE(after.size() == 40);
  std::set<std::string> configs;
  for (size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].seq == static_cast<int>(i + 1));
    CHECK(configs.insert(after[i].config.canonical()).second);
  }
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(after[i].id == before[i].id);
    CHECK(after[i].config == before[i].config);
  }
}

TEST_CASE("ranks of different GPU models are refused before a run is recorded", "[mpi]") {
  if (!have_mpirun()) return;
  TempDir t;
  // Rank 2 replays the same measurements as from an H100: another GPU model.
  nlohmann::json d = nlohmann::json::parse(std::ifstream(dataset()));
  d["device"]["name"] = "NVIDIA H100 80GB HBM3";
  const std::string h100 = (t.path / "h100.json").string();
  std::ofstream(h100) << d.dump();
  const std::string db = (t.path / "h.db").string();
  const std::vector<std::string> run = {"--db", db, "run", "-q", "--budget", "10", "--replay"};
  std::string log;
  const int rc = shell(mpirun(2) + quoted(run) + " '" + dataset() + "' : -np 1 '" + evotune_test::binary() + "'" +
                           quoted(run) + " '" + h100 + "'",
                       &log);
  INFO(log);
  CHECK(rc == 2);  // a usage error
  CHECK(log.find("rank 2 (host " + host_name() +
                 ") has NVIDIA H100 80GB HBM3 (compute capability 90), rank 0 has "
                 "NVIDIA H200 (compute capability 90): a run tunes for one GPU model") != std::string::npos);
  CHECK((!fs::exists(db) || Store::open(db, Store::Mode::read_only).runs().empty()));
}

TEST_CASE("compile-only on 3 ranks: the other ranks compile with NVRTC, rank 0 records each trial once", "[mpi]") {
  if (!have_mpirun()) return;
  TempDir t;
  const std::string db = (t.path / "c.db").string();
  std::string log;
  const int rc = evotune_on(3,
                            {"--db", db, "run", "-q", "--kernel", "gemm", "--shape", "256,256,256", "--compile-only",
                             "--arch", "sm_90a", "--budget", "3", "-j", "1", "--no-cache"},
                            &log);
  INFO(log);
  REQUIRE(rc == 0);
  Store s = Store::open(db, Store::Mode::read_only);
  CHECK(s.run(1)->status == "done");
  std::set<std::string> configs;
  const std::vector<Trial> trials = s.trials(1);
  CHECK(trials.size() == 3);
  for (const Trial& tr : trials) {
    CHECK(configs.insert(tr.config.canonical()).second);
    CHECK(tr.status != TrialStatus::invalid);
    CHECK(tr.compile_ms > 0);
    CHECK_FALSE(tr.cache_hit);
    CHECK(tr.device == -1);  // compiled, never run
  }
}

TEST_CASE("a run rank 0 refuses ends every rank, with rank 0's message and exit code", "[mpi]") {
  if (!have_mpirun()) return;
  TempDir t;
  std::string log;
  const int rc = evotune_on(3, {"--db", (t.path / "r.db").string(), "run", "--kernel", "no_such_kernel"}, &log);
  INFO(log);
  CHECK(rc == 2);
  CHECK(log.find("evotune: ") != std::string::npos);
  CHECK(log.find("no_such_kernel") != std::string::npos);
}
