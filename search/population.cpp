#include "search/population.hpp"

#include <algorithm>

namespace evotune {

namespace {

// Lower fitness first; on a tie the earlier trial stays ahead.
bool better(const Trial& a, const Trial& b) {
  if (a.fitness != b.fitness) return a.fitness < b.fitness;
  return a.seq < b.seq;
}

}  // namespace

bool Population::offer(const Trial& t) {
  if (!t.ok() || !(t.fitness > 0)) return false;
  // A config enters once, so a re-offered trial cannot take two elite slots.
  if (!configs_.insert(t.config).second) return false;
  // upper_bound: among equal keys the one offered first stays ahead.
  auto pos = std::upper_bound(ok_.begin(), ok_.end(), t, better);
  size_t rank = static_cast<size_t>(pos - ok_.begin());
  ok_.insert(pos, t);
  size_t k = static_cast<size_t>(std::max(k_, 0));
  if (rank >= k) return false;
  elites_.assign(ok_.begin(), ok_.begin() + static_cast<std::ptrdiff_t>(std::min(k, ok_.size())));
  return true;
}

void Population::remove(const Config& c) {
  ok_.erase(std::remove_if(ok_.begin(), ok_.end(), [&](const Trial& t) { return t.config == c; }), ok_.end());
  const size_t k = static_cast<size_t>(std::max(k_, 0));
  elites_.assign(ok_.begin(), ok_.begin() + static_cast<std::ptrdiff_t>(std::min(k, ok_.size())));
}

std::vector<int64_t> Population::elite_ids() const {
  std::vector<int64_t> ids;
  for (const Trial& t : elites_) ids.push_back(t.id);
  return ids;
}

void Population::assign_id(const Config& c, int64_t id, int seq) {
  for (auto* list : {&ok_, &elites_})
    for (Trial& t : *list)
      if (t.config == c) {
        t.id = id;
        t.seq = seq;
      }
}

}  // namespace evotune
