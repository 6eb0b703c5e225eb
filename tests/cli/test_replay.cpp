// The whole tuning loop without a GPU: replay from a dataset (here a
// synthetic one over the real gemm space, written by the test), determinism
// end to end, and resume after kill -9 at points set by what is committed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "core/strings.hpp"
#include "kernel_templates/registry.hpp"
#include "search/space.hpp"
#include "store/dataset.hpp"
#include "store/store.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"

extern char** environ;

using namespace evotune;
namespace fs = std::filesystem;

namespace {

using evotune_test::TempDir;

// Every valid gemm config at 1024^3 with a smooth made-up latency (a bowl
// around one config) and a few failures, as if a sweep had measured them.
std::string write_synthetic_dataset(const fs::path& dir) {
  KernelSpec spec = load_kernel("gemm");
  Problem p = spec.parse_problem("1024,1024,1024", Dtype::fp16);
  SearchSpace space(spec, {p}, DeviceTraits::for_arch(90));
  const auto* valid = space.enumerate_valid();
  REQUIRE(valid);
  RunInfo run;
  run.kernel = spec.name;
  run.spec_hash = spec.content_hash();
  run.problems = {p};
  run.dtype = "fp16";
  run.device.name = "synthetic";
  run.device.cc = 90;
  run.device.num_sms = 132;
  run.device.arch = "sm_90";
  std::vector<Trial> trials;
  std::mt19937_64 rng(7);
  for (const Config& c : *valid) {
    Trial t;
    t.config = c;
    t.compile_ms = 1500 + static_cast<double>(rng() % 1000);
    double d = 0;
    for (size_t i = 0; i < spec.params.size(); ++i) {
      double x = static_cast<double>(space.value_index(c, i));
      double target = static_cast<double>(spec.params[i].values.size()) / 2.0;
      d += (x - target) * (x - target);
    }
    if (rng() % 29 == 0) {
      t.status = TrialStatus::compile_error;
      t.error = "synthetic compile error";
    } else if (rng() % 31 == 0) {
      t.status = TrialStatus::incorrect;
      t.error = "synthetic verification failure";
      t.verify_ms = 3;
    } else {
      Measurement m;
      m.p50_us = 20 + 3 * d;
      m.samples = 50;
      t.per_problem = {m};
      t.fitness = m.p50_us;
      t.verify_ms = 3;
      t.bench_ms = 30;
    }
    trials.push_back(t);
  }
  fs::path out = dir / "synthetic.json";
  std::ofstream(out) << write_dataset(run, trials, "synthetic");
  return out.string();
}

int run_cli(const std::vector<std::string>& args, std::string* output = nullptr) {
  std::string cmd = evotune_test::binary();
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (output) *output = out;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<std::string> configs_of(const std::string& db, int64_t run) {
  Store s = Store::open(db, Store::Mode::read_only);
  std::vector<std::string> out;
  for (const Trial& t : s.trials(run)) out.push_back(t.config.canonical() + "=" + to_string(t.status));
  return out;
}

// evotune with its progress output on a pipe of the smallest capacity the
// kernel allows. The tuner prints a trial's line ("[ 17/1200] ok ...") only
// after committing the trial, and blocks on the full pipe while the test does
// not read, so the run is never more than a pipe's worth of lines ahead of what
// the test has read: a kill right after reading line N lands after trial N is
// committed and long before the run could end, whatever the machine's speed.
class ProgressChild {
 public:
  explicit ProgressChild(const std::vector<std::string>& args) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    REQUIRE(::fcntl(fds[0], F_SETPIPE_SZ, 4096) >= 0);
    capacity_ = ::fcntl(fds[0], F_GETPIPE_SZ);
    REQUIRE(capacity_ > 0);
    std::vector<std::string> argv_s = {evotune_test::binary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    fd_ = fds[0];
    REQUIRE(rc == 0);
  }
  ~ProgressChild() {
    if (pid_ > 0) kill_and_wait();
    if (fd_ >= 0) ::close(fd_);
  }
  ProgressChild(const ProgressChild&) = delete;
  ProgressChild& operator=(const ProgressChild&) = delete;

  // How many progress lines the run can get ahead of the reader: a pipe full
  // of the shortest possible lines ("[%3d/%d] %-17s " and a config), one held
  // in a blocked write and one being formatted.
  int max_lines_ahead() const { return capacity_ / 30 + 2; }

  // Reads until a progress line reports `target` trials spent or the output
  // ends; returns the highest count read.
  int read_until(int target) {
    int highest = 0;
    size_t scanned = 0;
    char buf[4096];
    while (highest < target) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out_.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = out_.find('\n', scanned)) != std::string::npos; scanned = nl + 1) {
        int spent = 0, budget = 0;
        if (std::sscanf(out_.c_str() + scanned, "[%d/%d]", &spent, &budget) == 2) highest = std::max(highest, spent);
      }
    }
    return highest;
  }

  void kill_and_wait() {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    killed_ = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    pid_ = -1;
  }
  bool killed() const { return killed_; }
  const std::string& output() const { return out_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int capacity_ = 0;
  bool killed_ = false;
  std::string out_;
};
}  // namespace

TEST_CASE("a replayed run records the dataset's results and is deterministic for a seed", "[replay]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "r.db").string();
  std::string log;
  REQUIRE(run_cli({"--db", db, "run", "--replay", data, "--budget", "60", "--seed", "3", "-j", "4"}, &log) == 0);
  INFO(log);
  CHECK(log.find("simulated") != std::string::npos);
  CHECK(log.find("trials/min") != std::string::npos);
  REQUIRE(run_cli({"--db", db, "run", "--replay", data, "--budget", "60", "--seed", "3", "-j", "4"}) == 0);
  REQUIRE(run_cli({"--db", db, "run", "--replay", data, "--budget", "60", "--seed", "4", "-j", "4"}) == 0);
  auto a = configs_of(db, 1), b = configs_of(db, 2), c = configs_of(db, 3);
  CHECK(a.size() == 60);
  CHECK(a == b);
  CHECK(a != c);
  // The stored trials carry the dataset's measurements.
  Dataset d = read_dataset(data);
  Store s = Store::open(db, Store::Mode::read_only);
  for (const Trial& tr : s.trials(1)) {
    const Trial* rec = d.find(tr.config);
    REQUIRE(rec);
    CHECK(tr.status == rec->status);
    CHECK(tr.fitness == Approx(rec->fitness));
  }
  RunInfo r = *s.run(1);
  CHECK(r.stats.wall_s > 0);  // the simulated clock
  CHECK(r.status == "done");
}

TEST_CASE("kill -9 after a seeded number of trials: resume loses and duplicates nothing", "[replay][resume]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "k.db").string();
  const int budget = 1200;
  const int rounds = 5;
  std::mt19937 rng(12345);
  int last_seen = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> args = {"--db", db, "run", "-j", "2"};
    if (round == 0)
      args.insert(args.end(), {"--replay", data, "--budget", std::to_string(budget), "--seed", "9"});
    else
      args.insert(args.end(), {"--resume", "1"});
    ProgressChild child(args);
    // Each round kills at its own point, past what earlier rounds recorded and
    // spread over the run; the margin keeps the end of the run out of reach.
    const int slice = (budget - 2 * child.max_lines_ahead()) / rounds;
    REQUIRE(slice > 1);
    const int target = std::max(last_seen + 1, round * slice + 1 + static_cast<int>(rng() % (slice - 1)));
    const int seen = child.read_until(target);
    INFO("round " << round << ", target " << target << ", output:\n" << child.output());
    REQUIRE(seen >= target);
    child.kill_and_wait();
    REQUIRE(child.killed());

    Store s = Store::open(db, Store::Mode::read_only);
    REQUIRE(s.last_run_id() == 1);
    // The kill landed mid-run.
    CHECK(s.run(1)->status == "running");
    std::vector<Trial> trials = s.trials(1);
    int spent = 0;
    for (size_t i = 0; i < trials.size(); ++i) {
      CHECK(trials[i].seq == static_cast<int>(i + 1));  // seqs stay 1..n
      spent += trials[i].status != TrialStatus::invalid;
    }
    // Every trial the run reported is committed, and the run could not get
    // far past what the test read.
    CHECK(spent >= seen);
    CHECK(spent < budget);
    last_seen = spent;
  }
  // Finish whatever is left.
  std::string log;
  int rc = run_cli({"--db", db, "run", "-q", "--resume", "1"}, &log);
  INFO(log);
  REQUIRE(rc == 0);
  Store s = Store::open(db, Store::Mode::read_only);
  RunInfo r = *s.run(1);
  CHECK(r.status == "done");
  std::vector<Trial> trials = s.trials(1);
  int spent = 0;
  std::set<std::string> seen;
  for (size_t i = 0; i < trials.size(); ++i) {
    const Trial& tr = trials[i];
    CHECK(tr.seq == static_cast<int>(i + 1));
    CHECK(seen.insert(tr.config.canonical()).second);  // no duplicates
    spent += tr.status != TrialStatus::invalid;
  }
  CHECK(spent == budget);  // exactly the budget: nothing lost, nothing extra
  CHECK(r.stats.trials == budget);
  // The stored population is the top K of the ok trials.
  std::vector<Trial> ok = s.trials(1, TrialStatus::ok);
  std::stable_sort(ok.begin(), ok.end(), [](const Trial& a, const Trial& b) { return a.fitness < b.fitness; });
  std::vector<Trial> elites = s.elites(1);
  REQUIRE(elites.size() == std::min<size_t>(6, ok.size()));
  for (size_t i = 0; i < elites.size(); ++i) CHECK(elites[i].fitness == Approx(ok[i].fitness));
}

TEST_CASE("replay refuses what it cannot honour", "[replay]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "x.db").string();
  std::string out;
  CHECK(run_cli({"--db", db, "run", "--replay", (t.path / "none.json").string()}, &out) == 2);
  CHECK(out.find("cannot read dataset") != std::string::npos);
  std::ofstream(t.path / "bad.json") << "{\"hello\": 1}";
  CHECK(run_cli({"--db", db, "run", "--replay", (t.path / "bad.json").string()}, &out) == 2);
  CHECK(out.find("not an evotune dataset") != std::string::npos);
  CHECK(run_cli({"--db", db, "run", "--replay", data, "--kernel", "sdpa_fwd"}, &out) == 2);
  CHECK(out.find("holds kernel gemm") != std::string::npos);
  CHECK(run_cli({"--db", db, "run", "--replay", data, "--shape", "2048,2048,2048"}, &out) == 2);
  CHECK(out.find("no measurements") != std::string::npos);
  CHECK_FALSE(fs::exists(db));
}

// On the measured landscape of an exhaustive H200 sweep (tests/data), the
// evolutionary search finds faster configs than random search with the same
// small budget, and comes within 10% of the sweep's best; also with the
// window of a 16-core host, where configs are proposed ahead of results.
TEST_CASE("evo beats random on the recorded sdpa_fwd landscape", "[replay][search]") {
  TempDir t;
  std::string data = evotune_test::source_dir() + "/tests/data/sdpa_fwd_h200.json";
  REQUIRE(fs::exists(data));
  Dataset d = read_dataset(data);
  double global = 1e30;
  for (const Trial& tr : d.trials)
    if (tr.ok()) global = std::min(global, tr.fitness);
  std::string db = (t.path / "cmp.db").string();
  const int seeds = 6;
  // strategy, compile threads
  const std::vector<std::pair<std::string, std::string>> variants = {{"evo", "1"}, {"evo", "16"}, {"random", "1"}};
  for (const auto& [strategy, threads] : variants)
    for (int seed = 1; seed <= seeds; ++seed)
      REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--strategy", strategy, "--seed",
                       std::to_string(seed), "--budget", "64", "-j", threads}) == 0);
  Store s = Store::open(db, Store::Mode::read_only);
  std::vector<double> mean_best(variants.size(), 0);
  for (const RunInfo& r : s.runs())
    mean_best[static_cast<size_t>(r.id - 1) / seeds] += s.trial(*r.best_trial_id)->fitness / seeds;
  INFO("evo " << mean_best[0] << ", evo -j 16 " << mean_best[1] << ", random " << mean_best[2] << ", global "
              << global);
  CHECK(mean_best[0] < mean_best[2]);
  CHECK(mean_best[1] < mean_best[2]);
  CHECK(mean_best[0] < 1.10 * global);
  CHECK(mean_best[1] < 1.10 * global);
}

// Replay goes through the same dispatch as live GPUs, with --gpus N virtual
// workers on a simulated clock: a seed gives the same run every time, work
// is spread over the GPUs, and the simulated throughput grows.
TEST_CASE("several GPUs: the same run for a seed, spread over the workers, more trials per minute", "[replay][gpus]") {
  TempDir t;
  std::string data = evotune_test::source_dir() + "/tests/data/gemm_h200.json";
  REQUIRE(fs::exists(data));
  std::string db = (t.path / "g.db").string();
  // Warm cache: the GPU, not compilation, is the bottleneck.
  for (const char* gpus : {"1", "2", "2"})
    REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--replay-warm-cache", "--budget", "200", "--seed", "5",
                     "--window", "8", "--gpus", gpus}) == 0);
  CHECK(configs_of(db, 2) == configs_of(db, 3));
  CHECK(configs_of(db, 1).size() == 200);
  // The report's % of peak: the H200's dense bf16 tensor rate.
  std::string report;
  REQUIRE(run_cli({"--db", db, "report", "1"}, &report) == 0);
  CHECK(report.find(" TFLOP/s | % of peak | vs default |") != std::string::npos);
  CHECK(report.find("over 989.4 TFLOP/s (dense bf16 tensor math, NVIDIA's H200 SXM datasheet)") != std::string::npos);
  CHECK(configs_of(db, 2).size() == 200);
  Store s = Store::open(db, Store::Mode::read_only);
  std::set<int> devices;
  for (const Trial& tr : s.trials(2))
    if (tr.device >= 0) devices.insert(tr.device);
  CHECK(devices == std::set<int>{0, 1});
  double one = s.run(1)->stats.wall_s, two = s.run(2)->stats.wall_s;
  INFO("simulated wall: 1 GPU " << one << " s, 2 GPUs " << two << " s");
  CHECK(one / two > 1.8);
}

namespace {

// Starts evotune with its output on a pipe of one page and kills it (SIGKILL)
// once a line contains `marker`. It cannot finish meanwhile: with the pipe
// full and unread, its next line blocks. Returns whether it died of the kill.
bool kill_when_printed(std::vector<std::string> args, const std::string& marker) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::fcntl(fds[0], F_SETPIPE_SZ, 4096);
  args.insert(args.begin(), evotune_test::binary());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  std::string seen;
  char buf[256];
  ssize_t n;
  while (seen.find(marker) == std::string::npos && (n = ::read(fds[0], buf, sizeof buf)) > 0) seen.append(buf, n);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

}  // namespace

TEST_CASE("resume --budget B makes B the run's budget, kept if that session is killed", "[replay][resume]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "b.db").string();
  REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--budget", "20", "--seed", "2"}) == 0);
  // The extension is killed part-way: the new budget is already the run's.
  REQUIRE(kill_when_printed({"--db", db, "run", "--resume", "1", "--budget", "400"}, "[ 40/400]"));
  {
    Store s = Store::open(db, Store::Mode::read_only);
    CHECK(s.run(1)->budget == 400);
    CHECK(s.trials(1).size() < 400);
  }
  // A plain --resume finishes the extension.
  std::string log;
  REQUIRE(run_cli({"--db", db, "run", "--resume", "1"}, &log) == 0);
  INFO(log);
  CHECK(log.find("budget 400 (") != std::string::npos);
  Store s = Store::open(db, Store::Mode::read_only);
  CHECK(s.run(1)->budget == 400);
  CHECK(s.trials(1).size() == 400);
  CHECK(s.run(1)->status == "done");
  // `runs`, the report and the exported header say the same.
  REQUIRE(run_cli({"--db", db, "runs"}, &log) == 0);
  CHECK(log.find("400/400") != std::string::npos);
  REQUIRE(run_cli({"--db", db, "report", "1"}, &log) == 0);
  CHECK(log.find("budget 400") != std::string::npos);
  REQUIRE(run_cli({"--db", db, "export", "1"}, &log) == 0);
  CHECK(log.find("budget 400") != std::string::npos);
  // A budget below what the run has already evaluated is refused.
  CHECK(run_cli({"--db", db, "run", "--resume", "1", "--budget", "300"}, &log) == 2);
  CHECK(log.find("--budget 300: run 1 has already evaluated 400 trials") != std::string::npos);
}

TEST_CASE("resume refuses options that conflict with the run and writes nothing", "[replay][resume]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "c.db").string();
  REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--budget", "20", "--seed", "3"}) == 0);
  fs::copy_file(data, t.path / "other.json");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--seed", "5"}, "--seed 5 conflicts with run 1's seed 3; a resumed run keeps its seed"},
      {{"--strategy", "random"}, "--strategy random conflicts with run 1's strategy evo"},
      {{"--elites", "3"}, "--elites 3 conflicts with run 1's elites 6"},
      {{"--kernel", "sdpa_fwd"}, "--kernel sdpa_fwd conflicts with run 1's kernel gemm"},
      {{"--shape", "2048,2048,2048"},
       "--shape/--problem M=2048,N=2048,K=2048,TA=0,TB=0 conflicts with run 1's problems M=1024,N=1024,K=1024,TA=0,TB=0"},
      {{"--dtype", "bf16"}, "--dtype bf16 conflicts with run 1's dtype fp16"},
      {{"--compile-only"}, "--compile-only conflicts with run 1"},
      {{"--replay", (t.path / "other.json").string()}, "conflicts with run 1's replay dataset"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--db", db, "run", "--resume", "1"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    std::string log;
    CHECK(run_cli(args, &log) == 2);
    INFO(log);
    CHECK(log.find(c.message) != std::string::npos);
    Store s = Store::open(db, Store::Mode::read_only);
    CHECK(s.trials(1).size() == 20);
    CHECK(s.run(1)->status == "done");
  }
  // Options that agree with the run are fine.
  std::string log;
  REQUIRE(run_cli({"--db", db, "run", "-q", "--resume", "1", "--kernel", "gemm", "--seed", "3", "--shape",
                   "1024,1024,1024", "--dtype", "fp16", "--replay", data, "--budget", "25"},
                  &log) == 0);
  INFO(log);
  CHECK(Store::open(db, Store::Mode::read_only).trials(1).size() == 25);
}

TEST_CASE("replay --gpus N simulates N GPUs", "[replay][gpus]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "n.db").string();
  REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--replay-warm-cache", "--budget", "60", "--gpus",
                   "3"}) == 0);
  Store s = Store::open(db, Store::Mode::read_only);
  std::set<int> devices;
  for (const Trial& tr : s.trials(1))
    if (tr.device >= 0) devices.insert(tr.device);  // those that reached a GPU
  CHECK(devices == std::set<int>{0, 1, 2});
  CHECK(nlohmann::json::parse(s.run(1)->options_json).at("gpus") == 3);
}

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("report -o writes the Markdown with its plots beside it: every trial a point, failures by status",
          "[replay][report]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "rep.db").string();
  REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--budget", "150", "--seed", "5"}) == 0);
  const fs::path md = t.path / "reports" / "summary.md";  // the folder does not exist yet
  std::string log;
  REQUIRE(run_cli({"--db", db, "report", "last", "-o", md.string()}, &log) == 0);
  INFO(log);
  const std::string text = read_text(md);
  const std::string conv = read_text(t.path / "reports" / "summary-convergence.svg");
  const std::string elites = read_text(t.path / "reports" / "summary-elites.svg");
  CHECK(text.find("![every trial by its order, coloured by status, and the best so far](summary-convergence.svg)") !=
        std::string::npos);
  CHECK(text.find("(summary-elites.svg)") != std::string::npos);

  Store s = Store::open(db, Store::Mode::read_only);
  std::map<std::string, size_t> by_status;
  for (const Trial& tr : s.trials(1)) ++by_status[to_string(tr.status)];
  REQUIRE(by_status.size() >= 2);  // the dataset has failures to show
  // One dot per trial, failed ones included (in the band above the plot),
  // and each status in the legend with its count.
  CHECK(count_of(conv, "<circle") == 150);
  for (const auto& [st, n] : by_status) {
    CHECK(conv.find(">" + st + " (" + std::to_string(n) + ")<") != std::string::npos);
    if (st != "ok") CHECK(text.find("| " + st + " | " + std::to_string(n) + " |") != std::string::npos);
  }
  CHECK(conv.rfind("<svg", 0) == 0);
  CHECK(conv.find("</svg>") != std::string::npos);
  CHECK(conv.find("<path fill=\"none\" stroke=\"#222222\"") != std::string::npos);  // the best so far
  // The six elites, and the default config with each one's speedup over it
  // where the default was measured correct.
  CHECK(count_of(elites, ">elite #") == 6);
  std::optional<Trial> def = s.run(1)->default_trial_id ? s.trial(*s.run(1)->default_trial_id) : std::nullopt;
  INFO("default trial: " << (def ? to_string(def->status) : "none"));
  const bool def_ok = def && def->ok();
  CHECK((elites.find(">default config<") != std::string::npos) == def_ok);
  CHECK(count_of(elites, "x</text>") == (def_ok ? 7u : 0u));
  // The synthetic times grow with every parameter's distance from the middle
  // of its values, so each parameter is in the table.
  CHECK(text.find("## Parameters that mattered") != std::string::npos);
  CHECK(text.find("| BLOCK_M |") != std::string::npos);
  // A GPU not in the peak table: no % of peak column, and the report says why.
  CHECK(text.find("No % of peak: this GPU's peak for") != std::string::npos);
  CHECK(text.find("% of peak |") == std::string::npos);
  // Plots are written only with -o; the Markdown alone goes to stdout.
  REQUIRE(run_cli({"--db", db, "report", "1"}, &log) == 0);
  CHECK(log.find("# evotune report: run 1") != std::string::npos);
  CHECK(log.find(".svg)") == std::string::npos);
}

namespace {

// A stand-in for Nsight Compute (which needs a GPU): records its arguments,
// one per line, then prints what ncu printed on an H100 (tests/data/ncu).
std::string fake_ncu(const fs::path& dir, const std::string& body) {
  const fs::path p = dir / "ncu";
  std::ofstream(p) << "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done >> " << (dir / "ncu.args").string() << "\n"
                   << "if [ \"$1\" = --version ]; then echo 'NVIDIA (R) Nsight Compute Command Line Profiler'; "
                      "echo 'Version 2025.3.1.0 (build 36398880) (public-release)'; exit 0; fi\n"
                   << body << "\n";
  fs::permissions(p, fs::perms::owner_all);
  return p.string();
}

struct EnvVar {
  std::string name;
  EnvVar(std::string n, const std::string& v) : name(std::move(n)) { setenv(name.c_str(), v.c_str(), 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("profile: ncu on the top elites, stored per trial, in the report, its failures change nothing",
          "[replay][profile]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "p.db").string();
  REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--budget", "40", "--seed", "5"}) == 0);
  // Baselines measured beside the run (a GPU run measures them; this one
  // is replayed), for --baseline below.
  {
    Store w = Store::open(db);
    BaselineResult b;
    b.name = "vendor";
    b.library = "cublaslt";
    b.m.p50_us = 30;
    b.m.samples = 10;
    w.record_baseline(1, b);
    b.name = "vendor-top8";
    w.record_baseline(1, b);
    b.name = "cudnn";
    b.library = "torch_sdpa";
    b.status = "skipped";
    w.record_baseline(1, b);
  }
  const std::string csv = evotune_test::source_dir() + "/tests/data/ncu/gemm_sm90_h100_raw.csv";
  std::string log;
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path, "cat " + csv));
    REQUIRE(run_cli({"--db", db, "profile", "last", "--top", "2"}, &log) == 0);
  }
  INFO(log);
  CHECK(log.find("profiled 2 trial(s)") != std::string::npos);  // the default config was incorrect: left out
  std::vector<Trial> elites;
  std::vector<TrialProfile> ps;
  std::string problem;
  {  // Closed before the writes below: a read-only connection this process kept open across them made its later
     // opens read "database disk image is malformed" (the file itself checked ok).
    Store s = Store::open(db, Store::Mode::read_only);
    elites = s.elites(1);
    ps = s.profiles(1);
    problem = s.run(1)->problems[0].canonical();
  }
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].profile.kernel == "gemm_sm90");
  CHECK(ps[0].tool == "Nsight Compute 2025.3.1.0");
  std::set<int64_t> profiled = {ps[0].trial_id, ps[1].trial_id};
  CHECK(profiled == std::set<int64_t>{elites[0].id, elites[1].id});
  // What ncu was asked: the timed range's first launch of the one problem,
  // this binary evaluating the elite's config on the run's problem.
  const std::string args = read_text(t.path / "ncu.args");
  CHECK(args.find("--nvtx-include\nevotune_timed/\n--launch-count\n1\n") != std::string::npos);
  CHECK(args.find("--config\n" + elites[0].config.canonical() + "\n") != std::string::npos);
  CHECK(args.find("--baselines\nnone\n") != std::string::npos);  // a trial's profile measures no baseline
  CHECK(args.find("--problem\n" + problem + "\n") != std::string::npos);

  const fs::path md = t.path / "r" / "summary.md";
  REQUIRE(run_cli({"--db", db, "report", "1", "-o", md.string()}) == 0);
  const std::string text = read_text(md);
  CHECK(text.find("## Nsight Compute") != std::string::npos);
  CHECK(text.find("| elite #1 | " + problem + " | 11.49 | ") != std::string::npos);
  CHECK(text.find("### What limits the winner") != std::string::npos);
  CHECK(text.find("latency-bound") != std::string::npos);

  // --baseline: each baseline measured ok, measured again on its problem
  // alone (cuBLASLt's top-N under its spec name), its own range profiled.
  fs::remove(t.path / "ncu.args");
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path, "cat " + csv));
    REQUIRE(run_cli({"--db", db, "profile", "last", "--top", "1", "--baseline"}, &log) == 0);
  }
  CHECK(log.find("profiled 1 trial(s) and 2 baseline result(s)") != std::string::npos);
  const std::string bargs = read_text(t.path / "ncu.args");
  CHECK(bargs.find("--nvtx-include\nevotune_baseline vendor p0/\n--csv\n") != std::string::npos);
  CHECK(bargs.find("--nvtx-include\nevotune_baseline vendor-top8 p0/\n--csv\n") != std::string::npos);
  CHECK(bargs.find("--baselines\nvendor\n") != std::string::npos);
  CHECK(bargs.find("vendor-top8\n--") == std::string::npos);  // measured under its spec name
  CHECK(bargs.find("cudnn") == std::string::npos);            // skipped: nothing to profile
  {
    std::vector<TrialProfile> all = Store::open(db, Store::Mode::read_only).profiles(1);
    REQUIRE(all.size() == 4);
    CHECK(all[2].baseline == "vendor");
    CHECK(all[3].baseline == "vendor-top8");
  }
  REQUIRE(run_cli({"--db", db, "report", "1", "-o", md.string()}) == 0);
  const std::string with_baselines = read_text(md);
  CHECK(with_baselines.find("| baseline vendor | " + problem + " | 11.49 | ") != std::string::npos);
  CHECK(with_baselines.find("  - beside it, baseline vendor (11.49 µs): ") != std::string::npos);

  // ncu without access to the counters, or none at all: exit 5, a message
  // that says why, the stored profiles as they were.
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path,
                                       "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission "
                                       "to access NVIDIA GPU Performance Counters'; exit 1"));
    CHECK(run_cli({"--db", db, "profile", "1"}, &log) == 5);
  }
  CHECK(log.find("permission to read the GPU's performance counters") != std::string::npos);
  {
    EnvVar ncu("EVOTUNE_NCU", (t.path / "missing").string());
    CHECK(run_cli({"--db", db, "profile", "1"}, &log) == 5);
  }
  CHECK(log.find("EVOTUNE_NCU=" + (t.path / "missing").string() + " is not an executable") != std::string::npos);
  CHECK(Store::open(db, Store::Mode::read_only).profiles(1).size() == 4);

  // --reports DIR: each trial's and baseline's launches once more into a
  // full report there (the same range and launch count as its metrics),
  // the metrics stored as without it.
  const fs::path reports = t.path / "ncu reports";
  const std::string write_report =
      "cat " + csv + "; prev=; for a in \"$@\"; do [ \"$prev\" = -o ] && : > \"$a.ncu-rep\"; prev=$a; done; exit 0";
  fs::remove(t.path / "ncu.args");
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path, write_report));
    REQUIRE(run_cli({"--db", db, "profile", "1", "--top", "1", "--no-default", "--baseline", "--reports",
                     reports.string()},
                    &log) == 0);
  }
  const std::string trial_rep = (reports / ("run1-trial" + std::to_string(elites[0].seq) + ".ncu-rep")).string();
  const std::string vendor_rep = (reports / "run1-vendor-top8-p0.ncu-rep").string();
  CHECK(log.find("  report: " + trial_rep + "\n") != std::string::npos);
  CHECK(log.find("  report: " + vendor_rep + "\n") != std::string::npos);
  CHECK(log.find("full reports in " + reports.string()) != std::string::npos);
  CHECK(fs::is_regular_file(trial_rep));
  CHECK(fs::is_regular_file(reports / "run1-vendor-p0.ncu-rep"));
  CHECK(fs::is_regular_file(vendor_rep));
  const std::string rargs = read_text(t.path / "ncu.args");
  CHECK(rargs.find("--nvtx-include\nevotune_timed/\n--launch-count\n1\n--set\nfull\n--import-source\nyes\n-f\n-o\n" +
                   trial_rep.substr(0, trial_rep.size() - 8) + "\n") != std::string::npos);
  CHECK(rargs.find("--nvtx-include\nevotune_baseline vendor-top8 p0/\n--set\nfull\n") != std::string::npos);
  CHECK(Store::open(db, Store::Mode::read_only).profiles(1).size() == 4);  // profiled again: replaced, none added
  // A report ncu did not write is a failure (exit 5), not a path printed;
  // a --reports path that is a file is refused before anything is profiled.
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path, "cat " + csv));
    CHECK(run_cli({"--db", db, "profile", "1", "--top", "1", "--no-default", "--reports", (t.path / "none").string()},
                  &log) == 5);
  }
  CHECK(log.find("ncu wrote no report " + (t.path / "none" / "run1-trial").string()) != std::string::npos);
  std::ofstream(t.path / "a file") << "x";
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path, write_report));
    CHECK(run_cli({"--db", db, "profile", "1", "--reports", (t.path / "a file").string()}, &log) == 2);
  }
  CHECK(log.find("--reports " + (t.path / "a file").string() + ": not a directory") != std::string::npos);
  CHECK(Store::open(db, Store::Mode::read_only).profiles(1).size() == 4);

  // run --profile N: the same at the end of a run.
  {
    EnvVar ncu("EVOTUNE_NCU", fake_ncu(t.path, "cat " + csv));
    REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--budget", "20", "--seed", "6", "--profile", "1"},
                    &log) == 0);
  }
  CHECK(Store::open(db, Store::Mode::read_only).profiles(2).size() == 1);
}

TEST_CASE("baselines stored beside a run show in top, in the report's top line and plot, and in the header",
          "[replay][report]") {
  TempDir t;
  std::string data = write_synthetic_dataset(t.path);
  std::string db = (t.path / "base.db").string();
  REQUIRE(run_cli({"--db", db, "run", "-q", "--replay", data, "--budget", "40", "--seed", "3"}) == 0);
  double best_us = 0;
  {
    Store s = Store::open(db);
    const std::vector<Trial> elites = s.elites(1);
    REQUIRE_FALSE(elites.empty());
    best_us = elites.front().final_us > 0 ? elites.front().final_us : elites.front().fitness;
    BaselineResult lt;
    lt.name = "vendor";
    lt.library = "cublaslt";
    lt.detail = "cuBLASLt 13.0.2, algo 21";
    lt.m.p50_us = 2 * best_us;  // the best elite twice as fast
    lt.m.samples = 20;
    s.record_baseline(1, lt);
    BaselineResult gone;
    gone.name = "cudnn";
    gone.library = "torch_sdpa";
    gone.status = "skipped";
    gone.reason = "PyTorch not installed for python3";
    s.record_baseline(1, gone);
  }
  std::string log;
  REQUIRE(run_cli({"--db", db, "top", "last"}, &log) == 0);
  INFO(log);
  CHECK(log.find("baselines (same GPU") != std::string::npos);
  CHECK(log.find("2.00x") != std::string::npos);
  CHECK(log.find("skipped: PyTorch not installed for python3") != std::string::npos);
  const fs::path md = t.path / "rep" / "summary.md";
  REQUIRE(run_cli({"--db", db, "report", "last", "-o", md.string()}, &log) == 0);
  const std::string text = read_text(md);
  INFO(text);
  CHECK(text.find("| vs vendor |") != std::string::npos);  // a speedup column per baseline measured ok
  CHECK(text.find("| baseline libraries | vendor: cuBLASLt 13.0.2 |") != std::string::npos);  // not the algorithm
  // The baselines are rows of the top line too.
  CHECK(text.find("| baseline vendor | - | ") != std::string::npos);
  CHECK(text.find("| vs cudnn |") == std::string::npos);
  CHECK(text.find("## Baselines") != std::string::npos);
  CHECK(text.find("| skipped: PyTorch not installed for python3 |") != std::string::npos);
  CHECK(text.find("| 2.00x |") != std::string::npos);
  const std::string bars = read_text(t.path / "rep" / "summary-elites.svg");
  CHECK(bars.find(">vendor<") != std::string::npos);
  CHECK(bars.find("2.00x</text>") != std::string::npos);
  REQUIRE(run_cli({"--db", db, "export", "last", "--format", "header"}, &log) == 0);
  CHECK(log.find("// Baseline:  vendor: ") != std::string::npos);
  CHECK(log.find("speedup over it 2.00x") != std::string::npos);
  CHECK(log.find("// Baseline:  cudnn: skipped (PyTorch not installed for python3)") != std::string::npos);
}
