#include "search/space.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "search/random.hpp"

namespace evotune {

SearchSpace::SearchSpace(const KernelSpec& spec, std::vector<Problem> problems, DeviceTraits dev)
    : spec_(&spec), problems_(std::move(problems)), dev_(dev) {}

std::optional<std::string> SearchSpace::invalid_reason(const Config& c) const {
  return spec_->invalid_reason(c, problems_, dev_);
}

double SearchSpace::total_size() const {
  return spec_->space_size();
}

const std::vector<Config>* SearchSpace::enumerate_valid(size_t limit) const {
  if (total_size() > static_cast<double>(limit)) return nullptr;
  if (enumerated_) return &*valid_;
  std::vector<Config> out;
  const auto& ps = params();
  // An odometer over value indices: the last parameter turns fastest.
  std::vector<size_t> index(ps.size(), 0);
  Config c;
  for (const auto& p : ps) c.values[p.name] = p.values[0];
  for (;;) {
    if (valid(c)) out.push_back(c);
    size_t digit = ps.size();
    for (; digit > 0; --digit) {
      const ParamSpec& p = ps[digit - 1];
      size_t& at = index[digit - 1];
      at = at + 1 < p.values.size() ? at + 1 : 0;
      c.values[p.name] = p.values[at];
      if (at != 0) break;
    }
    if (digit == 0) break;  // every digit wrapped: the walk is complete
  }
  valid_ = std::move(out);
  enumerated_ = true;
  return &*valid_;
}

Config SearchSpace::random_config(std::mt19937_64& rng) const {
  Config c;
  for (const auto& p : params()) c.values[p.name] = p.values[uniform_index(rng, p.values.size())];
  return c;
}

size_t SearchSpace::value_index(const Config& c, size_t param) const {
  const ParamSpec& p = params().at(param);
  auto it = c.values.find(p.name);
  if (it == c.values.end()) throw UsageError("config " + c.canonical() + " has no parameter " + p.name);
  auto pos = std::find(p.values.begin(), p.values.end(), it->second);
  if (pos == p.values.end()) throw UsageError(p.name + "=" + std::to_string(it->second) + " is not one of its values");
  return static_cast<size_t>(pos - p.values.begin());
}

}  // namespace evotune
