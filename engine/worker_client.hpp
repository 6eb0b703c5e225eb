// The tuner's side of a GPU worker process: spawns `evotune worker`, sends it
// the problems once, then candidates one at a time. A worker that crashes,
// reports a poisoned context, or does not answer in time is killed and
// replaced before the next candidate; the candidate is recorded as crashed or
// timeout and the run goes on.
#pragma once

#include <string>
#include <vector>

#include "engine/child_process.hpp"
#include "engine/plan.hpp"

namespace evotune {

class WorkerClient {
 public:
  // `exe` is the evotune binary (it must understand `worker`). The worker is
  // started lazily by the first evaluate() or by start(); under `launcher`
  // when given (a command and its options that run the worker, e.g.
  // compute-sanitizer).
  WorkerClient(std::string exe, SetupRequest setup, std::vector<std::string> launcher = {});

  // Starts the worker process now, so that it creates its CUDA context while
  // the set-up is still being prepared; start() then only sends the set-up.
  void spawn();
  void set_setup(SetupRequest setup) { setup_ = std::move(setup); }
  ~WorkerClient();
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  // Spawns the worker and sets up the problems (references run here). Throws
  // EngineError when that fails: the run cannot go on without its problems.
  void start();
  // Evaluates one candidate; a reply within timeout_s or a crashed/timeout
  // status. Never throws for the candidate's faults.
  EvalReply evaluate(const EvalRequest& req, double timeout_s);
  // Times a baseline on the worker's problem buffers; a worker that crashes
  // or does not answer is killed (replaced by the next request) and the
  // baseline recorded as failed. Never throws for the baseline's faults.
  std::vector<BaselineResult> baseline(const BaselineRequest& req, double timeout_s);

  // Asks the worker to quit and waits for it (and its launcher) to exit:
  // the exit code, or -1 when it had to be killed after timeout_ms.
  int finish(int timeout_ms);

  int restarts() const { return restarts_; }
  double last_setup_ms() const { return setup_ms_; }
  int device() const { return setup_.device; }

 private:
  std::string exe_;
  SetupRequest setup_;
  std::vector<std::string> launcher_;
  ChildProcess child_;
  int restarts_ = -1;
  bool ready_ = false;  // the running worker has its set-up
  double setup_ms_ = 0;
};

}  // namespace evotune
