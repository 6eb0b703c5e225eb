#include "search/strategy.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.hpp"
#include "search/model.hpp"
#include "search/random.hpp"

namespace evotune {

namespace {

// Failed draws (invalid or seen) after which a space too large to enumerate
// counts as used up.
constexpr int kMaxFailedDraws = 100'000;
// Draws evo tries from the product before it enumerates the space (draws are
// cheap while unseen valid configs are common; enumerating a large space is not).
constexpr int kEvoRandomDraws = 1'000;
// Children bred from the same parents before evo gives up on them.
constexpr int kRepairAttempts = 64;
// Values of one parameter a neighbourhood candidate may move to: those
// nearest the current one in the ordered list (all of a shorter list).
constexpr size_t kNeighbourValues = 16;
// How far the random start may run past its size (a multiple of it) while
// the model foresees the trials no better than their mean.
constexpr size_t kStartExtension = 2;

// Position of c in the odometer walk over value indices (last parameter
// fastest); nullopt when c holds a value outside its parameter's list.
std::optional<uint64_t> walk_rank(const SearchSpace& space, const Config& c) {
  uint64_t rank = 0;
  for (const ParamSpec& p : space.params()) {
    auto it = c.values.find(p.name);
    if (it == c.values.end()) return std::nullopt;
    auto pos = std::find(p.values.begin(), p.values.end(), it->second);
    if (pos == p.values.end()) return std::nullopt;
    rank = rank * p.values.size() + static_cast<uint64_t>(pos - p.values.begin());
  }
  return rank;
}

// The valid configs of an enumerable space not yet seen, for uniform picks
// without rejection. Removal is O(log n): swap with the last unseen slot.
class UnseenPool {
 public:
  UnseenPool(const SearchSpace& space, const std::vector<Config>& all, const std::unordered_set<std::string>& seen)
      : space_(space), all_(all), slot_(all.size(), kAbsent) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (seen.count(all[i].canonical())) continue;
      slot_[i] = unseen_.size();
      unseen_.push_back(i);
    }
  }

  bool empty() const { return unseen_.empty(); }

  Config take_random(std::mt19937_64& rng) {
    size_t i = unseen_[uniform_index(rng, unseen_.size())];
    remove_index(i);
    return all_[i];
  }

  void remove(const Config& c) {
    auto rank = walk_rank(space_, c);
    if (!rank) return;
    // all_ follows the walk, so its ranks ascend.
    auto it = std::lower_bound(all_.begin(), all_.end(), *rank,
                               [&](const Config& e, uint64_t r) { return *walk_rank(space_, e) < r; });
    if (it == all_.end() || !(*it == c)) return;
    remove_index(static_cast<size_t>(it - all_.begin()));
  }

 private:
  static constexpr size_t kAbsent = std::numeric_limits<size_t>::max();

  void remove_index(size_t i) {
    size_t s = slot_[i];
    if (s == kAbsent) return;
    size_t last = unseen_.back();
    unseen_[s] = last;
    slot_[last] = s;
    unseen_.pop_back();
    slot_[i] = kAbsent;
  }

  const SearchSpace& space_;
  const std::vector<Config>& all_;
  std::vector<size_t> unseen_;  // indices into all_
  std::vector<size_t> slot_;    // where index i sits in unseen_, or kAbsent
};

// What every strategy shares: the seen set, the default-first rule, the
// population, the count of constraint rejections.
class StrategyBase : public Strategy {
 public:
  StrategyBase(const SearchSpace& space, const StrategyOptions& opts)
      : space_(space), opts_(opts), rng_(opts.seed), population_(opts.elites) {}

  void observe(const Trial& t) override {
    remember(t.config);
    population_.offer(t);
  }
  void mark_seen(const Config& c) override { remember(c); }
  int invalid_draws() const override { return invalid_draws_; }
  const Population& population() const override { return population_; }
  Population& population() override { return population_; }

 protected:
  bool seen(const Config& c) const { return seen_.count(c.canonical()) > 0; }

  void remember(const Config& c) {
    if (seen_.insert(c.canonical()).second && unseen_pool_) unseen_pool_->remove(c);
  }

  Config propose_config(Config c) {
    remember(c);
    return c;
  }

  // The default config on the first call, when it is valid and unseen.
  std::optional<Config> default_once() {
    if (default_tried_) return std::nullopt;
    default_tried_ = true;
    Config d = space_.default_config();
    if (seen(d) || !space_.valid(d)) return std::nullopt;
    return d;
  }

  // A uniformly random unseen valid config: first up to `draws` draws from
  // the product, then a pick among the enumeration's unseen configs, or, for a
  // space too large to enumerate, more draws; nullopt when none is left.
  std::optional<Config> random_unseen(int draws) {
    if (auto c = draw_unseen(draws)) return c;
    if (const std::vector<Config>* all = space_.enumerate_valid()) {
      if (!unseen_pool_) unseen_pool_.emplace(space_, *all, seen_);
      if (unseen_pool_->empty()) return std::nullopt;
      return unseen_pool_->take_random(rng_);
    }
    return draw_unseen(kMaxFailedDraws);
  }

  // The spec's start configs in order, each valid and unseen one once.
  std::optional<Config> next_start() {
    const std::vector<Config>& starts = space_.spec().starts;
    while (next_start_ < starts.size()) {
      const Config& c = starts[next_start_++];
      if (!seen(c) && space_.valid(c)) return c;
    }
    return std::nullopt;
  }

  std::optional<Config> draw_unseen(int draws) {
    for (int i = 0; i < draws; ++i) {
      Config c = space_.random_config(rng_);
      if (seen(c)) continue;
      if (!space_.valid(c)) {
        ++invalid_draws_;
        continue;
      }
      return c;
    }
    return std::nullopt;
  }

  const SearchSpace& space_;
  StrategyOptions opts_;
  std::mt19937_64 rng_;
  Population population_;
  int invalid_draws_ = 0;
  // Every config proposed, marked or observed; looked up, never iterated.
  std::unordered_set<std::string> seen_;

 private:
  bool default_tried_ = false;
  size_t next_start_ = 0;  // spec starts proposed or skipped so far (evo)
  std::optional<UnseenPool> unseen_pool_;
};

class RandomStrategy : public StrategyBase {
 public:
  using StrategyBase::StrategyBase;
  std::string name() const override { return "random"; }

  std::optional<Config> propose() override {
    if (auto d = default_once()) return propose_config(*d);
    // Straight to the enumeration where there is one: no rejections.
    auto c = random_unseen(0);
    if (!c) return std::nullopt;
    return propose_config(*c);
  }
};

class ExhaustiveStrategy : public StrategyBase {
 public:
  ExhaustiveStrategy(const SearchSpace& space, const StrategyOptions& opts)
      : StrategyBase(space, opts), index_(space.params().size(), 0) {}
  std::string name() const override { return "exhaustive"; }

  // The default, then an odometer walk over the product (the enumeration's
  // order), made lazily so a large space costs only what the budget visits.
  std::optional<Config> propose() override {
    if (auto d = default_once()) return propose_config(*d);
    const auto& ps = space_.params();
    while (!done_) {
      Config c;
      for (size_t i = 0; i < ps.size(); ++i) c.values[ps[i].name] = ps[i].values[index_[i]];
      advance();
      if (seen(c)) continue;
      if (!space_.valid(c)) {
        ++invalid_draws_;
        continue;
      }
      return propose_config(c);
    }
    return std::nullopt;
  }

 private:
  void advance() {
    const auto& ps = space_.params();
    for (size_t digit = ps.size(); digit > 0; --digit) {
      size_t& at = index_[digit - 1];
      at = at + 1 < ps[digit - 1].values.size() ? at + 1 : 0;
      if (at != 0) return;
    }
    done_ = true;  // every digit wrapped
  }

  std::vector<size_t> index_;  // value index per parameter of the next config
  bool done_ = false;
};

// Steady-state genetic algorithm, guided by a model of the results: after
// a random start, each proposal breeds candidate children from the ok
// trials observed so far, adds every unseen one-parameter variant of the
// best (its whole neighbourhood, so the model can finish a local search the
// mutations would reach only by chance) and draws a few random configs, and
// the model picks the most promising of them, counting the configs in
// flight as taken. So proposals may run ahead of observations without all
// asking for the same place.
class EvoStrategy : public StrategyBase {
 public:
  EvoStrategy(const SearchSpace& space, const StrategyOptions& opts) : StrategyBase(space, opts), model_(space) {
    for (size_t i = 0; i < space.params().size(); ++i)
      if (space.params()[i].values.size() > 1) mutable_params_.push_back(i);
  }
  std::string name() const override { return "evo"; }

  std::optional<Config> propose() override {
    if (auto d = default_once()) return propose_evo(*d);
    if (auto st = next_start()) return propose_evo(*st);
    std::optional<Config> c;
    if (!starting()) c = model_pick();
    if (!c) c = random_unseen(kEvoRandomDraws);
    if (!c) return std::nullopt;
    return propose_evo(*c);
  }

  // The model's score of each, counting the other configs in flight (not
  // the config itself) as taken.
  std::vector<double> scores(const std::vector<Config>& proposed) override {
    std::vector<double> out;
    refit();
    if (model_.ok_count() == 0) return out;  // nothing to tell them apart
    for (const Config& c : proposed) {
      if (!walk_rank(space_, c)) {
        out.push_back(std::numeric_limits<double>::infinity());
        continue;
      }
      const std::string key = c.canonical();
      std::vector<Surrogate::Point> others;
      others.reserve(pending_.size());
      for (const auto& [k, x] : pending_)
        if (k != key) others.push_back(x);
      out.push_back(model_.score(model_.point(c), others, opts_.exploration));
    }
    return out;
  }

  void withdraw(const Config& c) override { pending_.erase(c.canonical()); }

  void observe(const Trial& t) override {
    StrategyBase::observe(t);
    pending_.erase(t.config.canonical());
    if (t.status == TrialStatus::invalid || !walk_rank(space_, t.config)) return;
    model_.add(t.config, t.ok() && t.fitness > 0 ? std::optional<double>(t.fitness) : std::nullopt);
    model_stale_ = true;
  }

 private:
  // Whether the next config is a random one. Marked configs count too, so
  // a resumed run goes straight to breeding. Past its size, the start goes
  // on while the model has foreseen the trials so far no better than their
  // mean would (a space whose values act together more than alone, or a
  // start that saw too little): its picks would only follow chance
  // resemblances to the first results.
  bool starting() {
    if (seen_.size() < start_size() || population_.ok_trials().size() < 2) return true;
    if (seen_.size() >= kStartExtension * start_size()) return false;
    refit();
    return model_.skill() <= 0;
  }

  // Configs before breeding starts: the default and the spec's starts
  // count; a small budget gets a shorter start.
  size_t start_size() const {
    int n = std::max(opts_.initial_random, 0);
    if (opts_.budget > 0) n = std::min(n, std::max(2, opts_.budget / 5));
    return static_cast<size_t>(n);
  }

  Config propose_evo(const Config& c) {
    if (walk_rank(space_, c)) pending_.emplace(c.canonical(), model_.point(c));
    return propose_config(c);
  }

  std::vector<Surrogate::Point> pending_points() const {
    std::vector<Surrogate::Point> out;
    out.reserve(pending_.size());
    for (const auto& [key, x] : pending_) out.push_back(x);
    return out;
  }

  // Up to n valid unseen configs, uniformly at random, without taking them.
  std::vector<Config> sample_unseen(size_t n) {
    std::vector<Config> out;
    std::unordered_set<std::string> taken;
    const std::vector<Config>* all = space_.enumerate_valid();
    if (all && all->empty()) return out;
    for (size_t tries = 0; out.size() < n && tries < 8 * n + kEvoRandomDraws; ++tries) {
      Config c = all ? (*all)[uniform_index(rng_, all->size())] : space_.random_config(rng_);
      if (seen(c) || taken.count(c.canonical())) continue;
      if (!all && !space_.valid(c)) {
        ++invalid_draws_;
        continue;
      }
      taken.insert(c.canonical());
      out.push_back(std::move(c));
    }
    return out;
  }

  // Candidate children bred from the ok trials, the neighbourhoods of the
  // best, and a few random configs; the one the model scores best.
  std::optional<Config> model_pick() {
    refit();
    const auto& ok = population_.ok_trials();
    std::vector<Config> candidates;
    std::unordered_set<std::string> taken;
    for (int i = 0; i < opts_.children; ++i)
      if (auto child = breed(ok); child && taken.insert(child->canonical()).second) candidates.push_back(*child);
    const size_t around = std::min(ok.size(), static_cast<size_t>(std::max(opts_.neighbourhood, 0)));
    for (size_t i = 0; i < around; ++i)
      for (Config& c : neighbours(ok[i].config))
        if (taken.insert(c.canonical()).second) candidates.push_back(std::move(c));
    for (Config& c : sample_unseen(static_cast<size_t>(std::max(opts_.random_candidates, 0))))
      if (taken.insert(c.canonical()).second) candidates.push_back(std::move(c));
    const std::vector<Surrogate::Point> pending = pending_points();
    std::optional<Config> best;
    double best_score = std::numeric_limits<double>::infinity();
    for (Config& c : candidates) {
      const double score = model_.score(model_.point(c), pending, opts_.exploration);
      if (score < best_score) best_score = score, best = std::move(c);
    }
    return best;
  }

  void refit() {
    if (!model_stale_) return;
    model_.refit();
    model_stale_ = false;
  }

  // Parents come from the best `pool` ok trials: the elites plus as many
  // runners-up again, so the elites always breed and dominate the pool.
  size_t breeding_pool_size(size_t ok_count) const {
    size_t k = static_cast<size_t>(std::max(population_.k(), 1));
    return std::min(ok_count, std::max<size_t>(2 * k, 2));
  }

  // Tournament over pool ranks: the best (lowest rank) of `tournament` draws.
  size_t tournament_pick(size_t pool) {
    size_t best = uniform_index(rng_, pool);
    for (int i = 1; i < opts_.tournament; ++i) best = std::min(best, uniform_index(rng_, pool));
    return best;
  }

  std::optional<Config> breed(const std::vector<Trial>& ok) {
    size_t pool = breeding_pool_size(ok.size());
    const Config& first = ok[tournament_pick(pool)].config;
    const Config* second = nullptr;
    if (chance(rng_, opts_.crossover_rate)) {
      size_t b = tournament_pick(pool);
      // A self-cross is a copy; draw again once for a distinct mate.
      if (ok[b].config == first) b = tournament_pick(pool);
      second = &ok[b].config;
    }
    for (int attempt = 0; attempt < kRepairAttempts; ++attempt) {
      Config child = second ? crossover(first, *second) : first;
      mutate(child);
      if (seen(child)) continue;
      if (!space_.valid(child)) {
        ++invalid_draws_;
        continue;
      }
      return child;
    }
    return std::nullopt;
  }

  // The unseen valid configs that differ from c in one parameter, moved to
  // one of the kNeighbourValues values nearest its own (no randomness).
  std::vector<Config> neighbours(const Config& c) {
    std::vector<Config> out;
    if (!walk_rank(space_, c)) return out;  // a value off its list (a user's seed)
    for (size_t i : mutable_params_) {
      const ParamSpec& p = space_.params()[i];
      const size_t n = p.values.size(), at = space_.value_index(c, i);
      const size_t span = std::min(n, kNeighbourValues);
      const size_t lo = std::min(at > span / 2 ? at - span / 2 : 0, n - span);
      for (size_t to = lo; to < lo + span; ++to) {
        if (to == at) continue;
        Config v = c;
        v.values[p.name] = p.values[to];
        if (!seen(v) && space_.valid(v)) out.push_back(std::move(v));
      }
    }
    return out;
  }

  Config crossover(const Config& a, const Config& b) {
    Config child = a;
    for (const ParamSpec& p : space_.params())
      if (chance(rng_, 0.5)) child.values[p.name] = b.values.at(p.name);
    return child;
  }

  // Each parameter moves with probability 1/n; at least one always does.
  void mutate(Config& c) {
    if (mutable_params_.empty()) return;
    double rate = 1.0 / static_cast<double>(mutable_params_.size());
    bool moved = false;
    for (size_t i : mutable_params_) {
      if (!chance(rng_, rate)) continue;
      move_param(c, i);
      moved = true;
    }
    if (!moved) move_param(c, mutable_params_[uniform_index(rng_, mutable_params_.size())]);
  }

  // To a neighbour in the ordered list, or to any other value.
  void move_param(Config& c, size_t param) {
    const ParamSpec& p = space_.params()[param];
    size_t n = p.values.size();
    size_t at = space_.value_index(c, param);
    size_t to;
    if (chance(rng_, opts_.neighbour_rate)) {
      if (at == 0)
        to = 1;
      else if (at == n - 1)
        to = n - 2;
      else
        to = chance(rng_, 0.5) ? at - 1 : at + 1;
    } else {
      to = uniform_index(rng_, n - 1);
      if (to >= at) ++to;
    }
    c.values[p.name] = p.values[to];
  }

  std::vector<size_t> mutable_params_;  // those with more than one value
  Surrogate model_;
  bool model_stale_ = false;
  // Proposed, not yet observed: canonical config → the model's point.
  std::map<std::string, Surrogate::Point> pending_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space,
                                        const StrategyOptions& opts) {
  if (name == "evo") return std::make_unique<EvoStrategy>(space, opts);
  if (name == "random") return std::make_unique<RandomStrategy>(space, opts);
  if (name == "exhaustive") return std::make_unique<ExhaustiveStrategy>(space, opts);
  throw UsageError("unknown strategy '" + name + "' (expected evo, random or exhaustive)");
}

}  // namespace evotune
