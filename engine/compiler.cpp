#include "engine/compiler.hpp"

#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "core/error.hpp"
#include "core/spec.hpp"
#include "core/strings.hpp"
#include "engine/compile_cache.hpp"

#ifndef EVOTUNE_CUDA_INCLUDE_DIR
#define EVOTUNE_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace evotune {

namespace {

// One NVRTC program; destroyed on every path.
class NvrtcProgram {
 public:
  NvrtcProgram(const CompileRequest& req) {
    std::vector<const char*> hdr_text, hdr_names;
    for (const auto& [name, text] : req.headers) {
      hdr_names.push_back(name.c_str());
      hdr_text.push_back(text.c_str());
    }
    nvrtcResult r = nvrtcCreateProgram(&prog_, req.source.c_str(), req.source_name.c_str(),
                                       static_cast<int>(hdr_text.size()), hdr_text.data(), hdr_names.data());
    if (r != NVRTC_SUCCESS) throw EngineError(std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r));
  }
  ~NvrtcProgram() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  nvrtcProgram get() const { return prog_; }

  std::string log() const {
    size_t n = 0;
    if (nvrtcGetProgramLogSize(prog_, &n) != NVRTC_SUCCESS || n == 0) return {};
    std::string s(n, '\0');
    nvrtcGetProgramLog(prog_, s.data());
    while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
    return s;
  }

 private:
  nvrtcProgram prog_ = nullptr;
};

bool has_fp16_header(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "cuda_fp16.h", ec);
}

}  // namespace

// The leading version changes whenever what a cached result holds does (v3:
// Resources::wgmma_serialized), so that older entries are compiled again.
std::string CompileRequest::key() const {
  std::string blob = "v3\n" + nvrtc_version() + "\n" + arch + "\n" + entry + "\n" + source_name + "\n";
  for (const auto& [k, v] : defines) blob += "-D" + k + "=" + v + "\n";
  for (const auto& o : options) blob += o + "\n";
  for (const auto& d : include_dirs) blob += "-I" + d + "\n";
  for (const auto& [n, t] : headers) blob += n + "\n" + hex64(fnv1a64(t)) + "\n";
  blob += source;
  // Two independent 64-bit hashes: collisions are out of reach for a cache.
  return hex64(fnv1a64(blob)) + hex64(fnv1a64(blob, 0x84222325cbf29ce4ULL));
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string cuda_include_dir() {
  static const std::string dir = [] {
    std::vector<std::string> candidates;
    for (const char* env : {"EVOTUNE_CUDA_INCLUDE"})
      if (const char* v = std::getenv(env)) candidates.emplace_back(v);
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* v = std::getenv(env)) candidates.push_back(std::string(v) + "/include");
    candidates.emplace_back(EVOTUNE_CUDA_INCLUDE_DIR);
    candidates.emplace_back("/usr/local/cuda/include");
    for (const auto& c : candidates)
      if (has_fp16_header(c)) return c;
    return std::string();
  }();
  return dir;
}

CompileRequest kernel_request(const KernelSpec& spec, const std::string& arch,
                              std::vector<std::pair<std::string, std::string>> defines) {
  CompileRequest r;
  r.source_name = spec.source_name;
  r.source = spec.source_text;
  r.entry = spec.entry;
  r.defines = std::move(defines);
  r.arch = arch;
  r.options = spec.options;
  r.include_dirs = spec.include_dirs;
  r.headers = spec.headers;
  return r;
}

std::string arch_for(int cc, bool arch_specific) {
  return "sm_" + std::to_string(cc) + (arch_specific && cc >= 90 ? "a" : "");
}

std::pair<int, bool> parse_arch(const std::string& arch) {
  std::string s = to_lower(trim(arch));
  if (starts_with(s, "sm_"))
    s = s.substr(3);
  else if (starts_with(s, "compute_"))
    s = s.substr(8);
  bool specific = !s.empty() && s.back() == 'a';
  if (specific) s.pop_back();
  auto v = parse_int(s);
  if (!v || *v < kMinComputeCapability || *v > kMaxComputeCapability)
    throw UsageError("malformed architecture '" + arch + "' (expected e.g. sm_90a, sm_90, sm_80)");
  return {static_cast<int>(*v), specific};
}

bool parse_ptxas_resources(const std::string& log, const std::string& entry, Resources& out) {
  // ptxas prints, per function:
  //   ptxas info    : Compiling entry function 'NAME' for 'sm_90a'
  //   ptxas info    : Function properties for NAME
  //   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 11 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
  size_t start = log.find("Compiling entry function '" + entry + "'");
  if (start == std::string::npos) return false;
  size_t end = log.find("Compiling entry function", start + 1);
  std::string block = log.substr(start, end == std::string::npos ? std::string::npos : end - start);
  Resources r;
  std::smatch m;
  static const std::regex regs(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex st(R"((\d+) bytes spill stores)");
  static const std::regex ld(R"((\d+) bytes spill loads)");
  if (std::regex_search(block, m, regs)) r.registers = std::stoi(m[1]);
  if (std::regex_search(block, m, smem)) r.smem_static = std::stoi(m[1]);
  if (std::regex_search(block, m, stack)) r.stack_frame = std::stoi(m[1]);
  if (std::regex_search(block, m, st)) r.spill_stores = std::stoi(m[1]);
  if (std::regex_search(block, m, ld)) r.spill_loads = std::stoi(m[1]);
  // Printed before the function's block, naming it:
  //   ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions
  //   are serialized due to insufficient register resources for the function 'NAME'
  // (C7511, C7515: "... due to <reason> in the function 'NAME'").
  static const std::regex serial(R"(\(C(\d+)\) Potential Performance Loss: wgmma[^\n]* serialized[^\n]* function '([^']+)')");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), serial); it != std::sregex_iterator(); ++it)
    if ((*it)[2] == entry) r.wgmma_serialized = std::stoi((*it)[1]);
  out = r;
  return true;
}

CompileResult compile(const CompileRequest& req) {
  const std::string key = req.key();
  if (auto cached = CompileCache::global().get(key)) return *cached;

  auto t0 = std::chrono::steady_clock::now();
  CompileResult res;
  NvrtcProgram prog(req);

  // --no-cache: NVRTC 12.9+ may serve a cubin from the driver's compute
  // cache without running ptxas, and then the log has no resource report.
  // evotune's own cache (which keeps the report) stands in for it.
  std::vector<std::string> opts = {"--gpu-architecture=" + req.arch,
                                   "-std=c++17",
                                   "--ptxas-options=-v",
                                   "-lineinfo",
                                   "-default-device",
                                   "--no-cache"};
  std::string inc = cuda_include_dir();
  if (!inc.empty()) opts.push_back("-I" + inc);
  for (const auto& d : req.include_dirs) opts.push_back("-I" + d);
  for (const auto& [k, v] : req.defines) opts.push_back("-D" + k + "=" + v);
  for (const auto& o : req.options) opts.push_back(o);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());

  nvrtcResult r = nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  res.log = prog.log();
  if (r == NVRTC_SUCCESS) {
    size_t n = 0;
    if (nvrtcGetCUBINSize(prog.get(), &n) != NVRTC_SUCCESS || n == 0) {
      res.log += "\nNVRTC produced no cubin for " + req.arch + " (is it a real architecture?)";
    } else {
      res.cubin.resize(n);
      nvrtcGetCUBIN(prog.get(), res.cubin.data());
      if (parse_ptxas_resources(res.log, req.entry, res.res)) {
        res.ok = true;
      } else {
        // First, so that the one-line summary of the failure names it.
        res.log = "error: entry point '" + req.entry +
                  "' not found in the compiled code (is it extern \"C\" __global__ and spelled as in the spec?)\n" +
                  res.log;
      }
    }
  } else if (r != NVRTC_ERROR_COMPILATION) {
    throw EngineError(std::string("nvrtcCompileProgram: ") + nvrtcGetErrorString(r) + "\n" + res.log);
  }
  if (!res.ok && inc.empty())
    res.log += "\n(note: no CUDA include directory with cuda_fp16.h was found; set EVOTUNE_CUDA_INCLUDE)";
  res.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CompileCache::global().put(key, res);
  return res;
}

}  // namespace evotune
