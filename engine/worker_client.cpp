#include "engine/worker_client.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

WorkerClient::WorkerClient(std::string exe, SetupRequest setup, std::vector<std::string> launcher)
    : exe_(std::move(exe)), setup_(std::move(setup)), launcher_(std::move(launcher)) {}

WorkerClient::~WorkerClient() {
  if (child_.running()) {
    Message quit, ignored;
    quit.header = {{"type", "quit"}};
    child_.request(quit, ignored, 100);
  }
}

void WorkerClient::spawn() {
  if (child_.running()) return;
  ready_ = false;
  std::vector<std::string> args = {
      "worker", "--in-fd", "3", "--out-fd", "4", "--device", std::to_string(setup_.device)};
  if (launcher_.empty()) {
    child_.spawn(exe_, args);
  } else {
    std::vector<std::string> wrapped(launcher_.begin() + 1, launcher_.end());
    wrapped.push_back(exe_);
    wrapped.insert(wrapped.end(), args.begin(), args.end());
    child_.spawn(launcher_.front(), wrapped);
  }
  ++restarts_;
}

int WorkerClient::finish(int timeout_ms) {
  ready_ = false;
  return child_.wait_exit(timeout_ms);
}

void WorkerClient::start() {
  if (child_.running() && ready_) return;
  spawn();
  Message req, rep;
  req.header = {{"type", "setup"},
                {"device", setup_.device},
                {"seed", setup_.seed},
                {"timing", setup_.timing},
                {"guard_buffers", setup_.guard_buffers},
                {"problems", setup_.problems}};
  req.blobs = setup_.cubins;
  // Filling inputs and running the references takes seconds; minutes mean a
  // hung reference kernel.
  ReadStatus rs = child_.request(req, rep, 120 * 1000);
  if (rs != ReadStatus::ok) {
    std::string why = rs == ReadStatus::timeout ? "no answer within 120 s (a hung reference kernel?)"
                                                : "the worker " + child_.describe_exit();
    child_.kill();
    throw EngineError("GPU worker set-up failed: " + why);
  }
  if (!rep.header.value("ok", false)) {
    std::string err = rep.header.value("error", std::string("unknown error"));
    child_.kill();
    throw EngineError("GPU worker set-up failed: " + err);
  }
  setup_ms_ = rep.header.value("setup_ms", 0.0);
  ready_ = true;
}

EvalReply WorkerClient::evaluate(const EvalRequest& req, double timeout_s) {
  start();
  Message msg, rep;
  msg.header = {{"type", "eval"}, {"launches", req.launches}, {"abort_us", req.abort_us}};
  if (req.sustained.on()) msg.header["sustained"] = req.sustained;
  msg.blobs = req.cubins;
  EvalReply reply;
  ReadStatus rs = child_.request(msg, rep, static_cast<int>(timeout_s * 1000));
  if (rs == ReadStatus::timeout) {
    child_.kill();
    reply.status = TrialStatus::timeout;
    reply.error = strfmt("no result within %.1f s; the worker was killed and replaced", timeout_s);
    return reply;
  }
  if (rs == ReadStatus::eof) {
    reply.status = TrialStatus::crashed;
    reply.error = "the GPU worker " + child_.describe_exit();
    child_.kill();
    return reply;
  }
  reply = rep.header.get<EvalReply>();
  // The worker exits by itself after such a reply; letting it (and a
  // launcher such as compute-sanitizer, which then writes its report) finish
  // costs milliseconds.
  if (reply.worker_must_restart) child_.wait_exit(5000);
  return reply;
}

std::vector<BaselineResult> WorkerClient::baseline(const BaselineRequest& req, double timeout_s) {
  start();
  Message msg, rep;
  msg.header = {{"type", "baseline"}, {"request", req}};
  const ReadStatus rs = child_.request(msg, rep, static_cast<int>(timeout_s * 1000));
  if (rs == ReadStatus::ok) return rep.header.at("results").get<std::vector<BaselineResult>>();
  BaselineResult r;
  r.problem = req.problem;
  r.name = req.name;
  r.library = req.library;
  r.status = "failed";
  r.reason = rs == ReadStatus::timeout ? strfmt("no result within %.1f s; the worker was killed", timeout_s)
                                       : "the GPU worker " + child_.describe_exit();
  child_.kill();
  ready_ = false;
  return {r};
}

}  // namespace evotune
