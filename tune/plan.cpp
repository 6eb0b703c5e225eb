#include "tune/plan.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compiler.hpp"
#include "engine/sanitizer.hpp"
#include "kernel_templates/registry.hpp"

namespace evotune {

namespace {

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
  if (o.kernel.empty()) o.kernel = r.kernel_ref();
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
  // A dataset recorded before the kernel gained an optional dimension (a
  // layout option such as TB) measured its default: the problems are
  // completed as a given problem would be.
  std::vector<Problem> problems = d.problems;
  for (Problem& p : problems) spec.check_problem(p);
  const std::vector<std::string> has = canonical_sorted(problems);
  for (const Problem& p : given_problems(o, spec, dtype))
    if (!std::binary_search(has.begin(), has.end(), p.canonical()))
      throw UsageError("dataset " + o.replay_path + " has no measurements for " + p.canonical());
  return problems;
}

// --gpus in a replay, where there are no devices to name: how many to simulate.
int simulated_gpus(const std::string& arg) {
  if (arg.empty()) return 1;
  auto n = parse_int(arg);
  if (!n || *n < 1 || *n > 1024)
    throw UsageError("--gpus " + arg + ": with --replay, the number of GPUs to simulate (1 to 1024)");
  return static_cast<int>(*n);
}

// --gpus on a GPU host: "all" or ordinals like 0,1; default --device.
std::vector<int> gpu_ordinals(const TuneOptions& o) {
  const std::string& arg = o.gpus;
  if (arg.empty()) return {o.device};
  std::vector<int> ids;
  if (arg == "all") {
    DeviceQuery q = query_devices();
    if (q.devices.empty()) throw NoDeviceError("--gpus all: no CUDA device found: " + q.reason);
    for (const auto& d : q.devices) ids.push_back(d.ordinal);
    return ids;
  }
  for (const auto& part : split(arg, ',')) {
    auto v = parse_int(trim(part));
    if (!v || *v < 0) throw UsageError("--gpus '" + arg + "': expected all, or ordinals like 0,1");
    ids.push_back(static_cast<int>(*v));
  }
  return ids;
}

// User-given configs, parsed now (a typo must not leave a run behind), with
// the template's defaults for the parameters they leave out. A config is
// evaluated (and stored) once per run: one given twice, or one a resumed run
// already has, is not evaluated again.
std::vector<Config> seed_configs(const TuneOptions& o, const KernelSpec& spec, const std::vector<Trial>& previous) {
  std::set<std::string> have;
  for (const Trial& t : previous) have.insert(t.config.canonical());
  std::vector<Config> out;
  for (const auto& text : o.seed_configs) {
    Config c = Config::parse(text);
    for (const auto& [name, value] : c.values)
      if (!spec.find_param(name))
        throw UsageError("--config " + text + ": kernel " + spec.name + " has no parameter " + name);
    for (const auto& p : spec.params) c.values.emplace(p.name, p.default_value);
    if (have.insert(c.canonical()).second)
      out.push_back(std::move(c));
    else
      spdlog::warn("--config {}: already in this run, evaluated once", c.canonical());
  }
  return out;
}

// A replay: the dataset's device stands in for a GPU.
void plan_replay(TunePlan& p) {
  p.device = p.replay->device;
  p.dev.cc = p.device.cc > 0 ? p.device.cc : 90;
  p.dev.num_sms = p.device.num_sms > 0 ? p.device.num_sms : DeviceTraits::for_arch(p.dev.cc).num_sms;
  p.arch = p.device.arch;
  p.slots = simulated_gpus(p.options.gpus);
}

// Compile-only: the target architecture given, or this machine's GPU's.
void plan_compile_only(TunePlan& p) {
  std::string arch = p.options.arch;
  if (arch.empty()) {
    DeviceQuery q = query_devices();
    if (q.devices.empty())
      throw UsageError("--compile-only needs --arch (e.g. --arch sm_90a) on a machine without a GPU");
    arch = arch_for(q.devices[0].cc, p.spec.arch_specific);
  }
  auto [cc, specific] = parse_arch(arch);
  p.dev = DeviceTraits::for_arch(cc);
  if (p.spec.arch_specific && !specific && cc >= 90) arch = arch_for(cc, true);
  p.arch = arch;
  p.device.arch = arch;
  p.device.cc = cc;
}

// A GPU run: the devices asked for, of one architecture.
void plan_gpus(TunePlan& p) {
  const std::vector<int> ids = gpu_ordinals(p.options);
  DeviceQuery q = query_devices();
  if (q.devices.empty())
    throw NoDeviceError(
        "no CUDA device found: " + q.reason +
        ". `evotune run --compile-only --arch sm_90a ...` compiles and checks resources without a GPU.");
  for (int id : ids) {
    if (id < 0 || id >= static_cast<int>(q.devices.size()))
      throw UsageError(strfmt("GPU %d: this machine has %zu CUDA device(s)", id, q.devices.size()));
    p.gpus.push_back(q.devices[static_cast<size_t>(id)]);
    if (p.gpus.back().cc != p.gpus.front().cc)
      throw UsageError("--gpus: " + p.gpus.front().name + " and " + p.gpus.back().name +
                       " differ in architecture; tune on GPUs of one kind");
  }
  const DeviceInfo& g = p.gpus.front();
  p.dev.cc = g.cc;
  p.dev.num_sms = g.num_sms;
  p.arch = arch_for(g.cc, p.spec.arch_specific);
  p.slots = static_cast<int>(p.gpus.size());
  p.device.name = g.name + (p.gpus.size() > 1 ? strfmt(" x%zu", p.gpus.size()) : "");
  p.device.uuid = g.uuid;
  p.device.cc = g.cc;
  p.device.num_sms = g.num_sms;
  p.device.driver_version = g.driver_version;
  p.device.runtime_version = g.runtime_version;
  p.device.arch = p.arch;
}

SanitizePlan plan_sanitizer(const TuneOptions& o, const KernelSpec& spec) {
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

}  // namespace

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("evotune") : p.string();
}

int evaluated(const std::vector<Trial>& trials) {
  return static_cast<int>(
      std::count_if(trials.begin(), trials.end(), [](const Trial& t) { return t.status != TrialStatus::invalid; }));
}

int TunePlan::spent() const {
  return evaluated(previous);
}

TunePlan resolve_plan(TuneOptions o) {
  TunePlan p;
  // The run being resumed, if any: its own values stand in for those left out.
  if (o.resume_run > 0) {
    Store store = Store::open(o.db_path);
    p.resumed = store.run(o.resume_run);
    if (!p.resumed) throw UsageError("no run " + std::to_string(o.resume_run) + " in " + o.db_path);
    p.previous = store.trials(p.resumed->id);
    adopt_resumed_run(o, *p.resumed, evaluated(p.previous));
  }
  // A replay dataset stands in for the GPU.
  if (!o.replay_path.empty()) {
    p.replay = std::make_shared<const Dataset>(read_dataset(o.replay_path));
    if (o.kernel.empty()) o.kernel = p.replay->kernel;
  }
  p.backend = p.replay ? Backend::replay : o.compile_only ? Backend::compile_only : Backend::gpu;

  if (o.kernel.empty()) throw UsageError("no kernel given (--kernel NAME or a spec file path)");
  p.spec = load_kernel(o.kernel);
  p.problems = p.resumed  ? resumed_problems(o, p.spec, *p.resumed)
               : p.replay ? replayed_problems(o, p.spec, *p.replay)
                          : new_problems(o, p.spec);
  p.seeds = seed_configs(o, p.spec, p.previous);
  if (o.budget <= 0) throw UsageError("--budget must be at least 1");
  if (o.elites <= 0) throw UsageError("--elites must be at least 1");
  p.options = o;

  p.device.nvrtc_version = nvrtc_version();
  if (p.backend == Backend::replay)
    plan_replay(p);
  else if (p.backend == Backend::compile_only)
    plan_compile_only(p);
  else
    plan_gpus(p);
  if (p.dev.cc < p.spec.min_cc || (p.spec.max_cc > 0 && p.dev.cc > p.spec.max_cc))
    throw UsageError(strfmt("kernel %s runs on compute capability %d%s, not on %s (cc %d)", p.spec.name.c_str(),
                            p.spec.min_cc, p.spec.max_cc > 0 ? strfmt("..%d", p.spec.max_cc).c_str() : "+",
                            p.gpus.empty() ? p.arch.c_str() : p.gpus.front().name.c_str(), p.dev.cc));
  if (!p.gpu() && !o.sanitize.empty() && o.sanitize != "none")
    throw UsageError("--sanitize " + o.sanitize + " needs a GPU run (not --compile-only or --replay)");
  if (p.gpu()) p.sanitize = plan_sanitizer(o, p.spec);

  // The run's problems are timed; check shapes are verified only.
  p.all_problems = p.problems;
  p.timed.assign(p.problems.size(), true);
  for (Problem& cs : p.spec.check_problems(p.problems)) {
    p.all_problems.push_back(std::move(cs));
    p.timed.push_back(false);
  }
  p.compile_threads = o.compile_threads > 0 ? static_cast<unsigned>(o.compile_threads)
                                            : std::max(1u, std::thread::hardware_concurrency());
  p.window = o.window > 0 ? o.window : static_cast<int>(std::max(4u, 2 * p.compile_threads));
  p.exe = o.worker_exe.empty() ? self_exe() : o.worker_exe;
  return p;
}

}  // namespace evotune
