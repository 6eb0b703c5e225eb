// The space of valid configs of one kernel for one set of problems.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "core/types.hpp"

namespace evotune {

class SearchSpace {
 public:
  // The constraints are checked against every problem (and the device
  // traits). Binds the spec to the problems first: throws SpecError when one
  // of its expressions cannot be evaluated for them (KernelSpec::check_binding).
  SearchSpace(const KernelSpec& spec, std::vector<Problem> problems, DeviceTraits dev);

  const KernelSpec& spec() const { return *spec_; }
  const std::vector<Problem>& problems() const { return problems_; }
  const std::vector<ParamSpec>& params() const { return spec_->params; }

  // A constraint that cannot be evaluated for c is a SpecError, not a reason.
  bool valid(const Config& c) const { return !invalid_reason(c); }
  std::optional<std::string> invalid_reason(const Config& c) const;

  // Product of the parameter list sizes.
  double total_size() const;
  // All valid configs in lexicographic order of value indices (parameters in
  // spec order), when the product is small enough to walk (≤ limit; the walk
  // prunes on each constraint as soon as its parameters are set) and at most
  // kMaxValidConfigs are valid; nullptr otherwise. Cached after the first call.
  // (gemm_sm90's product is 955M; its walk, pruned, takes 1-2 seconds.)
  static constexpr size_t kMaxValidConfigs = 4'000'000;
  const std::vector<Config>* enumerate_valid(size_t limit = 4'000'000'000) const;
  // A uniformly random config (valid or not) from the product.
  Config random_config(std::mt19937_64& rng) const;
  Config default_config() const { return spec_->default_config(); }

  // Index of c's value of parameter i in its list.
  size_t value_index(const Config& c, size_t param) const;

 private:
  std::optional<std::vector<Config>> walk() const;

  const KernelSpec* spec_;
  std::vector<Problem> problems_;
  DeviceTraits dev_;
  mutable std::optional<std::vector<Config>> valid_;
  mutable bool enumerated_ = false;
};

}  // namespace evotune
