#include "engine/compile_cache.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/strings.hpp"
#include "engine/compiler.hpp"

namespace evotune {

namespace fs = std::filesystem;

CompileCache& CompileCache::global() {
  static CompileCache cache;
  return cache;
}

CompileCache::CompileCache() {
  if (const char* d = std::getenv("EVOTUNE_CACHE_DIR")) {
    if (std::string(d) == "off" || std::string(d).empty())
      enabled_ = false;
    else
      dir_ = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME")) {
    dir_ = std::string(x) + "/evotune";
  } else if (const char* h = std::getenv("HOME")) {
    dir_ = std::string(h) + "/.cache/evotune";
  } else {
    enabled_ = false;
  }
}

void CompileCache::set_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  dir_ = dir;
  enabled_ = !dir.empty();
}

void CompileCache::set_enabled(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_ = on && !dir_.empty();
}

bool CompileCache::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}

namespace {

fs::path entry_path(const std::string& dir, const std::string& key, const char* ext) {
  return fs::path(dir) / key.substr(0, 2) / (key + ext);
}

// Write-then-rename so readers see a whole file or none.
bool write_atomic(const fs::path& path, const std::string& data) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  fs::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid()) + "_" + hex64(reinterpret_cast<uintptr_t>(&data));
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return false;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return false;
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

}  // namespace

std::optional<CompileResult> CompileCache::get(const std::string& key) const {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_) return std::nullopt;
    dir = dir_;
  }
  try {
    nlohmann::json meta = nlohmann::json::parse(read_file(entry_path(dir, key, ".json").string()));
    CompileResult r;
    r.ok = meta.at("ok").get<bool>();
    r.log = meta.at("log").get<std::string>();
    r.res = meta.at("resources").get<Resources>();
    r.compile_ms = meta.at("compile_ms").get<double>();
    if (r.ok) {
      r.cubin = read_file(entry_path(dir, key, ".cubin").string());
      if (r.cubin.size() != meta.at("cubin_bytes").get<size_t>()) return std::nullopt;
    }
    r.cache_hit = true;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // missing or unreadable entry: compile again
  }
}

void CompileCache::put(const std::string& key, const CompileResult& r) const {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_) return;
    dir = dir_;
  }
  nlohmann::json meta = {{"ok", r.ok},
                         {"log", r.log},
                         {"resources", r.res},
                         {"compile_ms", r.compile_ms},
                         {"cubin_bytes", r.cubin.size()}};
  // The cubin first: a meta file only ever points at a complete cubin.
  if (r.ok && !write_atomic(entry_path(dir, key, ".cubin"), r.cubin)) return;
  write_atomic(entry_path(dir, key, ".json"), meta.dump());
}

}  // namespace evotune
