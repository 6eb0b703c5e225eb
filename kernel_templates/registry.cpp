#include "kernel_templates/registry.hpp"

#include <filesystem>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

const std::map<std::string, std::string>& embedded_files();  // generated

namespace {

constexpr const char* kCommonDir = "kernel_templates/common/";

bool is_builtin(const std::string& name) {
  return embedded_files().count("kernel_templates/" + name + "/spec.toml") != 0;
}

// The shared device helpers (evotune_ptx.cuh, ...) are available to every
// kernel, built-in or the user's, as #include "name". A kernel gets only
// those it includes (directly or through another), so adding a helper does
// not change the identity (content hash) of kernels that never use it. A
// header of the user's own of the same name (already in s.headers, read by
// load_spec_file) is kept in its place.
void add_common_headers(KernelSpec& s) {
  std::vector<std::string> pending = {s.source_text, s.reference.source_text};
  std::set<std::string> added;
  for (const auto& [name, text] : s.headers) {
    added.insert(name);
    pending.push_back(text);
  }
  while (!pending.empty()) {
    std::string text = pending.back();
    pending.pop_back();
    for (const auto& [path, body] : embedded_files()) {
      if (!starts_with(path, kCommonDir)) continue;
      std::string name = path.substr(std::string(kCommonDir).size());
      if (added.count(name) || text.find("\"" + name + "\"") == std::string::npos) continue;
      added.insert(name);
      s.headers.emplace_back(name, body);
      pending.push_back(body);
    }
  }
}

}  // namespace

std::vector<std::string> builtin_kernel_names() {
  std::vector<std::string> names;
  for (const auto& [path, text] : embedded_files()) {
    const std::string prefix = "kernel_templates/";
    if (starts_with(path, prefix) && ends_with(path, "/spec.toml"))
      names.push_back(path.substr(prefix.size(), path.size() - prefix.size() - std::string("/spec.toml").size()));
  }
  return names;
}

std::string embedded_file(const std::string& relpath) {
  auto it = embedded_files().find(relpath);
  return it == embedded_files().end() ? std::string() : it->second;
}

KernelSpec load_kernel(const std::string& name_or_path) {
  if (is_builtin(name_or_path)) {
    const std::string dir = "kernel_templates/" + name_or_path + "/";
    KernelSpec s = parse_spec(embedded_file(dir + "spec.toml"), "builtin:" + name_or_path, [&](const std::string& rel) {
      // A template may name another's file ("../sdpa_fwd_sm90/kernel.cu").
      const std::string path = std::filesystem::path(dir + rel).lexically_normal().generic_string();
      auto it = embedded_files().find(path);
      if (it == embedded_files().end()) throw std::runtime_error("no embedded file " + path);
      return it->second;
    });
    s.origin = "builtin";
    add_common_headers(s);
    return s;
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) {
    KernelSpec s = load_spec_file(name_or_path);
    add_common_headers(s);
    return s;
  }
  throw UsageError("unknown kernel '" + name_or_path + "': built-in kernels are " + join(builtin_kernel_names(), ", ") +
                   "; or give the path of a spec file (see docs/SPEC_FORMAT.md)");
}

}  // namespace evotune
