// On-disk cache of compile results, keyed by CompileRequest::key() (source,
// headers, defines, options, arch and NVRTC version). Entries are written to
// a temporary name and renamed, so concurrent evotune processes and a kill
// mid-write never leave a torn entry.
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace evotune {

struct CompileResult;

class CompileCache {
 public:
  // The process-wide cache: $EVOTUNE_CACHE_DIR, else $XDG_CACHE_HOME/evotune,
  // else ~/.cache/evotune. Disabled with set_enabled(false) or
  // EVOTUNE_CACHE_DIR=off.
  static CompileCache& global();

  void set_dir(const std::string& dir);
  void set_enabled(bool on);
  bool enabled() const;
  const std::string& dir() const { return dir_; }

  std::optional<CompileResult> get(const std::string& key) const;
  void put(const std::string& key, const CompileResult& r) const;

 private:
  CompileCache();
  mutable std::mutex mu_;
  std::string dir_;
  bool enabled_ = true;
};

}  // namespace evotune
