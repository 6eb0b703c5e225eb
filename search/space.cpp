#include "search/space.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "search/random.hpp"

namespace evotune {

SearchSpace::SearchSpace(const KernelSpec& spec, std::vector<Problem> problems, DeviceTraits dev)
    : spec_(&spec), problems_(std::move(problems)), dev_(dev) {
  spec_->check_binding(problems_, dev_);
}

std::optional<std::string> SearchSpace::invalid_reason(const Config& c) const {
  return spec_->invalid_reason(c, problems_, dev_);
}

double SearchSpace::total_size() const {
  return spec_->space_size();
}

namespace {

// The deepest parameter (index in spec order) an expression reads, directly
// or through [lets]; -1 when it reads none (dims, device traits only).
int depth_of(const KernelSpec& spec, const Expr& e) {
  int d = -1;
  for (const std::string& name : spec.names_used(e))
    for (size_t i = 0; i < spec.params.size(); ++i)
      if (spec.params[i].name == name) d = std::max(d, static_cast<int>(i));
  return d;
}

}  // namespace

const std::vector<Config>* SearchSpace::enumerate_valid(size_t limit) const {
  if (total_size() > static_cast<double>(limit)) return nullptr;
  if (!enumerated_) {
    valid_ = walk();  // a SpecError leaves nothing cached: the next call throws it again
    enumerated_ = true;
  }
  return valid_ ? &*valid_ : nullptr;
}

std::optional<std::vector<Config>> SearchSpace::walk() const {
  const auto& ps = params();
  if (ps.empty()) return valid(Config{}) ? std::vector<Config>{Config{}} : std::vector<Config>{};
  // Depth-first over the parameters in spec order (the last turns fastest),
  // checking each constraint as soon as the parameters it reads are set, so a
  // violated constraint prunes every config below that point at once.
  std::vector<std::vector<const Expr*>> at_depth(ps.size());
  std::vector<const Expr*> at_root;
  for (const Expr& e : spec_->constraints) {
    const int d = depth_of(*spec_, e);
    (d < 0 ? at_root : at_depth[static_cast<size_t>(d)]).push_back(&e);
  }
  Config c;
  for (const auto& p : ps) c.values[p.name] = p.values[0];
  // Whether a constraint failed to evaluate on the current path (per depth).
  std::vector<char> failed(ps.size() + 1, 0);
  auto holds = [&](const std::vector<const Expr*>& es, char& failed_here) {
    failed_here = 0;
    if (es.empty()) return true;
    for (const Problem& prob : problems_) {
      Scope scope(*spec_, &prob, &c, dev_);
      for (const Expr* e : es) {
        try {
          if (!scope.eval(*e).truthy()) return false;
        } catch (const ExprError&) {
          // No pruning on it: the full check of each config below reports it
          // unless another constraint rejects the config.
          failed_here = 1;
        }
      }
    }
    return true;
  };
  std::vector<Config> out;
  if (holds(at_root, failed[ps.size()])) {
    std::vector<size_t> index(ps.size(), 0);
    size_t d = 0;  // the parameter being tried
    for (;;) {
      c.values[ps[d].name] = ps[d].values[index[d]];
      bool descend = holds(at_depth[d], failed[d]);
      if (descend && d + 1 == ps.size()) {
        // Every constraint has held on this path, each read once the values
        // it depends on were final; where one failed to evaluate, the full
        // check reports it (or another constraint rejects the config).
        const bool any_failed = std::find(failed.begin(), failed.end(), 1) != failed.end();
        if (!any_failed || valid(c)) out.push_back(c);
        if (out.size() > kMaxValidConfigs) return std::nullopt;
        descend = false;
      }
      if (descend) {
        index[++d] = 0;
        continue;
      }
      // Next value at this depth, or back up to the nearest unfinished one.
      while (++index[d] == ps[d].values.size()) {
        if (d == 0) return out;
        --d;
      }
    }
  }
  return out;
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
