#include "engine/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/strings.hpp"

extern char** environ;

namespace evotune {

void exit_with_parent() {
  pid_t parent = ::getppid();
  std::thread([parent] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (::getppid() != parent) std::_Exit(0);
    }
  }).detach();
}

void ChildProcess::spawn(const std::string& exe, const std::vector<std::string>& args) {
  kill();
  std::signal(SIGPIPE, SIG_IGN);  // a dead child must be an error, not our death
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) throw EngineError(std::string("creating a pipe: ") + std::strerror(errno));
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(to[0]);
    ::close(to[1]);
    throw EngineError(std::string("creating a pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to[0], 3);
  posix_spawn_file_actions_adddup2(&fa, from[1], 4);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(to[0]);
  ::close(from[1]);
  if (rc != 0) {
    ::close(to[1]);
    ::close(from[0]);
    throw EngineError("starting " + exe + ": " + std::strerror(rc));
  }
  pid_ = pid;
  to_fd_ = to[1];
  from_fd_ = from[0];
}

ReadStatus ChildProcess::request(const Message& req, Message& reply, int timeout_ms) {
  if (pid_ <= 0) return ReadStatus::eof;
  try {
    write_message(to_fd_, req);
    return read_message(from_fd_, reply, timeout_ms);
  } catch (const EngineError&) {
    return ReadStatus::eof;
  }
}

void ChildProcess::kill() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (to_fd_ >= 0) ::close(to_fd_);
  if (from_fd_ >= 0) ::close(from_fd_);
  pid_ = -1;
  to_fd_ = from_fd_ = -1;
}

int ChildProcess::wait_exit(int timeout_ms) {
  if (pid_ <= 0) return -1;
  if (to_fd_ >= 0) ::close(to_fd_);
  to_fd_ = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  pid_t r = 0;
  while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) ::usleep(5000);
  if (r != pid_) {
    kill();
    return -1;
  }
  pid_ = -1;
  kill();  // closes the reply pipe
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ChildProcess::describe_exit() {
  if (pid_ <= 0) return "the process is not running";
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 100 && (r = ::waitpid(pid_, &status, WNOHANG)) == 0; ++i) ::usleep(10000);
  if (r == pid_) {
    pid_ = -1;
    if (WIFSIGNALED(status)) return strfmt("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (WIFEXITED(status)) return strfmt("exited with code %d", WEXITSTATUS(status));
  }
  return "closed its pipe";
}

CapturedRun run_captured(const std::vector<std::string>& argv_in, double timeout_s) {
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char tmpl[] = "/tmp/evotune-out-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) throw EngineError("cannot create a temporary file for the output of " + args.front());
  const std::string out_path = tmpl;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args.front().c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd);
  if (rc != 0) {
    std::filesystem::remove(out_path);
    throw EngineError("cannot start " + args.front() + ": " + std::string(strerror(rc)));
  }
  CapturedRun out;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int status = 0;
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ::kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      out.exit_code = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a child's exit: no fd to wait on
  }
  std::ifstream in(out_path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  out.text = ss.str();
  std::filesystem::remove(out_path);
  return out;
}

}  // namespace evotune
