// Compiles candidates in a pool of child processes (`evotune compile-worker`),
// one request at a time each: NVRTC that hangs is cut off at a time limit and
// NVRTC that crashes takes only its process down; either way the config is
// recorded as a compile_error and the run goes on. The on-disk cache is
// consulted here, in the tuner, so cache hits cost no process round trip.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/child_process.hpp"
#include "engine/compiler.hpp"

namespace evotune {

class CompileService {
 public:
  // exe empty: compile in this process (threads), with no time limit.
  CompileService(std::string exe, unsigned processes, double timeout_s);
  ~CompileService();
  CompileService(const CompileService&) = delete;
  CompileService& operator=(const CompileService&) = delete;

  // Thread-safe; blocks until a compile process is free.
  CompileResult compile(const CompileRequest& req);
  // Starts every compiler process now (each loads NVRTC and compiles a
  // trivial kernel), so that the first compiles find them ready.
  void spawn_all();
  unsigned processes() const { return static_cast<unsigned>(slots_.size()); }
  bool isolated() const { return !exe_.empty(); }
  int spawns() const { return spawns_.load(); }  // compiler processes started so far

 private:
  std::string exe_;
  double timeout_s_;
  std::vector<std::unique_ptr<ChildProcess>> slots_;
  std::vector<size_t> free_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> spawns_{0};
};

// The compile-worker process: compiles requests until EOF.
int compile_worker_main(int in_fd, int out_fd, bool prewarm = false);

}  // namespace evotune
