// Search: the space of valid configs of a kernel and the strategies that walk
// it (evolutionary, guided by a model of the results (model.hpp); random;
// exhaustive). Nothing here knows CUDA: a strategy proposes configs and
// observes the trials measured for them. Proposals are
// deterministic for a given seed and sequence of observations, never repeat a
// config the run has seen, and always satisfy the spec's constraints (invalid
// draws are repaired or re-drawn and cost no budget).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/spec.hpp"
#include "core/types.hpp"
#include "search/population.hpp"
#include "search/space.hpp"

namespace evotune {

struct StrategyOptions {
  uint64_t seed = 1;
  int elites = 6;             // K: the population that always survives
  int budget = 0;             // the run's budget, when known: a small one gets a shorter random start
  int initial_random = 10;    // configs (the default and the starts included) before breeding starts; up to
                              // twice as many while the model predicts the trials no better than their mean
  int children = 32;          // candidate children bred for each proposal; the model picks one
  int random_candidates = 8;  // random configs among the candidates
  int neighbourhood = 1;      // the best ok configs whose one-parameter variants are all candidates too
  double exploration = 3.0;   // the model's weight on room to explore against predicted fitness
  int tournament = 3;
  double crossover_rate = 0.7;
  double neighbour_rate = 0.7;  // mutation to a neighbouring value vs a random one
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The next config to evaluate, or nullopt when the space is exhausted.
  // Never returns a config already proposed or seeded via mark_seen().
  virtual std::optional<Config> propose() = 0;
  // A finished trial (any status), in proposal order.
  virtual void observe(const Trial& t) = 0;
  // Tells the strategy a config exists already (resume, user seeds).
  virtual void mark_seen(const Config& c) = 0;
  // How promising each of these proposed, not yet observed configs looks
  // now, from everything observed so far (lower is better); empty when the
  // strategy has no preference (they run in the order proposed).
  virtual std::vector<double> scores(const std::vector<Config>& /*proposed*/) { return {}; }
  // A proposed config that will not be evaluated after all (dropped before
  // the GPU): no longer in flight, still never proposed again.
  virtual void withdraw(const Config& /*c*/) {}
  virtual std::string name() const = 0;
  // Constraint rejections so far (draws that cost no budget).
  virtual int invalid_draws() const = 0;
  // The run's one population: every trial observed is offered to it (the
  // session assigns stored ids and takes out trials a later gate rejects).
  virtual const Population& population() const = 0;
  virtual Population& population() = 0;
};

// name: "evo", "random" or "exhaustive"; throws UsageError for others.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space, const StrategyOptions& opts);

}  // namespace evotune
