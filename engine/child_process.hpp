// A child process of this binary (`evotune worker`, `evotune compile-worker`)
// that reads requests on fd 3 and writes replies on fd 4. Its stdout goes to
// our stderr so nothing it prints can corrupt the protocol.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "engine/worker.hpp"

namespace evotune {

// In the child: exits the process when the parent that started it is gone
// (so a worker stuck in a hung kernel does not outlive the tuner). A thread
// polls the parent id; PR_SET_PDEATHSIG would fire when the spawning
// *thread* ends, which is not what a pool of threads wants.
void exit_with_parent();

// Runs `argv[0] argv[1..]` (a path: no search) to completion with stdout and
// stderr captured together; exit code -1 when killed at timeout_s or by a
// signal. Throws EngineError when it cannot be started.
struct CapturedRun {
  int exit_code = 0;
  std::string text;
};
CapturedRun run_captured(const std::vector<std::string>& argv, double timeout_s);

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { kill(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts `exe args...`; throws EngineError when it cannot.
  void spawn(const std::string& exe, const std::vector<std::string>& args);
  bool running() const { return pid_ > 0; }
  // Sends a message and waits for the reply; ok, eof (the child died or
  // closed its pipe) or timeout. A broken pipe reads as eof.
  ReadStatus request(const Message& req, Message& reply, int timeout_ms);
  // Kills the child (SIGKILL) and reaps it.
  void kill();
  // Closes the child's request pipe (a worker exits on end of input) and
  // waits up to timeout_ms for it to exit: its exit code, or -1 when it was
  // killed at the timeout or by a signal.
  int wait_exit(int timeout_ms);
  // After an eof: how the child ended ("killed by signal 11 (...)").
  std::string describe_exit();

 private:
  pid_t pid_ = -1;
  int to_fd_ = -1, from_fd_ = -1;
};

}  // namespace evotune
