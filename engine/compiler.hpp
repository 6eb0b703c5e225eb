// Engine: everything that touches NVRTC or the GPU — compiling candidates to
// cubins (pure, no GPU needed, thread-safe), the CUDA driver and runtime
// handles, the worker process that launches, verifies and times kernels in
// isolation, the client the tuner uses to talk to it, and the gate that runs
// a candidate under compute-sanitizer. The engine knows core/ types but
// nothing of the store or the search.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/types.hpp"

namespace evotune {

struct CompileRequest {
  std::string source_name;  // for messages: "kernel.cu"
  std::string source;
  std::string entry;  // must appear in the ptxas report
  std::vector<std::pair<std::string, std::string>> defines;
  std::string arch;  // "sm_90a", "sm_80"
  std::vector<std::string> options;
  std::vector<std::string> include_dirs;
  std::vector<std::pair<std::string, std::string>> headers;  // include name → text

  // Identity of the compilation, NVRTC version included (cache key).
  std::string key() const;
};

struct KernelSpec;
// A spec's kernel (source, entry, options, include directories, headers)
// compiled for `arch` with one problem's defines.
CompileRequest kernel_request(const KernelSpec& spec, const std::string& arch,
                              std::vector<std::pair<std::string, std::string>> defines);

struct CompileResult {
  bool ok = false;
  std::string cubin;
  std::string log;  // NVRTC + ptxas output (the whole log on failure)
  Resources res;    // registers, static smem, spills, stack, wgmma serialisation of `entry`
  double compile_ms = 0;
  bool cache_hit = false;
};

// Compiles to a cubin for `arch`. A source that does not compile is a result
// with ok=false and the log, never an exception; NVRTC failing to run at all
// throws EngineError. Thread-safe; needs no GPU.
CompileResult compile(const CompileRequest& req);

// Parses ptxas's `-v` report for one entry point. Returns false when the
// entry is not in the log.
bool parse_ptxas_resources(const std::string& log, const std::string& entry, Resources& out);

// "13.0"
std::string nvrtc_version();
// The CUDA include directory handed to NVRTC (cuda_fp16.h and friends):
// $EVOTUNE_CUDA_INCLUDE, $CUDA_HOME/include, $CUDA_PATH/include, the build's
// toolkit, /usr/local/cuda/include — the first that has cuda_fp16.h.
std::string cuda_include_dir();
// "sm_90a" for cc 90 and an arch-specific kernel, else "sm_90".
std::string arch_for(int cc, bool arch_specific);
// Parses "sm_90a" / "sm_80" / "90" into cc 90 and whether it is arch-specific.
std::pair<int, bool> parse_arch(const std::string& arch);

}  // namespace evotune
