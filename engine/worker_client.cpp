#include "engine/worker_client.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/worker.hpp"

extern char** environ;

namespace evotune {

WorkerClient::WorkerClient(std::string exe, SetupRequest setup) : exe_(std::move(exe)), setup_(std::move(setup)) {
  std::signal(SIGPIPE, SIG_IGN);  // a dead worker must be an error, not our death
}

WorkerClient::~WorkerClient() {
  if (pid_ > 0) {
    try {
      Message quit;
      quit.header = {{"type", "quit"}};
      write_message(to_fd_, quit);
    } catch (...) {
    }
    kill_worker();
  }
}

void WorkerClient::spawn() {
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
    throw EngineError(std::string("creating worker pipes: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // The worker reads requests on fd 3 and writes replies on fd 4; its stdout
  // (device printf) goes to our stderr so it cannot corrupt the protocol.
  posix_spawn_file_actions_adddup2(&fa, to[0], 3);
  posix_spawn_file_actions_adddup2(&fa, from[1], 4);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  const char* argv[] = {exe_.c_str(), "worker", "--in-fd", "3", "--out-fd", "4", nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, exe_.c_str(), &fa, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(to[0]);
  ::close(from[1]);
  if (rc != 0) {
    ::close(to[1]);
    ::close(from[0]);
    throw EngineError("starting the GPU worker (" + exe_ + " worker): " + std::strerror(rc));
  }
  pid_ = pid;
  to_fd_ = to[1];
  from_fd_ = from[0];
  ++restarts_;
}

void WorkerClient::kill_worker() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    last_status_ = status;
  }
  if (to_fd_ >= 0) ::close(to_fd_);
  if (from_fd_ >= 0) ::close(from_fd_);
  pid_ = -1;
  to_fd_ = from_fd_ = -1;
}

std::string WorkerClient::describe_exit() {
  if (pid_ <= 0) return "worker not running";
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 50 && (r = ::waitpid(pid_, &status, WNOHANG)) == 0; ++i) ::usleep(10000);
  if (r == pid_) {
    pid_ = -1;
    if (WIFSIGNALED(status)) return strfmt("worker killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (WIFEXITED(status)) return strfmt("worker exited with code %d", WEXITSTATUS(status));
  }
  return "worker closed its pipe";
}

void WorkerClient::start() {
  if (pid_ > 0) return;
  spawn();
  Message req;
  req.header = {{"type", "setup"},
                {"device", setup_.device},
                {"seed", setup_.seed},
                {"timing", setup_.timing},
                {"problems", setup_.problems}};
  req.blobs = setup_.cubins;
  Message rep;
  ReadStatus rs = ReadStatus::eof;
  try {
    write_message(to_fd_, req);
    rs = read_message(from_fd_, rep, 600 * 1000);
  } catch (const EngineError&) {
    rs = ReadStatus::eof;
  }
  if (rs != ReadStatus::ok) {
    std::string why = rs == ReadStatus::timeout ? "no answer within 600 s" : describe_exit();
    kill_worker();
    throw EngineError("GPU worker set-up failed: " + why);
  }
  if (!rep.header.value("ok", false)) {
    std::string err = rep.header.value("error", std::string("unknown error"));
    kill_worker();
    throw EngineError("GPU worker set-up failed: " + err);
  }
  setup_ms_ = rep.header.value("setup_ms", 0.0);
}

EvalReply WorkerClient::evaluate(const EvalRequest& req, double timeout_s) {
  start();
  Message msg;
  msg.header = {{"type", "eval"}, {"launches", req.launches}, {"abort_us", req.abort_us}};
  msg.blobs = req.cubins;
  EvalReply reply;
  Message rep;
  ReadStatus rs = ReadStatus::eof;
  try {
    write_message(to_fd_, msg);
    rs = read_message(from_fd_, rep, static_cast<int>(timeout_s * 1000));
  } catch (const EngineError&) {
    rs = ReadStatus::eof;
  }
  if (rs == ReadStatus::timeout) {
    kill_worker();
    reply.status = TrialStatus::timeout;
    reply.error = strfmt("no result within %.1f s; the worker was killed and replaced", timeout_s);
    return reply;
  }
  if (rs == ReadStatus::eof) {
    std::string why = describe_exit();
    kill_worker();
    reply.status = TrialStatus::crashed;
    reply.error = why;
    return reply;
  }
  reply = rep.header.get<EvalReply>();
  if (reply.worker_must_restart) kill_worker();
  return reply;
}

}  // namespace evotune
