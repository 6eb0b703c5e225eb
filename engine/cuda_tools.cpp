#include "engine/cuda_tools.hpp"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "core/strings.hpp"

namespace evotune {

namespace {

bool executable(const std::string& p) {
  return !p.empty() && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::string locate_cuda_tool(const std::string& name, const char* env_var) {
  if (const char* e = std::getenv(env_var); e && *e) return executable(e) ? e : "";
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"))
    for (const auto& d : split(path, ':')) dirs.push_back(d);
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env); v && *v) dirs.push_back(std::string(v) + "/bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const auto& d : dirs)
    if (!d.empty() && executable(d + "/" + name)) return d + "/" + name;
  return "";
}

}  // namespace evotune
