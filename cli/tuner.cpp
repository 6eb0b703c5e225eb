#include "cli/tuner.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compile_cache.hpp"
#include "engine/compile_service.hpp"
#include "engine/compiler.hpp"
#include "engine/device_info.hpp"
#include "engine/sanitizer.hpp"
#include "engine/support_kernels.hpp"
#include "engine/thread_pool.hpp"
#include "engine/worker_client.hpp"
#include "kernel_templates/registry.hpp"
#include "search/strategy.hpp"
#include "store/dataset.hpp"

#ifndef EVOTUNE_VERSION
#define EVOTUNE_VERSION "0.0.0"
#endif

namespace evotune {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("evotune") : p.string();
}

// Wakes the tuning loop when a compile or a GPU evaluation finishes. Tasks
// fulfil their promise first and signal second, so a woken loop always finds
// the result ready.
class Wakeup {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++events_;
    }
    cv_.notify_all();
  }
  uint64_t events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // Returns when something happened after `seen` (or after a safety timeout).
  void wait(uint64_t seen) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return events_ != seen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t events_ = 0;
};

template <typename T>
bool ready(const std::future<T>& f) {
  return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

// What one config needs compiled: one cubin per distinct set of defines
// (problems differing only in runtime dimensions share a cubin).
struct CompiledCandidate {
  std::vector<CompileResult> cubins;
  std::vector<int> problem_cubin;  // per problem (timed + check shapes)
  double compile_ms = 0;
  bool cache_hit = true;
};

// One proposed config on its way through the pipeline: compile, gate, GPU,
// then recorded strictly in proposal order.
struct Entry {
  Config config;
  std::optional<std::string> invalid;       // constraint violation (user configs only)
  std::future<CompiledCandidate> compiled;  // until taken
  bool prepared = false;
  CompiledCandidate cc;
  std::vector<LaunchPlan> launches;
  std::future<EvalReply> gpu;
  std::future<void> gpu_task;  // the thread running the evaluation
  int worker = -1;
  Clock::time_point gpu_start;
  std::optional<Trial> trial;       // finished
  const Trial* recorded = nullptr;  // replay: the dataset's trial for this config
  double sim_proposed = 0;          // replay: simulated time of the proposal
};

// A trial's resources: the worst over its cubins (one per set of defines).
Resources worst_resources(const CompiledCandidate& cc) {
  Resources out;
  for (const CompileResult& r : cc.cubins) {
    out.registers = std::max(out.registers, r.res.registers);
    out.smem_static = std::max(out.smem_static, r.res.smem_static);
    out.spill_stores = std::max(out.spill_stores, r.res.spill_stores);
    out.spill_loads = std::max(out.spill_loads, r.res.spill_loads);
    out.stack_frame = std::max(out.stack_frame, r.res.stack_frame);
  }
  return out;
}

std::string defines_key(const std::vector<std::pair<std::string, std::string>>& d) {
  std::string k;
  for (const auto& [a, b] : d) k += a + "=" + b + ";";
  return k;
}

CompileRequest base_request(const KernelSpec& spec, const std::string& arch) {
  CompileRequest r;
  r.source_name = spec.source_name;
  r.source = spec.source_text;
  r.entry = spec.entry;
  r.arch = arch;
  r.options = spec.options;
  r.include_dirs = spec.include_dirs;
  r.headers = spec.headers;
  return r;
}

std::string first_lines(const std::string& s, size_t max_lines) {
  std::vector<std::string> keep;
  for (const auto& l : split(s, '\n')) {
    if (trim(l).empty()) continue;
    keep.push_back(l);
    if (keep.size() == max_lines) break;
  }
  return join(keep, " | ");
}

// The first error line of a compiler log, for the one-line progress output.
std::string first_error(const std::string& log) {
  for (const auto& l : split(log, '\n'))
    if (l.find("error") != std::string::npos) return trim(l);
  return first_lines(log, 1);
}

double speedup_vs(const Trial& t, const std::optional<Trial>& def) {
  if (!def || !def->ok() || !t.ok()) return 0;
  std::vector<double> r;
  for (size_t i = 0; i < t.per_problem.size() && i < def->per_problem.size(); ++i)
    if (t.per_problem[i].p50_us > 0 && def->per_problem[i].p50_us > 0)
      r.push_back(def->per_problem[i].p50_us / t.per_problem[i].p50_us);
  return geomean(r);
}

bool needs_gpu(TrialStatus s) {
  return s == TrialStatus::ok || s == TrialStatus::incorrect || s == TrialStatus::crashed ||
         s == TrialStatus::timeout || s == TrialStatus::launch_error;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The reference's cubins, one per distinct set of defines, and for each
// problem the index of its own among them.
struct ReferenceCubins {
  std::vector<std::string> cubins;
  std::vector<int> of_problem;
};

// Throws SpecError with the compiler's log when the reference does not
// compile: that is the spec's fault, found before anything is run.
ReferenceCubins compile_references(const KernelSpec& spec, const std::vector<Problem>& problems,
                                   const DeviceTraits& dev, CompileService& compiler) {
  ReferenceCubins out;
  std::map<std::string, int> by_key;
  for (const Problem& p : problems) {
    auto defs = spec.reference_defines(p, dev);
    auto [it, fresh] = by_key.emplace(defines_key(defs), static_cast<int>(out.cubins.size()));
    if (fresh) {
      CompileRequest rr = base_request(spec, arch_for(dev.cc, spec.arch_specific));
      rr.source_name = spec.reference.source_name;
      rr.source = spec.reference.source_text;
      rr.entry = spec.reference.entry;
      rr.defines = defs;
      CompileResult cr = compiler.compile(rr);
      if (!cr.ok) throw SpecError("the reference of kernel " + spec.name + " does not compile:\n" + cr.log);
      out.cubins.push_back(cr.cubin);
    }
    out.of_problem.push_back(it->second);
  }
  return out;
}

// How a GPU run uses compute-sanitizer, resolved once from the options.
struct SanitizePlan {
  std::string mode = "none";  // none | elites | all
  bool asked = false;         // --sanitize given: a sanitizer failure is an error, not a warning
  std::string path;           // compute-sanitizer
  std::string note;           // why the gate is off, for the run's header
};

SanitizePlan resolve_sanitize(const TuneOptions& o, const KernelSpec& spec) {
  SanitizePlan p;
  p.asked = !o.sanitize.empty();
  p.mode = p.asked ? o.sanitize : "elites";
  if (p.mode != "none" && p.mode != "elites" && p.mode != "all")
    throw UsageError("--sanitize " + o.sanitize + ": expected none, elites or all");
  if (p.mode == "none") return p;
  if (spec.gates.sanitize.empty()) {
    p.mode = "none";
    p.note = "off: the spec's [gates] sanitize names no tool";
    return p;
  }
  p.path = locate_compute_sanitizer();
  if (p.path.empty()) {
    const std::string where = "not found in PATH, $CUDA_HOME/bin or /usr/local/cuda/bin (EVOTUNE_SANITIZER names it)";
    if (p.asked)
      throw UsageError("--sanitize " + o.sanitize + ": compute-sanitizer " + where +
                       "; --sanitize none runs without the gate");
    p.mode = "none";
    p.note = "off: compute-sanitizer " + where;
  }
  return p;
}

// Problems the sanitizer runs a candidate on: the check shapes (small,
// awkward), or the run's problems when the spec has none.
std::vector<size_t> sanitizer_problems(const std::vector<bool>& timed) {
  std::vector<size_t> checks, all;
  for (size_t i = 0; i < timed.size(); ++i) {
    all.push_back(i);
    if (!timed[i]) checks.push_back(i);
  }
  return checks.empty() ? all : checks;
}

// A sanitized evaluation takes far longer than a plain one.
double sanitizer_limit(double trial_limit_s) {
  return std::max(120.0, 5 * trial_limit_s);
}

// Trials that spent budget (constraint rejections are free).
int evaluated(const std::vector<Trial>& trials) {
  return static_cast<int>(
      std::count_if(trials.begin(), trials.end(), [](const Trial& t) { return t.status != TrialStatus::invalid; }));
}

std::string text_of(const std::string& s) {
  return s;
}
template <typename T>
std::string text_of(T v) {
  return std::to_string(v);
}

UsageError conflict(const std::string& given, const RunInfo& r, const std::string& what, const std::string& has) {
  return UsageError(strfmt("%s conflicts with run %lld's %s %s; a resumed run keeps its %s", given.c_str(),
                           static_cast<long long>(r.id), what.c_str(), has.c_str(), what.c_str()));
}

// Whether a --replay given names the dataset a run was replayed from (or
// stands in for one that is gone).
bool same_dataset(const std::string& given, const std::string& recorded) {
  if (recorded.empty()) return false;
  std::error_code ec;
  const bool same = std::filesystem::equivalent(given, recorded, ec);
  return ec ? !std::filesystem::exists(recorded) : same;
}

// A resumed run keeps what defines it: options left out take the run's
// values, options given must agree with them (kernel and problems: see
// resumed_problems). Its budget is the one given, else its own.
void adopt_resumed_run(TuneOptions& o, const RunInfo& r, int evaluated) {
  auto keep = [&](const char* option, auto& value, const auto& has, const char* what) {
    if (o.given.count(option) && value != has) throw conflict(option + (" " + text_of(value)), r, what, text_of(has));
    value = has;
  };
  keep("--seed", o.seed, r.seed, "seed");
  keep("--strategy", o.strategy, r.strategy, "strategy");
  keep("--elites", o.elites, r.elites_k, "elites");
  if (o.given.count("--compile-only") && !r.compile_only) throw conflict("--compile-only", r, "mode", "(measured)");
  o.compile_only = r.compile_only;
  nlohmann::json ropts = nlohmann::json::parse(r.options_json, nullptr, false);
  const std::string replay = ropts.is_object() ? ropts.value("replay", std::string()) : std::string();
  if (!o.replay_path.empty() && !same_dataset(o.replay_path, replay))
    throw conflict("--replay " + o.replay_path, r, "replay dataset", replay.empty() ? "(none: a GPU)" : replay);
  if (o.replay_path.empty()) o.replay_path = replay;
  if (o.kernel.empty()) o.kernel = r.spec_origin == "builtin" ? r.kernel : r.spec_origin;
  if (!o.given.count("--budget"))
    o.budget = r.budget;
  else if (o.budget < evaluated)
    throw UsageError(
        strfmt("--budget %d: run %lld has already evaluated %d trials (a resumed run's budget is its new "
               "total)",
               o.budget, static_cast<long long>(r.id), evaluated));
}

// Problems in canonical form, sorted: a set to compare.
std::vector<std::string> canonical_sorted(const std::vector<Problem>& problems) {
  std::vector<std::string> out;
  for (const Problem& p : problems) out.push_back(p.canonical());
  std::sort(out.begin(), out.end());
  return out;
}

// The problems given (--shape, --problem), read as `dtype`.
std::vector<Problem> given_problems(const TuneOptions& o, const KernelSpec& spec, Dtype dtype) {
  std::vector<Problem> out;
  for (const auto& text : o.problems) out.push_back(spec.parse_problem(text, dtype));
  return out;
}

// A new run's problems: those given (default: the spec's example).
std::vector<Problem> new_problems(const TuneOptions& o, const KernelSpec& spec) {
  if (o.problems.empty() && spec.example.empty()) throw UsageError("no problem given (--shape or --problem)");
  const Dtype dtype = o.dtype ? parse_dtype(*o.dtype) : spec.dtypes.front();
  if (o.problems.empty()) return {spec.parse_problem(spec.example, dtype)};
  return given_problems(o, spec, dtype);
}

// A resumed run's problems: its own; a kernel, --shape, --problem or --dtype
// given must agree with them.
std::vector<Problem> resumed_problems(const TuneOptions& o, const KernelSpec& spec, const RunInfo& r) {
  if (spec.name != r.kernel) throw conflict("--kernel " + o.kernel, r, "kernel", r.kernel);
  if (spec.content_hash() != r.spec_hash)
    throw UsageError("kernel " + spec.name + " changed since run " + std::to_string(r.id) + " (spec hash " +
                     r.spec_hash + " → " + spec.content_hash() + "); a resumed run needs the same kernel");
  const Dtype dtype = r.problems.front().dtype;
  if (o.dtype && parse_dtype(*o.dtype) != dtype) throw conflict("--dtype " + *o.dtype, r, "dtype", to_string(dtype));
  const std::vector<std::string> given = canonical_sorted(given_problems(o, spec, dtype));
  const std::vector<std::string> has = canonical_sorted(r.problems);
  if (!given.empty() && given != has)
    throw conflict("--shape/--problem " + join(given, "; "), r, "problems", join(has, "; "));
  return r.problems;
}

// A replay's problems: the dataset's; a --shape, --problem or --dtype given
// must be among them.
std::vector<Problem> replayed_problems(const TuneOptions& o, const KernelSpec& spec, const Dataset& d) {
  if (d.kernel != spec.name)
    throw UsageError("dataset " + o.replay_path + " holds kernel " + d.kernel + ", not " + spec.name);
  const Dtype dtype = d.problems.front().dtype;
  if (o.dtype && parse_dtype(*o.dtype) != dtype)
    throw UsageError("--dtype " + *o.dtype + ": dataset " + o.replay_path + " holds " + to_string(dtype) +
                     " measurements");
  const std::vector<std::string> has = canonical_sorted(d.problems);
  for (const Problem& p : given_problems(o, spec, dtype))
    if (!std::binary_search(has.begin(), has.end(), p.canonical()))
      throw UsageError("dataset " + o.replay_path + " has no measurements for " + p.canonical());
  return d.problems;
}

// --gpus: on a GPU host "all" or ordinals like 0,1; in a replay, where there
// are no devices to name, the number of GPUs to simulate.
void resolve_gpus(TuneOptions& o, bool replay) {
  const std::string& arg = o.gpus_arg;
  if (arg.empty()) return;
  o.gpus.clear();
  if (replay) {
    auto n = parse_int(arg);
    if (!n || *n < 1 || *n > 1024)
      throw UsageError("--gpus " + arg + ": with --replay, the number of GPUs to simulate (1 to 1024)");
    for (int i = 0; i < *n; ++i) o.gpus.push_back(i);
  } else if (arg == "all") {
    DeviceQuery q = query_devices();
    if (q.devices.empty()) throw NoDeviceError("--gpus all: no CUDA device found: " + q.reason);
    for (const auto& d : q.devices) o.gpus.push_back(d.ordinal);
  } else {
    for (const auto& part : split(arg, ',')) {
      auto v = parse_int(trim(part));
      if (!v || *v < 0) throw UsageError("--gpus '" + arg + "': expected all, or ordinals like 0,1");
      o.gpus.push_back(static_cast<int>(*v));
    }
  }
}

}  // namespace

void print_elites(std::ostream& out, const RunInfo& run, const std::vector<Trial>& elites,
                  const std::optional<Trial>& default_trial, const KernelSpec* spec) {
  bool retimed = std::any_of(elites.begin(), elites.end(), [](const Trial& t) { return t.final_us > 0; });
  std::vector<std::string> head = {"#", "trial"};
  for (size_t i = 0; i < run.problems.size(); ++i)
    head.push_back(run.problems.size() == 1 ? "p50 µs" : "p50 µs [" + std::to_string(i) + "]");
  if (retimed) head.push_back("re-timed µs");
  bool tflops = spec && !spec->flops.empty() && run.problems.size() == 1 && spec->flops_of(run.problems[0]) > 0;
  if (tflops) head.push_back("TFLOP/s");
  head.insert(head.end(), {"vs default", "max err", "mean err", "regs", "smem", "config"});
  Table t(head);
  int rank = 0;
  for (const Trial& e : elites) {
    std::vector<std::string> row = {std::to_string(++rank), std::to_string(e.seq)};
    double max_err = 0, mean_err = 0;
    for (size_t i = 0; i < run.problems.size(); ++i) {
      const Measurement* m = i < e.per_problem.size() ? &e.per_problem[i] : nullptr;
      row.push_back(m ? fmt_us(m->p50_us) : "-");
    }
    if (retimed) row.push_back(fmt_us(e.final_us));
    for (const auto& m : e.per_problem) {
      max_err = std::max(max_err, m.err.max_abs);
      mean_err = std::max(mean_err, m.err.mean_abs);
    }
    if (tflops) {
      double us = e.final_us > 0 ? e.final_us : (e.per_problem.empty() ? 0 : e.per_problem[0].p50_us);
      row.push_back(us > 0 ? strfmt("%.1f", spec->flops_of(run.problems[0]) / (us * 1e-6) / 1e12) : "-");
    }
    row.push_back(fmt_ratio(speedup_vs(e, default_trial)));
    row.push_back(fmt_sci(max_err));
    row.push_back(fmt_sci(mean_err));
    row.push_back(std::to_string(e.res.registers));
    row.push_back(fmt_kib(e.res.smem_total()));
    row.push_back(e.config.canonical());
    t.add(row);
  }
  t.print(out);
}

TuneResult tune(const TuneOptions& in_opts, std::ostream& out) {
  TuneOptions o = in_opts;
  auto t_start = Clock::now();
  std::atomic<bool>& stop = stop_requested();

  // ---- the run being resumed, if any
  std::optional<Store> store_opt;
  std::optional<RunInfo> resumed;
  std::vector<Trial> previous;
  if (o.resume_run > 0) {
    store_opt.emplace(Store::open(o.db_path));
    resumed = store_opt->run(o.resume_run);
    if (!resumed) throw UsageError("no run " + std::to_string(o.resume_run) + " in " + o.db_path);
    previous = store_opt->trials(resumed->id);
    adopt_resumed_run(o, *resumed, evaluated(previous));
  }

  // ---- a replay dataset stands in for the GPU
  std::optional<Dataset> replay;
  if (!o.replay_path.empty()) {
    replay = read_dataset(o.replay_path);
    if (o.kernel.empty()) o.kernel = replay->kernel;
  }
  resolve_gpus(o, replay.has_value());

  // ---- kernel and problems
  if (o.kernel.empty()) throw UsageError("no kernel given (--kernel NAME or a spec file path)");
  KernelSpec spec = load_kernel(o.kernel);
  const std::vector<Problem> problems = resumed  ? resumed_problems(o, spec, *resumed)
                                        : replay ? replayed_problems(o, spec, *replay)
                                                 : new_problems(o, spec);
  // User-given configs are parsed now: a typo must not leave a run behind.
  // Parameters a --config leaves out take the template's defaults.
  std::vector<Config> seeds;
  for (const auto& text : o.seed_configs) {
    Config c = Config::parse(text);
    for (const auto& [name, value] : c.values)
      if (!spec.find_param(name))
        throw UsageError("--config " + text + ": kernel " + spec.name + " has no parameter " + name);
    for (const auto& p : spec.params) c.values.emplace(p.name, p.default_value);
    seeds.push_back(c);
  }
  if (o.budget <= 0) throw UsageError("--budget must be at least 1");
  if (o.elites <= 0) throw UsageError("--elites must be at least 1");

  // ---- devices, or the target architecture
  DeviceTraits dev;
  DeviceRecord rec;
  rec.nvrtc_version = nvrtc_version();
  std::vector<DeviceInfo> gpus;
  const std::string exe = o.worker_exe.empty() ? self_exe() : o.worker_exe;
  // The compiler processes start now too (loading NVRTC) while the devices
  // are queried.
  unsigned threads = o.compile_threads > 0 ? static_cast<unsigned>(o.compile_threads)
                                           : std::max(1u, std::thread::hardware_concurrency());
  CompileService compiler(o.isolate_compiles && !replay ? exe : std::string(), threads, o.compile_timeout_s);
  if (!replay) compiler.spawn_all();
  // GPU workers are spawned first thing: each creates its CUDA context while
  // this process queries the devices, opens the run and compiles references.
  std::vector<std::unique_ptr<WorkerClient>> workers;
  if (replay) {
    rec = replay->device;
    dev.cc = rec.cc > 0 ? rec.cc : 90;
    dev.num_sms = rec.num_sms > 0 ? rec.num_sms : DeviceTraits::for_arch(dev.cc).num_sms;
    o.arch = rec.arch;
  } else if (o.compile_only) {
    if (o.arch.empty()) {
      DeviceQuery q = query_devices();
      if (q.devices.empty())
        throw UsageError("--compile-only needs --arch (e.g. --arch sm_90a) on a machine without a GPU");
      o.arch = arch_for(q.devices[0].cc, spec.arch_specific);
    }
    auto [cc, specific] = parse_arch(o.arch);
    dev = DeviceTraits::for_arch(cc);
    if (spec.arch_specific && !specific && cc >= 90) o.arch = arch_for(cc, true);
    rec.arch = o.arch;
    rec.cc = cc;
  } else {
    for (int id : o.gpus.empty() ? std::vector<int>{o.device} : o.gpus) {
      SetupRequest early;
      early.device = id;
      workers.push_back(std::make_unique<WorkerClient>(exe, early));
      workers.back()->spawn();
    }
    DeviceQuery q = query_devices();
    if (q.devices.empty())
      throw NoDeviceError(
          "no CUDA device found: " + q.reason +
          ". `evotune run --compile-only --arch sm_90a ...` compiles and checks resources without a GPU.");
    std::vector<int> ids = o.gpus.empty() ? std::vector<int>{o.device} : o.gpus;
    for (int id : ids) {
      if (id < 0 || id >= static_cast<int>(q.devices.size()))
        throw UsageError(strfmt("GPU %d: this machine has %zu CUDA device(s)", id, q.devices.size()));
      gpus.push_back(q.devices[static_cast<size_t>(id)]);
      if (gpus.back().cc != gpus.front().cc)
        throw UsageError("--gpus: " + gpus.front().name + " and " + gpus.back().name +
                         " differ in architecture; tune on GPUs of one kind");
    }
    const DeviceInfo& g = gpus.front();
    dev.cc = g.cc;
    dev.num_sms = g.num_sms;
    o.arch = arch_for(g.cc, spec.arch_specific);
    rec.name = g.name + (gpus.size() > 1 ? strfmt(" x%zu", gpus.size()) : "");
    rec.uuid = g.uuid;
    rec.cc = g.cc;
    rec.num_sms = g.num_sms;
    rec.driver_version = g.driver_version;
    rec.runtime_version = g.runtime_version;
    rec.arch = o.arch;
  }
  if (dev.cc < spec.min_cc || (spec.max_cc > 0 && dev.cc > spec.max_cc))
    throw UsageError(strfmt("kernel %s runs on compute capability %d%s, not on %s (cc %d)", spec.name.c_str(),
                            spec.min_cc, spec.max_cc > 0 ? strfmt("..%d", spec.max_cc).c_str() : "+",
                            gpus.empty() ? o.arch.c_str() : gpus.front().name.c_str(), dev.cc));
  if (gpus.empty() && !o.sanitize.empty() && o.sanitize != "none")
    throw UsageError("--sanitize " + o.sanitize + " needs a GPU run (not --compile-only or --replay)");
  const SanitizePlan sanitize = gpus.empty() ? SanitizePlan{} : resolve_sanitize(o, spec);

  // The run's problems are timed; check shapes (completed from the first
  // problem they apply to) are verified only.
  std::vector<Problem> all_problems = problems;
  std::vector<bool> timed(problems.size(), true);
  for (Problem& cs : spec.check_problems(problems)) {
    all_problems.push_back(std::move(cs));
    timed.push_back(false);
  }

  // A compile-only run compiles the reference too (it is part of what CI
  // should catch), before a run is recorded.
  if (o.compile_only) compile_references(spec, all_problems, dev, compiler);

  if (!store_opt) store_opt.emplace(Store::open(o.db_path));
  Store& store = *store_opt;
  CompileCache::global().set_enabled(o.use_cache && CompileCache::global().enabled());

  // ---- search
  SearchSpace space(spec, problems, dev);
  StrategyOptions so;
  so.seed = o.seed;
  so.elites = o.elites;
  std::unique_ptr<Strategy> strategy = make_strategy(o.strategy, space, so);
  Population population(o.elites);
  std::optional<Trial> default_trial;
  const Config default_config = spec.default_config();

  for (const Trial& t : previous) {
    strategy->mark_seen(t.config);
    strategy->observe(t);
    population.offer(t);
    if (t.config == default_config) default_trial = t;
  }
  int spent = evaluated(previous);
  // A config is evaluated (and stored) once per run: a --config given twice,
  // or one a resumed run already has, is not evaluated again.
  {
    std::set<std::string> have;
    for (const Trial& t : previous) have.insert(t.config.canonical());
    std::vector<Config> once;
    for (Config& c : seeds) {
      if (have.insert(c.canonical()).second)
        once.push_back(std::move(c));
      else
        spdlog::warn("--config {}: already in this run, evaluated once", c.canonical());
    }
    seeds = std::move(once);
  }

  // ---- compilers, references, GPU workers
  Wakeup wake;  // before the pool: its tasks signal it until the pool is joined
  ThreadPool pool(threads);
  const int window = o.window > 0 ? o.window : static_cast<int>(std::max(4u, 2 * threads));
  Planner planner(spec, dev);

  double gpu_busy_s = 0;  // seconds of GPU work, summed over the GPUs
  SetupRequest setup;     // the problems as the GPU workers have them
  std::optional<SanitizerGate> gate;
  // Workers get their set-up after the first compiles are submitted, so that
  // preparing the problems on the GPU overlaps compiling the first configs.
  auto start_workers = [&] {
    if (gpus.empty()) return;

    setup.seed = o.seed;
    setup.timing = o.timing;
    CompileRequest support;
    support.source_name = kSupportKernelsName;
    support.source = support_kernels_source();
    support.entry = "evotune_fill";
    support.arch = arch_for(dev.cc, false);
    CompileResult sr = compiler.compile(support);
    if (!sr.ok) throw EngineError("compiling evotune's support kernels failed:\n" + sr.log);
    setup.cubins.push_back(sr.cubin);
    ReferenceCubins refs = compile_references(spec, all_problems, dev, compiler);
    setup.cubins.insert(setup.cubins.end(), refs.cubins.begin(), refs.cubins.end());
    for (size_t i = 0; i < all_problems.size(); ++i)
      setup.problems.push_back(planner.problem_setup(all_problems[i], timed[i], 1 + refs.of_problem[i]));
    if (!o.quiet)
      out << "preparing " << all_problems.size() << " problem(s) on " << gpus.size()
          << " GPU(s) (inputs, references)..." << std::endl;
    std::vector<std::future<void>> starts;
    for (size_t i = 0; i < gpus.size(); ++i) {
      setup.device = gpus[i].ordinal;
      workers[i]->set_setup(setup);
    }
    spdlog::info("support and reference kernels compiled; starting {} GPU worker(s)", workers.size());
    for (auto& w : workers) starts.push_back(std::async(std::launch::async, [&w] { w->start(); }));
    for (auto& f : starts) f.get();  // rethrows a set-up failure
    // Filling the inputs and running the references is GPU work of the run.
    for (auto& w : workers) gpu_busy_s += w->last_setup_ms() / 1000;
    spdlog::info("GPU worker(s) ready: inputs filled, references computed ({:.0f} ms)",
                 workers.front()->last_setup_ms());
  };

  // ---- the run record
  RunInfo run;
  if (resumed) {
    run = *resumed;
    run.budget = o.budget;
    store.reopen_run(run.id, run.budget);
  } else {
    run.kernel = spec.name;
    run.spec_origin = spec.origin == "builtin" ? "builtin" : std::filesystem::absolute(o.kernel).string();
    run.spec_hash = spec.content_hash();
    run.spec_text = spec.spec_text;
    run.problems = problems;
    run.dtype = to_string(problems.front().dtype);
    run.strategy = o.strategy;
    run.seed = o.seed;
    run.budget = o.budget;
    run.elites_k = o.elites;
    nlohmann::json opts = {{"command_line", o.command_line},
                           {"timing", o.timing},
                           {"timeout_floor_s", o.timeout_floor_s},
                           {"abort_factor", o.abort_factor},
                           {"retime_rounds", o.retime_rounds},
                           {"retime_ms", o.retime_ms},
                           {"sanitize", sanitize.mode},
                           {"check_shapes", static_cast<int>(all_problems.size() - problems.size())},
                           {"compile_threads", threads},
                           {"gpus", static_cast<int>(std::max<size_t>(o.gpus.size(), 1))}};
    if (replay) opts["replay"] = std::filesystem::absolute(o.replay_path).string();
    run.options_json = opts.dump();
    run.device = rec;
    run.evotune_version = EVOTUNE_VERSION;
    run.status = "running";
    run.compile_only = o.compile_only;
    run.id = store.create_run(run);
  }
  const int budget = run.budget;
  {
    std::string where = replay          ? rec.name + " (replayed from " + o.replay_path + ")"
                        : !gpus.empty() ? rec.name + " (" + o.arch + ")"
                                        : o.arch + " (compile only)";
    out << "run " << run.id << ": " << spec.name << " on " << where << ", " << problems.size() << " problem(s) + "
        << all_problems.size() - problems.size() << " check shape(s), " << o.strategy << " seed " << o.seed
        << ", budget " << budget << (resumed ? strfmt(" (%d done)", spent) : "") << ", " << threads
        << " compile thread(s), db " << o.db_path << std::endl;
    if (!gpus.empty())
      out << "sanitizer gate: "
          << (sanitize.mode == "none"
                  ? (sanitize.note.empty() ? "off (--sanitize none)" : sanitize.note)
                  : join(spec.gates.sanitize, "+") + " on " +
                        (sanitize.mode == "all" ? "every correct trial" : "the elites") + " (" + sanitize.path + ")")
          << std::endl;
  }

  // ---- the pipeline
  RunStats stats = run.stats;
  stats.compile_threads = static_cast<int>(threads);

  auto compile_candidate = [&spec, &all_problems, &o, dev, &stop, &compiler](const Config& cfg) {
    CompiledCandidate cc;
    std::map<std::string, int> by_key;
    for (const Problem& p : all_problems) {
      if (stop.load()) return cc;
      // A define that cannot be evaluated is the spec's fault (SpecError):
      // it stops the run.
      const std::vector<std::pair<std::string, std::string>> defs = spec.compile_defines(cfg, p, dev);
      std::string key = defines_key(defs);
      auto it = by_key.find(key);
      if (it == by_key.end()) {
        CompileRequest r = base_request(spec, o.arch);
        r.defines = defs;
        CompileResult res = compiler.compile(r);
        cc.compile_ms += res.cache_hit ? 0 : res.compile_ms;
        cc.cache_hit = cc.cache_hit && res.cache_hit;
        it = by_key.emplace(key, static_cast<int>(cc.cubins.size())).first;
        cc.cubins.push_back(std::move(res));
      }
      cc.problem_cubin.push_back(it->second);
    }
    return cc;
  };

  // Compile results → a trial that failed a gate, or launch plans for the GPU.
  auto prepare = [&](Entry& e) {
    e.prepared = true;
    Trial t;
    t.config = e.config;
    if (replay) {
      // Recorded results stand in for the compiler and the GPU; those that
      // reached the GPU go through the same dispatch as live ones.
      e.recorded = replay->find(e.config);
      if (!e.recorded) {
        t.status = TrialStatus::invalid;
        t.error = "not in the replay dataset " + o.replay_path;
        e.trial = t;
      } else if (!needs_gpu(e.recorded->status)) {
        t = *e.recorded;
        t.id = 0;
        t.seq = 0;
        if (o.replay_warm_cache) t.compile_ms = 0, t.cache_hit = true;
        e.trial = t;
      }
      return;
    }
    if (e.invalid) {
      t.status = TrialStatus::invalid;
      t.error = *e.invalid;
      e.trial = t;
      return;
    }
    const CompiledCandidate& cc = e.cc;
    t.compile_ms = cc.compile_ms;
    t.cache_hit = cc.cache_hit && !cc.cubins.empty();
    t.res = worst_resources(cc);
    auto failed = std::find_if(cc.cubins.begin(), cc.cubins.end(), [](const CompileResult& r) { return !r.ok; });
    if (failed != cc.cubins.end() || cc.problem_cubin.size() != all_problems.size()) {
      t.status = TrialStatus::compile_error;
      t.error = failed != cc.cubins.end() ? failed->log : "compilation was cancelled";
      e.trial = t;
      return;
    }
    // Resource gate, per problem (dynamic shared memory can depend on it).
    for (size_t i = 0; i < all_problems.size(); ++i) {
      // Geometry the spec cannot evaluate for this config is the spec's
      // fault (SpecError, exit 2), not the candidate's.
      e.launches.push_back(planner.launch(e.config, all_problems[i], cc.problem_cubin[i]));
      Resources r = cc.cubins[static_cast<size_t>(cc.problem_cubin[i])].res;
      r.smem_dynamic = static_cast<int>(e.launches.back().dims.smem);
      t.res.smem_dynamic = std::max(t.res.smem_dynamic, r.smem_dynamic);
      if (auto why = spec.gate_reason(r, e.config, all_problems[i], dev)) {
        t.status = TrialStatus::resource_rejected;
        t.error = *why;
        break;
      }
      if (!gpus.empty() && r.smem_total() > gpus.front().smem_optin) {
        t.status = TrialStatus::resource_rejected;
        t.error = strfmt("%d bytes of shared memory > %lld the device allows per block", r.smem_total(),
                         gpus.front().smem_optin);
        break;
      }
    }
    // Gated out, or a compile-only run: finished. Otherwise on to the GPU.
    if (t.status != TrialStatus::ok || o.compile_only) e.trial = t;
  };

  auto make_request = [&](const Entry& e) {
    EvalRequest req;
    for (const auto& r : e.cc.cubins) req.cubins.push_back(r.cubin);
    req.launches = e.launches;
    const Trial* best = population.best();
    for (size_t i = 0; i < all_problems.size(); ++i) {
      double a = 0;
      if (best && i < best->per_problem.size() && timed[i] && o.abort_factor > 0)
        a = o.abort_factor * best->per_problem[i].p50_us;
      req.abort_us.push_back(a);
    }
    return req;
  };
  auto time_limit = [&]() {
    const Trial* best = population.best();
    double limit = o.timeout_floor_s;
    if (best) limit = std::max(limit, o.timeout_factor * (best->verify_ms + best->bench_ms) / 1000.0);
    return limit;
  };

  std::vector<bool> worker_busy;  // one per GPU worker (or replay's virtual GPU); sized once they exist
  auto dispatch = [&](Entry& e, int w) {
    spdlog::debug("GPU {}: evaluating {}", w, e.config.canonical());
    e.worker = w;
    worker_busy[static_cast<size_t>(w)] = true;
    e.gpu_start = Clock::now();
    auto done = std::make_shared<std::promise<EvalReply>>();
    e.gpu = done->get_future();
    if (e.recorded) {
      EvalReply r;
      r.status = e.recorded->status;
      r.error = e.recorded->error;
      r.per_problem = e.recorded->per_problem;
      r.verify_ms = e.recorded->verify_ms;
      r.bench_ms = e.recorded->bench_ms;
      done->set_value(r);
      return;
    }
    WorkerClient* client = workers[static_cast<size_t>(w)].get();
    const SanitizerGate* every = sanitize.mode == "all" && gate ? &*gate : nullptr;
    e.gpu_task =
        std::async(std::launch::async, [client, done, &wake, every, req = make_request(e), limit = time_limit()] {
          try {
            EvalReply r = client->evaluate(req, limit);
            if (every && r.status == TrialStatus::ok) {
              auto t0 = Clock::now();
              if (auto f = every->check(req, client->device(), sanitizer_limit(limit))) {
                r.status = f->status;
                r.error = f->report;
              }
              r.verify_ms += 1000 * seconds_since(t0);
            }
            done->set_value(r);
          } catch (...) {
            done->set_exception(std::current_exception());
          }
          wake.notify();
        });
  };
  auto finish_gpu = [&](Entry& e) {
    EvalReply rep = e.gpu.get();
    double elapsed = seconds_since(e.gpu_start);
    spdlog::debug("GPU {}: {} after {:.2f} s", e.worker, to_string(rep.status), elapsed);
    worker_busy[static_cast<size_t>(e.worker)] = false;
    if (e.recorded) {  // replay: the simulated clock accounts for the GPU
      Trial t = *e.recorded;
      t.id = 0;
      t.seq = 0;
      t.device = e.worker;
      if (o.replay_warm_cache) t.compile_ms = 0, t.cache_hit = true;
      e.trial = t;
      return;
    }
    gpu_busy_s += elapsed;
    Trial t;
    t.config = e.config;
    t.compile_ms = e.cc.compile_ms;
    t.cache_hit = e.cc.cache_hit;
    t.res = worst_resources(e.cc);
    for (const LaunchPlan& l : e.launches)
      t.res.smem_dynamic = std::max(t.res.smem_dynamic, static_cast<int>(l.dims.smem));
    t.device = gpus[static_cast<size_t>(e.worker)].ordinal;
    t.status = rep.status;
    t.error = rep.error;
    t.verify_ms = rep.verify_ms;
    t.bench_ms = rep.bench_ms;
    if (t.ok() && sanitize.mode == "all" && gate) t.sanitized = join(gate->tools(), ",");
    // A timeout or a dead worker reports no times: charge the wall time.
    if (t.verify_ms + t.bench_ms <= 0) t.verify_ms = elapsed * 1000;
    // Keep the run's own problems; check shapes are a gate, not a result.
    for (size_t i = 0; i < rep.per_problem.size() && i < problems.size(); ++i)
      t.per_problem.push_back(rep.per_problem[i]);
    if (t.ok()) {
      std::vector<double> p50s;
      for (const auto& m : t.per_problem) p50s.push_back(m.p50_us);
      t.fitness = geomean(p50s);
    }
    e.trial = t;
    e.cc = CompiledCandidate{};  // cubins are no longer needed
  };

  // Replay: a simulated clock of the same pipeline (compile slots, GPUs in
  // order, a window of proposals ahead of the observations).
  double sim_now = 0;
  std::vector<double> sim_compile_free(threads, 0.0);
  std::vector<double> sim_gpu_free(std::max<size_t>(o.gpus.size(), 1), 0.0);
  auto simulate = [&](const Entry& e, const Trial& t) {
    auto slot = std::min_element(sim_compile_free.begin(), sim_compile_free.end());
    double cstart = std::max(e.sim_proposed, *slot);
    double cend = cstart + t.compile_ms / 1000.0;
    *slot = cend;
    double finish = cend;
    if (needs_gpu(t.status)) {
      auto g = std::min_element(sim_gpu_free.begin(), sim_gpu_free.end());
      double gstart = std::max(cend, *g);
      *g = gstart + (t.verify_ms + t.bench_ms) / 1000.0;
      finish = *g;
      gpu_busy_s += (t.verify_ms + t.bench_ms) / 1000.0;
    }
    sim_now = std::max(sim_now, finish);
  };

  std::deque<Entry> entries;
  // A run that ends by an exception (a spec error found on a config mid-run,
  // the GPU set-up or a tool failing) is recorded as failed; its trials stay.
  // In-flight work is let finish first: nothing of it is recorded.
  struct OnUnwind {
    std::function<void()> action;
    int uncaught = std::uncaught_exceptions();
    ~OnUnwind() {
      if (std::uncaught_exceptions() <= uncaught) return;
      try {
        action();
      } catch (...) {  // the exception already unwinding is the one to report
      }
    }
  } failed_on_unwind{[&] {
    stop.store(true);
    for (Entry& e : entries) {
      if (e.compiled.valid()) e.compiled.wait();
      if (e.gpu_task.valid()) e.gpu_task.wait();
    }
    stop.store(false);
    store.finish_run(run.id, "failed", stats);
  }};
  size_t next_seed = 0;
  int proposed = 0;
  bool exhausted = false;
  // Proposals run up to `window` ahead of the observations. Results are
  // recorded in proposal order (a seed gives the same run on any number of
  // GPUs), so a slow compile at the front holds back the finished entries
  // behind it; while it does and the compile pool runs short of work, up to
  // twice the window is let in flight (live runs: replay has no compiles).
  auto compiling = [&] {
    return std::count_if(entries.begin(), entries.end(),
                         [&](const Entry& e) { return e.compiled.valid() && !ready(e.compiled); });
  };
  auto refill = [&] {
    while (spent + proposed < budget && !stop.load()) {
      const auto n = static_cast<long>(entries.size());
      if (n >= window && (replay || n >= 2L * window || compiling() >= static_cast<long>(threads))) break;
      Entry e;
      e.sim_proposed = sim_now;
      if (next_seed < seeds.size()) {
        e.config = seeds[next_seed++];
        strategy->mark_seen(e.config);
        e.invalid = space.invalid_reason(e.config);
      } else {
        std::optional<Config> c = strategy->propose();
        if (!c) {
          exhausted = true;
          return;
        }
        e.config = *c;
      }
      if (!e.invalid) ++proposed;
      if (!e.invalid && !replay) {
        auto done = std::make_shared<std::promise<CompiledCandidate>>();
        e.compiled = done->get_future();
        pool.submit([done, cfg = e.config, &compile_candidate, &wake] {
          try {
            spdlog::debug("compiling {}", cfg.canonical());
            done->set_value(compile_candidate(cfg));
          } catch (...) {
            done->set_exception(std::current_exception());
          }
          wake.notify();
        });
      }
      entries.push_back(std::move(e));
    }
  };

  std::vector<int> counts(all_statuses().size(), 0);
  for (const Trial& t : previous) ++counts[static_cast<size_t>(t.status)];
  int recorded = 0;

  auto record = [&](Entry& e) {
    Trial t = *e.trial;
    if (replay) simulate(e, t);
    if (!e.invalid) --proposed;  // an invalid user config was never counted as proposed
    if (t.status != TrialStatus::invalid) ++spent;
    if (t.cache_hit) ++stats.cache_hits;
    stats.compile_busy_s += t.compile_ms / 1000;
    stats.verify_s += t.verify_ms / 1000;
    stats.bench_s += t.bench_ms / 1000;
    stats.trials = spent;
    stats.invalid_draws = strategy->invalid_draws();
    double wall = replay ? sim_now : seconds_since(t_start);
    stats.wall_s = run.stats.wall_s + wall;
    stats.gpu_idle_s =
        run.stats.gpu_idle_s +
        (workers.empty() && !replay ? 0 : std::max(0.0, wall * std::max<size_t>(workers.size(), 1) - gpu_busy_s));
    // Offered before recording, so the stored elites include this trial (its
    // id, unknown until the insert, is 0 in the list the store receives).
    t.seq = static_cast<int>(previous.size()) + ++recorded;
    population.offer(t);
    store.record_trial(run.id, t, population.elite_ids());
    population.assign_id(t.config, t.id, t.seq);
    strategy->observe(t);
    ++counts[static_cast<size_t>(t.status)];
    if (t.config == default_config && !default_trial) {
      default_trial = t;
      store.set_default_trial(run.id, t.id);
    }
    store.update_stats(run.id, stats);
    if (!o.quiet) {
      const Trial* best = population.best();
      std::string detail;
      if (t.ok()) {
        if (o.compile_only)
          detail = strfmt("regs %3d  smem %7s  spills %d", t.res.registers, fmt_kib(t.res.smem_total()).c_str(),
                          t.res.spill_bytes());
        else
          detail =
              strfmt("p50 %9s µs   best %9s µs", fmt_us(t.fitness).c_str(), best ? fmt_us(best->fitness).c_str() : "-");
      } else {
        detail = t.status == TrialStatus::compile_error ? first_error(t.error) : first_lines(t.error, 1);
        if (detail.size() > 110) detail = detail.substr(0, 107) + "...";
      }
      std::string dev_tag = workers.size() > 1 && t.device >= 0 ? strfmt("  [gpu %d]", t.device) : "";
      out << strfmt("[%3d/%d] %-17s %s  %s%s%s", spent, budget, to_string(t.status).c_str(), detail.c_str(),
                    t.config.canonical().c_str(), t.cache_hit ? "  (cached)" : "", dev_tag.c_str())
          << std::endl;
    }
  };

  refill();
  start_workers();
  worker_busy.assign(replay ? std::max<size_t>(o.gpus.size(), 1) : workers.size(), false);
  if (sanitize.mode != "none") gate.emplace(sanitize.path, exe, setup, sanitizer_problems(timed), spec.gates.sanitize);
  while (!entries.empty() && !stop.load()) {
    const uint64_t seen = wake.events();
    bool progressed = false;
    for (Entry& e : entries) {
      if (stop.load()) break;
      if (e.trial) continue;
      if (!e.prepared) {
        if (e.compiled.valid() && !ready(e.compiled)) continue;
        if (e.compiled.valid()) e.cc = e.compiled.get();
        prepare(e);
        progressed = true;
        if (e.trial) continue;
      }
      if (e.worker < 0) {
        auto free_w = std::find(worker_busy.begin(), worker_busy.end(), false);
        if (free_w != worker_busy.end()) {
          dispatch(e, static_cast<int>(free_w - worker_busy.begin()));
          progressed = true;
        }
      } else if (ready(e.gpu)) {
        finish_gpu(e);
        progressed = true;
      }
    }
    while (!entries.empty() && entries.front().trial && !stop.load()) {
      record(entries.front());
      entries.pop_front();
      refill();  // after each observation, as the strategy expects
      progressed = true;
    }
    const size_t before = entries.size();
    refill();
    progressed = progressed || entries.size() != before;
    if (!progressed) wake.wait(seen);  // until a compile or an evaluation finishes
  }
  bool interrupted = stop.load();
  // Abandon whatever is still in flight: nothing of it was recorded. GPU
  // evaluations are let finish (their futures must not be dropped running).
  stop.store(true);
  for (Entry& e : entries) {
    if (e.compiled.valid()) e.compiled.wait();
    if (e.gpu_task.valid()) e.gpu_task.wait();
  }
  entries.clear();
  stop.store(false);

  // An elite on its way to the GPU again: compiled (from the cache), gated,
  // planned. e.trial is set when it no longer passes the gates.
  auto stage = [&](const Config& c) {
    Entry e;
    e.config = c;
    e.cc = compile_candidate(c);
    prepare(e);
    return e;
  };

  // ---- the elites under compute-sanitizer: a finding drops one, the next
  // moves up. Each round checks every elite not checked yet, all at once.
  if (!interrupted && gate && sanitize.mode == "elites") {
    const auto t0 = Clock::now();
    int checked = 0, rejected = 0;
    std::set<int64_t> seen;
    try {
      for (;;) {
        std::vector<Trial> round;
        std::vector<EvalRequest> reqs;
        for (const Trial& t : population.elites()) {
          if (!t.sanitized.empty() || !seen.insert(t.id).second) continue;
          Entry e = stage(t.config);
          if (e.trial) continue;  // no longer passes the gates: nothing to check
          round.push_back(t);
          reqs.push_back(make_request(e));
        }
        if (round.empty()) break;
        const auto t1 = Clock::now();
        auto findings = gate->check_all(reqs, gpus.front().ordinal, sanitizer_limit(time_limit()));
        gpu_busy_s += seconds_since(t1);
        checked += static_cast<int>(round.size());
        for (size_t i = 0; i < round.size(); ++i) {
          const Trial& t = round[i];
          const std::optional<SanitizerFinding>& f = findings[i];
          if (!f) {
            store.record_sanitized(t.id, join(gate->tools(), ","));
            continue;
          }
          ++rejected;
          population.remove(t.config);
          store.record_sanitizer_finding(run.id, t.id, f->status, f->report, population.elite_ids());
          --counts[static_cast<size_t>(TrialStatus::ok)];
          ++counts[static_cast<size_t>(f->status)];
          if (default_trial && default_trial->id == t.id) default_trial->status = f->status;
          if (!o.quiet)
            out << strfmt("sanitizer: trial %d is %s: %s", t.seq, to_string(f->status).c_str(),
                          first_lines(f->report, 1).substr(0, 160).c_str())
                << std::endl;
        }
      }
    } catch (const EngineError& err) {
      if (sanitize.asked) throw;
      out << "sanitizer gate failed, the remaining elites are not sanitized (--sanitize none skips it): "
          << first_lines(err.what(), 3) << std::endl;
    }
    if (!o.quiet)
      out << strfmt("sanitizer gate (%s): %d elite(s) checked, %d rejected, %.1f s", join(gate->tools(), "+").c_str(),
                    checked, rejected, seconds_since(t0))
          << std::endl;
  }

  // ---- the final elites, re-timed interleaved so noise does not crown a winner
  if (!interrupted && !workers.empty() && o.retime_rounds > 0 && population.elites().size() >= 2) {
    std::vector<Trial> el = population.elites();
    std::vector<Entry> staged;
    bool ok = true;
    for (size_t i = 0; i < el.size() && ok; ++i) {
      staged.push_back(stage(el[i].config));
      ok = !staged.back().trial;  // must pass the gates again
    }
    if (ok) {
      if (!o.quiet)
        out << "\nre-timing the " << el.size() << " elites interleaved, " << o.retime_rounds << " rounds"
            << (o.retime_ms > 0 ? strfmt(", each under sustained load (%.0f ms warm-up + %.0f ms)", o.retime_ms,
                                         o.retime_ms)
                                : std::string())
            << "..." << std::endl;
      std::vector<RetimeSample> samples;
      std::map<int64_t, std::vector<std::vector<double>>> p50s;  // trial → problem → rounds
      for (int round = 1; round <= o.retime_rounds; ++round) {
        for (size_t i = 0; i < el.size(); ++i) {
          EvalRequest req = make_request(staged[i]);
          std::fill(req.abort_us.begin(), req.abort_us.end(), 0.0);
          if (o.retime_ms > 0)
            req.sustained = {o.retime_ms, o.retime_ms, std::max(o.timing.max_samples, 2000)};
          auto t0 = Clock::now();
          const double sustained_s = 3e-3 * o.retime_ms * static_cast<double>(problems.size());
          EvalReply rep = workers.front()->evaluate(req, time_limit() + sustained_s);
          gpu_busy_s += seconds_since(t0);
          if (rep.status != TrialStatus::ok) continue;  // a flaky elite keeps its search-time result
          auto& v = p50s[el[i].id];
          v.resize(problems.size());
          for (size_t p = 0; p < problems.size() && p < rep.per_problem.size(); ++p) {
            v[p].push_back(rep.per_problem[p].p50_us);
            samples.push_back({round, el[i].id, static_cast<int>(p), rep.per_problem[p].p50_us});
          }
        }
        if (!o.quiet) out << strfmt("  round %d/%d done\n", round, o.retime_rounds) << std::flush;
      }
      std::vector<std::pair<int64_t, double>> finals;
      for (const Trial& e : el) {
        auto it = p50s.find(e.id);
        if (it == p50s.end()) continue;
        std::vector<double> med;
        for (size_t p = 0; p < problems.size(); ++p) {
          std::vector<double> v = it->second[p];
          // The search's own measurement is one sample more, unless the
          // re-timing ran sustained: the search timed at other clocks.
          if (o.retime_ms <= 0) v.push_back(e.per_problem[p].p50_us);
          med.push_back(median(v));
        }
        finals.emplace_back(e.id, geomean(med));
      }
      // An elite that failed every re-timing keeps its search-time result;
      // after a sustained re-timing that result (boost clocks) is not
      // comparable, so it ranks after every re-timed one.
      auto final_of = [&](const Trial& t) {
        for (const auto& [id, us] : finals)
          if (id == t.id) return us;
        return o.retime_ms > 0 ? std::numeric_limits<double>::infinity() : t.fitness;
      };
      std::stable_sort(el.begin(), el.end(), [&](const Trial& a, const Trial& b) { return final_of(a) < final_of(b); });
      std::vector<int64_t> order;
      for (const Trial& e : el) order.push_back(e.id);
      store.record_retime(run.id, samples, finals, order);
    }
  }

  const double total = replay ? sim_now : seconds_since(t_start);
  const double n_gpus = static_cast<double>(std::max<size_t>(workers.size(), 1));
  stats.wall_s = run.stats.wall_s + total;
  stats.gpu_idle_s = workers.empty() && !replay ? 0 : run.stats.gpu_idle_s + std::max(0.0, total * n_gpus - gpu_busy_s);
  const double gpu_capacity = total * n_gpus;
  std::string status = interrupted ? "interrupted" : "done";
  store.finish_run(run.id, status, stats);

  TuneResult result;
  result.run = *store.run(run.id);
  result.elites = store.elites(run.id);
  result.default_trial = default_trial;
  result.status_counts = counts;
  result.interrupted = interrupted;
  // This session's shares (a resumed run's earlier sessions are not counted).
  result.gpu_busy = gpu_capacity > 0 && (!workers.empty() || replay) ? std::min(1.0, gpu_busy_s / gpu_capacity) : 0;
  result.compile_busy =
      total > 0 ? std::min(1.0, (stats.compile_busy_s - run.stats.compile_busy_s) / (total * threads)) : 0;
  {  // the summary, also with -q
    out << "\n";
    std::vector<std::string> parts;
    for (TrialStatus s : all_statuses())
      if (counts[static_cast<size_t>(s)] > 0)
        parts.push_back(to_string(s) + " " + std::to_string(counts[static_cast<size_t>(s)]));
    out << strfmt("run %lld %s: %d trials in %.1f s%s (%s)%s\n", static_cast<long long>(run.id), status.c_str(), spent,
                  stats.wall_s, replay ? " simulated" : "", join(parts, ", ").c_str(),
                  exhausted ? "; the space is exhausted" : "");
    if (!workers.empty() || replay)
      out << strfmt(
          "time: GPU busy %.0f%% (verify %.1f s, bench %.1f s), compile pool busy %.0f%% (%.1f s over %u threads, %d "
          "cache hits), %.1f trials/min\n",
          100 * result.gpu_busy, stats.verify_s, stats.bench_s, 100 * result.compile_busy, stats.compile_busy_s,
          threads, stats.cache_hits, stats.wall_s > 0 ? spent / (stats.wall_s / 60) : 0.0);
    if (interrupted) out << "resume with: evotune run --resume " << run.id << " --db " << o.db_path << "\n";
    if (!result.elites.empty() && !o.compile_only) {
      out << "\nelite population (top " << o.elites << "):\n";
      print_elites(out, result.run, result.elites, default_trial, &spec);
      if (default_trial && default_trial->ok())
        out << "\ndefault config: " << fmt_us(default_trial->fitness) << " µs (trial " << default_trial->seq << ")\n";
      else
        out << "\n(the default config was not measured ok; no speedup over it)\n";
    }
  }
  return result;
}

}  // namespace evotune
