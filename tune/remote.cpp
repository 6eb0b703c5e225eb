#include "tune/remote.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compile_cache.hpp"
#include "engine/device_info.hpp"
#include "tune/compiling.hpp"
#include "tune/gpu_pool.hpp"
#include "tune/replay.hpp"

namespace evotune {

namespace {

using nlohmann::json;

Message message(json header, std::vector<std::string> blobs = {}) {
  return Message{std::move(header), std::move(blobs)};
}

std::string op_of(const Message& m) {
  return m.header.value("op", std::string());
}

// What a run tunes for: the GPU model (a replay: its dataset's).
json gpu_model(const TunePlan& plan) {
  const std::string name = plan.gpus.empty() ? plan.device.name : plan.gpus.front().name;
  return {{"name", name}, {"cc", plan.dev.cc}};
}

std::string describe(const json& model) {
  return strfmt("%s (compute capability %d)", model.value("name", std::string("?")).c_str(), model.value("cc", 0));
}

// A rank's own evaluator for rank 0's plan: its GPUs, or a replay of
// `slots` simulated GPUs here.
std::unique_ptr<Evaluator> local_evaluator(const TunePlan& plan, int slots) {
  switch (plan.backend) {
    case Backend::replay:
      return std::make_unique<ReplayLookup>(plan, slots);
    case Backend::compile_only:
      return std::make_unique<CompileOnly>(plan);
    case Backend::gpu:
      break;
  }
  return std::make_unique<GpuPool>(plan);
}

// A rank's replay share of `total` simulated GPUs among `ranks` ranks.
int replay_share(int total, int ranks, int index) {
  return total / ranks + (index < total % ranks ? 1 : 0);
}

// Testing the loss of a rank: EVOTUNE_TEST_RANK_EXIT=RANK:N makes rank RANK
// kill itself when rank 0 sends it its Nth run, as a host lost mid-run.
int exit_at_run(int rank) {
  const char* v = std::getenv("EVOTUNE_TEST_RANK_EXIT");
  if (!v) return 0;
  const std::vector<std::string> parts = split(v, ':');
  if (parts.size() != 2 || parse_int(parts[0]) != rank) return 0;
  return static_cast<int>(parse_int(parts[1]).value_or(0));
}

template <typename T>
bool ready(const std::future<T>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

void put_job(Message& m, const Job& job) {
  m.header["trial"] = job.trial;
  m.header["launches"] = job.request.launches;
  m.header["abort_us"] = job.request.abort_us;
  m.header["sustained"] = job.request.sustained;
  m.blobs = job.request.cubins;
}

Job get_job(const Message& m) {
  Job job;
  job.trial = m.header.at("trial").get<Trial>();
  job.request.launches = m.header.at("launches").get<std::vector<LaunchPlan>>();
  job.request.abort_us = m.header.at("abort_us").get<std::vector<double>>();
  job.request.sustained = m.header.at("sustained").get<SustainedTiming>();
  job.request.cubins = m.blobs;
  return job;
}

namespace {

// A staging's outcome: the finished trial, or the job for a GPU.
void put_staged(Message& m, const Staged& s) {
  if (s.finished)
    m.header["finished"] = *s.finished;
  else
    put_job(m, s.job);
}

Staged get_staged(const Message& m) {
  Staged s;
  if (m.header.contains("finished"))
    s.finished = m.header.at("finished").get<Trial>();
  else
    s.job = get_job(m);
  return s;
}

}  // namespace

RemoteEvaluator::RemoteEvaluator(const TunePlan& plan, Cluster& cluster) : plan_(plan), cluster_(cluster) {
  if (plan.sanitize.mode == "all")
    throw UsageError(
        "--sanitize all: over MPI ranks, the sanitizer gate runs on the elites only (--sanitize elites, on rank 0's "
        "GPUs after the search)");
  send_plan();
  hear_ranks();
  for (const Rank& r : ranks_) slots_ += r.slots, compile_slots_ += r.compile_slots;
  if (slots_ == 0) throw EngineError("no rank has a GPU to evaluate on");
  spdlog::info("{} ranks evaluate: {} GPUs, {} compile processes", ranks_.size(), slots_, compile_slots_);
}

// The run as the ranks set it up: kernel, problems, dataset, and in a
// replay each rank's share of the simulated GPUs.
void RemoteEvaluator::send_plan() {
  const int workers = cluster_.size() - 1;
  for (int r = 1; r < cluster_.size(); ++r) {
    json h = {{"op", "plan"},
              {"kernel", plan_.options.kernel},
              {"problems", json::array()},
              {"dtype", to_string(plan_.problems.front().dtype)},
              {"replay", plan_.options.replay_path},
              {"slots", plan_.replay ? replay_share(plan_.slots, workers, r - 1) : -1}};
    for (const Problem& p : plan_.problems) h["problems"].push_back(p.canonical());
    cluster_.send(r, message(h));
  }
}

// Each rank's host, GPU model, GPUs and compile processes, once it is set up.
void RemoteEvaluator::hear_ranks() {
  const json model = gpu_model(plan_);
  ranks_.resize(static_cast<size_t>(cluster_.size() - 1));
  std::string failures;
  for (size_t heard = 0; heard < ranks_.size(); ++heard) {
    const Envelope e = cluster_.receive();
    const json& h = e.message.header;
    if (op_of(e.message) == "failed") {
      failures += strfmt("\n  rank %d (%s): %s", e.from, h.value("host", std::string("?")).c_str(),
                         h.value("error", std::string()).c_str());
      continue;
    }
    if (op_of(e.message) != "hello")
      throw EngineError(strfmt("rank %d said '%s' before hello", e.from, op_of(e.message).c_str()));
    Rank& r = ranks_.at(static_cast<size_t>(e.from - 1));
    r.rank = e.from;
    r.host = h.at("host").get<std::string>();
    r.slots = h.at("slots").get<int>();
    r.compile_slots = h.at("compile_slots").get<int>();
    gpus_ += h.at("gpus").get<int>();
    if (h.at("model") != model)
      throw UsageError(
          strfmt("rank %d (host %s) has %s, rank 0 has %s: a run tunes for one GPU model; start the job "
                 "on hosts of one kind (under Slurm, e.g. --gres=gpu:h200:N or --constraint)",
                 e.from, r.host.c_str(), describe(h.at("model")).c_str(), describe(model).c_str()));
  }
  if (!failures.empty()) throw EngineError("ranks could not set the run up:" + failures);
}

double RemoteEvaluator::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::future<Staged> RemoteEvaluator::stage(const Config& c, Wakeup&) {
  // The rank whose compile processes are the least busy.
  Rank* best = nullptr;
  for (Rank& r : ranks_)
    if (r.compile_slots > 0 && (!best || static_cast<double>(r.staging) / r.compile_slots <
                                             static_cast<double>(best->staging) / best->compile_slots))
      best = &r;
  if (!best) best = &ranks_.front();
  const uint64_t id = next_id_++;
  cluster_.send(best->rank, message({{"op", "stage"}, {"id", id}, {"config", c}}));
  ++best->staging;
  return stagings_[id].get_future();
}

std::future<Trial> RemoteEvaluator::run(Job job, int slot, const Limits& limits, Wakeup&) {
  int local = slot;
  for (const Rank& r : ranks_) {
    if (local >= r.slots) {
      local -= r.slots;
      continue;
    }
    const uint64_t id = next_id_++;
    Message m = message(
        {{"op", "run"}, {"id", id}, {"slot", local}, {"abort_us", limits.abort_us}, {"timeout_s", limits.timeout_s}});
    put_job(m, job);
    cluster_.send(r.rank, m);
    return runs_[id].get_future();
  }
  throw std::logic_error(strfmt("slot %d of %d", slot, slots_));
}

void RemoteEvaluator::wait(Wakeup& wake, uint64_t seen) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (wake.events() == seen && std::chrono::steady_clock::now() < until) {
    if (std::optional<Envelope> e = cluster_.poll())
      receive(*e, wake);
    else
      wake.wait(seen, std::chrono::milliseconds(1));
  }
}

const RemoteEvaluator::Rank& RemoteEvaluator::rank_of(int rank) const {
  return ranks_.at(static_cast<size_t>(rank - 1));
}

void RemoteEvaluator::receive(const Envelope& e, Wakeup& wake) {
  const json& h = e.message.header;
  const std::string op = op_of(e.message);
  if (op != "staged" && op != "ran" && op != "error")
    throw EngineError(strfmt("rank %d sent '%s' mid-run", e.from, op.c_str()));
  const std::exception_ptr failure =
      op == "error"
          ? std::make_exception_ptr(EngineError(strfmt("rank %d (%s): %s", e.from, rank_of(e.from).host.c_str(),
                                                       h.value("error", std::string()).c_str())))
          : nullptr;
  if (failure && !h.contains("id")) std::rethrow_exception(failure);  // the rank itself failed
  const uint64_t id = h.value("id", uint64_t{0});
  if (auto staging = stagings_.extract(id)) {
    --ranks_.at(static_cast<size_t>(e.from - 1)).staging;
    if (failure)
      staging.mapped().set_exception(failure);
    else
      staging.mapped().set_value(get_staged(e.message));
  } else if (auto running = runs_.extract(id)) {
    if (failure) {
      running.mapped().set_exception(failure);
    } else {
      Trial t = h.at("trial").get<Trial>();
      gpu_busy_s_ += (t.verify_ms + t.bench_ms) / 1000.0;
      running.mapped().set_value(std::move(t));
    }
  } else {
    throw EngineError(strfmt("rank %d answered a request it was not sent", e.from));
  }
  wake.notify();
}

RanksStop::~RanksStop() {
  try {
    for (int r = 1; r < cluster_.size(); ++r) cluster_.send(r, message({{"op", "stop"}}));
  } catch (...) {  // a rank already gone: the job is ending anyway
  }
}

namespace {

// Waits for rank 0 to say stop (after this rank could not set up).
void await_stop(Cluster& cluster) {
  while (op_of(cluster.receive().message) != "stop") {
  }
}

// A rank's serving: requests in, results out as they finish.
class RankServer {
 public:
  RankServer(Cluster& cluster, Evaluator& ev) : cluster_(cluster), ev_(ev), exit_at_(exit_at_run(cluster.rank())) {}

  // Until rank 0 says stop.
  void serve() {
    for (;;) {
      bool progressed = false;
      while (std::optional<Envelope> e = cluster_.poll()) {
        if (op_of(e->message) == "stop") return;
        take(e->message);
        progressed = true;
        if (failed_) break;
      }
      // The GPUs are set up once the first configs compile, so that both
      // overlap (as in one process); a set-up that fails ends the run.
      if (progressed && !started_) start();
      if (failed_) return await_stop(cluster_);
      progressed = reply() || progressed;
      if (!progressed) {
        // A simulated evaluator's events complete as it waits; others' as their tasks end.
        if (ev_.simulated())
          ev_.wait(wake_, wake_.events());
        else
          wake_.wait(wake_.events(), std::chrono::milliseconds(1));
      }
    }
  }

 private:
  void take(const Message& m) {
    const std::string op = op_of(m);
    const uint64_t id = m.header.at("id").get<uint64_t>();
    if (op == "stage") {
      stagings_.emplace_back(id, ev_.stage(m.header.at("config").get<Config>(), wake_));
    } else if (op == "run") {
      if (!started_ && !start()) return;  // serve() waits for the stop
      if (exit_at_ > 0 && ++runs_taken_ == exit_at_) ::kill(::getpid(), SIGKILL);
      Limits limits;
      limits.abort_us = m.header.at("abort_us").get<std::vector<double>>();
      limits.timeout_s = m.header.at("timeout_s").get<double>();
      runs_.emplace_back(id, ev_.run(get_job(m), m.header.at("slot").get<int>(), limits, wake_));
    } else {
      throw EngineError("rank 0 sent '" + op + "'");
    }
  }

  // Sets the GPUs up; on failure tells rank 0 why and waits for its stop.
  bool start() {
    started_ = true;
    try {
      ev_.start();
      return true;
    } catch (const std::exception& e) {
      cluster_.send(0, message({{"op", "error"}, {"error", std::string("setting up its GPUs: ") + e.what()}}));
      failed_ = true;
      return false;
    }
  }

  // Sends what finished; whether anything did.
  bool reply() {
    bool any = false;
    for (auto it = stagings_.begin(); it != stagings_.end();) {
      if (!ready(it->second)) {
        ++it;
        continue;
      }
      Message m = message({{"op", "staged"}, {"id", it->first}});
      try {
        put_staged(m, it->second.get());
      } catch (const std::exception& ex) {
        m = message({{"op", "error"}, {"id", it->first}, {"error", ex.what()}});
      }
      cluster_.send(0, m);
      it = stagings_.erase(it);
      any = true;
    }
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (!ready(it->second)) {
        ++it;
        continue;
      }
      Message m;
      try {
        m = message({{"op", "ran"}, {"id", it->first}, {"trial", it->second.get()}});
      } catch (const std::exception& ex) {
        m = message({{"op", "error"}, {"id", it->first}, {"error", ex.what()}});
      }
      cluster_.send(0, m);
      it = runs_.erase(it);
      any = true;
    }
    return any;
  }

  Cluster& cluster_;
  Evaluator& ev_;
  Wakeup wake_;
  std::vector<std::pair<uint64_t, std::future<Staged>>> stagings_;
  std::vector<std::pair<uint64_t, std::future<Trial>>> runs_;
  int exit_at_ = 0;
  int runs_taken_ = 0;
  bool started_ = false;
  bool failed_ = false;  // the set-up failed: rank 0 was told, its stop is all that is left
};

}  // namespace

void serve_rank(Cluster& cluster, TuneOptions o) {
  const Envelope first = cluster.receive();
  if (op_of(first.message) != "plan") return;  // rank 0 stopped before its run began
  const json& h = first.message.header;
  // Rank 0's run: a resumed one's kernel and problems, its dataset unless
  // this rank was given its own (a host of another GPU, in a replay).
  o.resume_run = 0;
  o.given.clear();
  o.seed_configs.clear();
  o.kernel = h.at("kernel").get<std::string>();
  o.problems = h.at("problems").get<std::vector<std::string>>();
  o.dtype = h.at("dtype").get<std::string>();
  if (o.replay_path.empty()) o.replay_path = h.at("replay").get<std::string>();
  const int replay_slots = h.at("slots").get<int>();
  if (replay_slots >= 0) o.gpus = std::to_string(std::max(1, replay_slots));

  CompileCache::global().set_enabled(o.use_cache && CompileCache::global().enabled());
  std::unique_ptr<TunePlan> plan;
  std::unique_ptr<Evaluator> ev;
  try {
    plan = std::make_unique<TunePlan>(resolve_plan(o));
    ev = local_evaluator(*plan, std::max(0, replay_slots));  // its GPUs set up once configs compile
  } catch (const std::exception& e) {
    cluster.send(0, message({{"op", "failed"}, {"host", host_name()}, {"error", e.what()}}));
    await_stop(cluster);
    return;
  }
  cluster.send(0, message({{"op", "hello"},
                           {"host", host_name()},
                           {"model", gpu_model(*plan)},
                           {"slots", ev->slots()},
                           {"gpus", ev->gpus()},
                           {"compile_slots", std::max(1, ev->compile_slots())}}));
  RankServer(cluster, *ev).serve();
}

}  // namespace evotune
