#include "engine/worker_client.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

WorkerClient::WorkerClient(std::string exe, SetupRequest setup) : exe_(std::move(exe)), setup_(std::move(setup)) {}

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
  child_.spawn(exe_, {"worker", "--in-fd", "3", "--out-fd", "4", "--device", std::to_string(setup_.device)});
  ++restarts_;
}

void WorkerClient::start() {
  if (child_.running() && ready_) return;
  spawn();
  Message req, rep;
  req.header = {{"type", "setup"},
                {"device", setup_.device},
                {"seed", setup_.seed},
                {"timing", setup_.timing},
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
  if (reply.worker_must_restart) child_.kill();
  return reply;
}

}  // namespace evotune
