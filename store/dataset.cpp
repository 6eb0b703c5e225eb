#include "store/dataset.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

namespace {
constexpr const char* kFormat = "evotune-dataset";
constexpr int kVersion = 1;
}  // namespace

const Trial* Dataset::find(const Config& c) const {
  auto it = by_config.find(c.canonical());
  return it == by_config.end() ? nullptr : &trials[it->second];
}

std::string write_dataset(const RunInfo& run, const std::vector<Trial>& trials, const std::string& source) {
  nlohmann::json j = {{"format", kFormat},          {"version", kVersion},      {"kernel", run.kernel},
                      {"spec_hash", run.spec_hash}, {"problems", run.problems}, {"dtype", run.dtype},
                      {"device", run.device},       {"source", source},         {"trials", nlohmann::json::array()}};
  for (const Trial& t : trials) {
    nlohmann::json x = t;
    x.erase("id");
    x.erase("run_id");
    x.erase("created_at");
    j["trials"].push_back(x);
  }
  return j.dump(1) + "\n";
}

Dataset read_dataset(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const std::exception& e) {
    throw UsageError("cannot read dataset " + path + ": " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw UsageError(path + " is not an evotune dataset (write one with `evotune export RUN --format dataset`)");
  if (j.value("version", 0) > kVersion)
    throw UsageError(path + " is a dataset of a newer evotune (version " + std::to_string(j.value("version", 0)) + ")");
  Dataset d;
  try {
    d.kernel = j.at("kernel");
    d.spec_hash = j.at("spec_hash");
    d.problems = j.at("problems").get<std::vector<Problem>>();
    d.dtype = j.at("dtype");
    d.device = j.at("device").get<DeviceRecord>();
    d.source = j.value("source", "");
    for (const auto& x : j.at("trials")) {
      d.trials.push_back(x.get<Trial>());
      d.by_config.emplace(d.trials.back().config.canonical(), d.trials.size() - 1);
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("dataset " + path + " is malformed: " + e.what());
  }
  return d;
}

}  // namespace evotune
