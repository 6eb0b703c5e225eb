#include "search/space.hpp"

#include <algorithm>
#include <map>
#include <set>

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

namespace {

// The deepest parameter (index in spec order) an expression depends on,
// through [lets]; -1 when it depends on none (dims, device traits only).
class DepthOf {
 public:
  explicit DepthOf(const KernelSpec& spec) : spec_(spec) {}

  int of(const Expr& e) {
    int d = -1;
    for (const std::string& id : e.identifiers()) d = std::max(d, of_name(id));
    return d;
  }

 private:
  int of_name(const std::string& name) {
    for (size_t i = 0; i < spec_.params.size(); ++i)
      if (spec_.params[i].name == name) return static_cast<int>(i);
    auto let = spec_.lets.find(name);
    if (let == spec_.lets.end()) return -1;
    if (auto m = memo_.find(name); m != memo_.end()) return m->second;
    // A cyclic let fails when evaluated; here it only needs to terminate.
    if (!visiting_.insert(name).second) return static_cast<int>(spec_.params.size()) - 1;
    const int d = of(let->second);
    visiting_.erase(name);
    return memo_[name] = d;
  }

  const KernelSpec& spec_;
  std::map<std::string, int> memo_;
  std::set<std::string> visiting_;
};

}  // namespace

const std::vector<Config>* SearchSpace::enumerate_valid(size_t limit) const {
  if (total_size() > static_cast<double>(limit)) return nullptr;
  if (enumerated_) return valid_ ? &*valid_ : nullptr;
  enumerated_ = true;
  const auto& ps = params();
  if (ps.empty()) {
    valid_.emplace();
    if (valid(Config{})) valid_->push_back(Config{});
    return &*valid_;
  }
  // Depth-first over the parameters in spec order (the last turns fastest),
  // checking each constraint as soon as the parameters it reads are set, so a
  // violated constraint prunes every config below that point at once.
  DepthOf depth_of(*spec_);
  std::vector<std::vector<const Expr*>> at_depth(ps.size());
  std::vector<const Expr*> at_root;
  for (const Expr& e : spec_->constraints) {
    const int d = depth_of.of(e);
    (d < 0 ? at_root : at_depth[static_cast<size_t>(d)]).push_back(&e);
  }
  Config c;
  for (const auto& p : ps) c.values[p.name] = p.values[0];
  auto holds = [&](const std::vector<const Expr*>& es) {
    if (es.empty()) return true;
    for (const Problem& prob : problems_) {
      Scope scope(*spec_, &prob, &c, dev_);
      for (const Expr* e : es) {
        try {
          if (!scope.eval(*e).truthy()) return false;
        } catch (const ExprError&) {
          return false;  // invalid_reason reports it as a constraint error
        }
      }
    }
    return true;
  };
  std::vector<Config> out;
  if (holds(at_root)) {
    std::vector<size_t> index(ps.size(), 0);
    size_t d = 0;  // the parameter being tried
    for (;;) {
      c.values[ps[d].name] = ps[d].values[index[d]];
      bool descend = holds(at_depth[d]);
      if (descend && d + 1 == ps.size()) {
        if (valid(c)) out.push_back(c);  // every constraint checked once more, in full
        if (out.size() > kMaxValidConfigs) return nullptr;
        descend = false;
      }
      if (descend) {
        index[++d] = 0;
        continue;
      }
      // Next value at this depth, or back up to the nearest unfinished one.
      while (++index[d] == ps[d].values.size()) {
        if (d == 0) {
          valid_ = std::move(out);
          return &*valid_;
        }
        --d;
      }
    }
  }
  valid_ = std::move(out);
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
