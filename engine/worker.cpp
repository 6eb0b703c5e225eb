#include "engine/worker.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "engine/child_process.hpp"
#include "engine/gpu_evaluator.hpp"
#include "engine/plan.hpp"

namespace evotune {

namespace {

constexpr uint32_t kMagic = 0x57545645;  // "EVTW"

void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw EngineError(std::string("writing to the worker pipe: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

using Clock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline` (none when timeout_ms < 0).
ReadStatus read_all(int fd, void* data, size_t n, int timeout_ms, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return ReadStatus::timeout;
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return ReadStatus::timeout;
    }
    ssize_t got = ::read(fd, p, n);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::eof;
    }
    if (got == 0) return ReadStatus::eof;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return ReadStatus::ok;
}

}  // namespace

void write_message(int fd, const Message& m) {
  std::string header = m.header.dump();
  uint32_t head[3] = {kMagic, static_cast<uint32_t>(header.size()), static_cast<uint32_t>(m.blobs.size())};
  std::string buf(reinterpret_cast<const char*>(head), sizeof head);
  buf += header;
  for (const auto& b : m.blobs) {
    uint64_t n = b.size();
    buf.append(reinterpret_cast<const char*>(&n), sizeof n);
    buf += b;
  }
  write_all(fd, buf.data(), buf.size());
}

ReadStatus read_message(int fd, Message& m, int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  uint32_t head[3];
  ReadStatus s = read_all(fd, head, sizeof head, timeout_ms, deadline);
  if (s != ReadStatus::ok) return s;
  if (head[0] != kMagic) throw EngineError("worker pipe out of sync (bad magic)");
  std::string header(head[1], '\0');
  if ((s = read_all(fd, header.data(), header.size(), timeout_ms, deadline)) != ReadStatus::ok) return s;
  m.header = nlohmann::json::parse(header);
  m.blobs.assign(head[2], std::string());
  for (auto& b : m.blobs) {
    uint64_t n = 0;
    if ((s = read_all(fd, &n, sizeof n, timeout_ms, deadline)) != ReadStatus::ok) return s;
    b.resize(n);
    if ((s = read_all(fd, b.data(), n, timeout_ms, deadline)) != ReadStatus::ok) return s;
  }
  return ReadStatus::ok;
}

namespace {

// What the worker does after answering a request: serve the next one
// (nullopt) or exit with this code (3: start a fresh worker).
using Next = std::optional<int>;

// A session for the run's problems and cubins, in place of any before it.
Next serve_setup(const Message& req, std::unique_ptr<GpuSession>& session, int out_fd) {
  SetupReply r;
  auto t0 = Clock::now();
  try {
    SetupRequest s;
    s.device = req.header.at("device");
    s.seed = req.header.at("seed");
    s.timing = req.header.at("timing");
    s.guard_buffers = req.header.value("guard_buffers", true);
    s.problems = req.header.at("problems").get<std::vector<ProblemSetup>>();
    s.cubins = req.blobs;
    session.reset();
    session = std::make_unique<GpuSession>(s);
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.setup_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Message rep;
  rep.header = {{"type", "setup"}, {"ok", r.ok}, {"error", r.error}, {"setup_ms", r.setup_ms}};
  write_message(out_fd, rep);
  if (!r.ok) return 3;  // the context may be unusable; start afresh
  return std::nullopt;
}

// One trial's launches; a failure that may have left the context broken
// ends the worker after its reply.
Next serve_eval(const Message& req, GpuSession* session, int out_fd) {
  EvalReply r;
  if (!session) {
    r.status = TrialStatus::launch_error;
    r.error = "worker has no set-up";
  } else {
    try {
      EvalRequest e;
      e.cubins = req.blobs;
      e.launches = req.header.at("launches").get<std::vector<LaunchPlan>>();
      e.abort_us = req.header.at("abort_us").get<std::vector<double>>();
      if (req.header.contains("sustained")) e.sustained = req.header.at("sustained").get<SustainedTiming>();
      r = session->evaluate(e);
    } catch (const std::exception& ex) {
      r.status = TrialStatus::crashed;
      r.error = ex.what();
      r.worker_must_restart = true;
    }
  }
  Message rep;
  rep.header = r;
  rep.header["type"] = "eval";
  write_message(out_fd, rep);
  if (r.worker_must_restart) return 3;
  return std::nullopt;
}

// The vendor kernels and the reference on the session's problems.
Next serve_baseline(const Message& req, GpuSession* session, int out_fd) {
  std::vector<BaselineResult> results;
  if (session) {
    results = session->baseline(req.header.at("request").get<BaselineRequest>());
  } else {
    BaselineResult r;
    r.status = "failed";
    r.reason = "worker has no set-up";
    results.push_back(r);
  }
  Message rep;
  rep.header = {{"type", "baseline"}, {"results", results}};
  write_message(out_fd, rep);
  return std::nullopt;
}

Next serve_unknown(const std::string& type, int out_fd) {
  Message rep;
  rep.header = {{"type", "error"}, {"error", "unknown request '" + type + "'"}};
  write_message(out_fd, rep);
  return std::nullopt;
}

}  // namespace

int worker_main(int in_fd, int out_fd, int device) {
  exit_with_parent();  // an orphaned worker would hold the GPU
  std::signal(SIGPIPE, SIG_IGN);
  if (device >= 0) {
    try {
      prewarm_context(device);
    } catch (const std::exception&) {
      // The set-up tries again and reports what fails.
    }
  }
  std::unique_ptr<GpuSession> session;
  for (;;) {
    Message req;
    if (read_message(in_fd, req, -1) != ReadStatus::ok) return 0;
    const std::string type = req.header.value("type", "");
    if (type == "quit") return 0;
    const Next next = type == "setup"      ? serve_setup(req, session, out_fd)
                      : type == "eval"     ? serve_eval(req, session.get(), out_fd)
                      : type == "baseline" ? serve_baseline(req, session.get(), out_fd)
                                           : serve_unknown(type, out_fd);
    if (next) return *next;
  }
}

}  // namespace evotune
