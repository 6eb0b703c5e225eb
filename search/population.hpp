// The elite population: the top-K ok trials by fitness (lower is better).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "core/types.hpp"

namespace evotune {

class Population {
 public:
  explicit Population(int k) : k_(k) {}

  // Offers a trial; only ok trials with a positive fitness can enter. Returns
  // true when the elite set changed. Ties keep the earlier trial first.
  bool offer(const Trial& t);
  // Best first.
  const std::vector<Trial>& elites() const { return elites_; }
  std::vector<int64_t> elite_ids() const;
  // Gives the trial of config c the id and seq the store assigned it (it was
  // offered before it was recorded, so the stored elites could include it).
  void assign_id(const Config& c, int64_t id, int seq);
  // Takes an ok trial out (a later gate found it faulty): the next one moves
  // up into the elites. Its config never enters again.
  void remove(const Config& c);
  const Trial* best() const { return elites_.empty() ? nullptr : &elites_.front(); }
  int k() const { return k_; }
  // Every ok trial seen, best first (the breeding pool beyond the elites).
  const std::vector<Trial>& ok_trials() const { return ok_; }

 private:
  int k_;
  std::vector<Trial> elites_;
  std::vector<Trial> ok_;
  std::set<Config> configs_;  // those in ok_: a config enters once
};

}  // namespace evotune
