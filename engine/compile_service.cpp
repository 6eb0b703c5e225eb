#include "engine/compile_service.hpp"

#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/child_process.hpp"
#include "engine/compile_cache.hpp"

namespace evotune {

namespace {

Message encode(const CompileRequest& r) {
  Message m;
  m.header = {{"type", "compile"},
              {"source_name", r.source_name},
              {"entry", r.entry},
              {"defines", r.defines},
              {"arch", r.arch},
              {"options", r.options},
              {"include_dirs", r.include_dirs}};
  nlohmann::json names = nlohmann::json::array();
  m.blobs.push_back(r.source);
  for (const auto& [name, text] : r.headers) {
    names.push_back(name);
    m.blobs.push_back(text);
  }
  m.header["headers"] = names;
  return m;
}

CompileRequest decode(const Message& m) {
  CompileRequest r;
  r.source_name = m.header.at("source_name");
  r.entry = m.header.at("entry");
  r.defines = m.header.at("defines").get<std::vector<std::pair<std::string, std::string>>>();
  r.arch = m.header.at("arch");
  r.options = m.header.at("options").get<std::vector<std::string>>();
  r.include_dirs = m.header.at("include_dirs").get<std::vector<std::string>>();
  r.source = m.blobs.at(0);
  const auto& names = m.header.at("headers");
  for (size_t i = 0; i < names.size(); ++i) r.headers.emplace_back(names[i].get<std::string>(), m.blobs.at(i + 1));
  return r;
}

}  // namespace

CompileService::CompileService(std::string exe, unsigned processes, double timeout_s)
    : exe_(std::move(exe)), timeout_s_(timeout_s) {
  if (processes == 0) processes = 1;
  for (unsigned i = 0; i < processes; ++i) {
    slots_.push_back(std::make_unique<ChildProcess>());
    free_.push_back(i);
  }
}

CompileService::~CompileService() = default;

void CompileService::spawn_all() {
  if (exe_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t slot : free_) {
    ChildProcess& child = *slots_[slot];
    if (child.running()) continue;
    try {
      child.spawn(exe_, {"compile-worker", "--in-fd", "3", "--out-fd", "4", "--prewarm"});
      ++spawns_;
    } catch (const std::exception&) {
      // compile() spawns it again and reports what fails
    }
  }
}

CompileResult CompileService::compile(const CompileRequest& req) {
  if (exe_.empty()) return evotune::compile(req);
  const std::string key = req.key();
  if (auto cached = CompileCache::global().get(key)) return *cached;

  size_t slot = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !free_.empty(); });
    slot = free_.back();
    free_.pop_back();
  }
  ChildProcess& child = *slots_[slot];
  CompileResult res;
  auto t0 = std::chrono::steady_clock::now();
  try {
    if (!child.running()) {
      child.spawn(exe_, {"compile-worker", "--in-fd", "3", "--out-fd", "4"});
      ++spawns_;
    }
    Message rep;
    ReadStatus rs = child.request(encode(req), rep, static_cast<int>(timeout_s_ * 1000));
    if (rs == ReadStatus::ok && rep.header.value("type", "") == "compiled") {
      res.ok = rep.header.at("ok");
      res.log = rep.header.at("log");
      res.res = rep.header.at("resources").get<Resources>();
      res.compile_ms = rep.header.at("compile_ms");
      if (res.ok) res.cubin = rep.blobs.at(0);
      CompileCache::global().put(key, res);
    } else if (rs == ReadStatus::ok) {
      res.log = "the compiler process failed: " + rep.header.value("error", std::string("unknown error"));
    } else if (rs == ReadStatus::timeout) {
      child.kill();
      res.log =
          strfmt("NVRTC did not finish within %.0f s (--compile-timeout); the compiler process was killed", timeout_s_);
    } else {
      res.log = "the compiler process " + child.describe_exit() + " while compiling";
      child.kill();
    }
  } catch (const std::exception& e) {
    res.log = std::string("the compiler process could not run: ") + e.what();
    child.kill();
  }
  if (!res.ok && res.compile_ms == 0)
    res.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  cv_.notify_one();
  return res;
}

int compile_worker_main(int in_fd, int out_fd, bool prewarm) {
  exit_with_parent();
  std::signal(SIGPIPE, SIG_IGN);
  CompileCache::global().set_enabled(false);  // the tuner caches
  if (prewarm) {
    // NVRTC's first compile loads its built-ins: pay for it before the
    // tuner's first request.
    CompileRequest r;
    r.source_name = "prewarm.cu";
    r.source = "extern \"C\" __global__ void evotune_prewarm() {}\n";
    r.entry = "evotune_prewarm";
    r.arch = "sm_80";
    try {
      (void)compile(r);
    } catch (const std::exception&) {
    }
  }
  for (;;) {
    Message req;
    if (read_message(in_fd, req, -1) != ReadStatus::ok) return 0;
    Message rep;
    try {
      CompileResult r = compile(decode(req));
      rep.header = {
          {"type", "compiled"}, {"ok", r.ok}, {"log", r.log}, {"resources", r.res}, {"compile_ms", r.compile_ms}};
      if (r.ok) rep.blobs.push_back(r.cubin);
    } catch (const std::exception& e) {
      rep.header = {{"type", "error"}, {"error", e.what()}};
    }
    write_message(out_fd, rep);
  }
}

}  // namespace evotune
