// Datasets: every trial of a run (config, status, error, compile/verify/bench
// times, resources, measurements) with the run's kernel, problems and device,
// as one JSON document. `evotune export RUN --format dataset` writes one;
// `evotune run --replay FILE` evaluates configs from it instead of a GPU, so
// the search, resume and the tuner's pipeline run anywhere.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "store/store.hpp"

namespace evotune {

struct Dataset {
  std::string kernel;
  std::string spec_hash;
  std::vector<Problem> problems;
  std::string dtype;
  DeviceRecord device;
  std::string source;  // "run 7 of evotune.db, 2026-11-21T..."
  std::vector<Trial> trials;
  std::map<std::string, size_t> by_config;  // canonical config → index into trials

  const Trial* find(const Config& c) const;
};

std::string write_dataset(const RunInfo& run, const std::vector<Trial>& trials, const std::string& source);
// Throws UsageError naming the file when it cannot be read or is not a dataset.
Dataset read_dataset(const std::string& path);

}  // namespace evotune
