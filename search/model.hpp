// A cheap model of the results so far, to rank candidate configs before any
// of them is evaluated. A config is a point in [0, 1]^d: each parameter with
// more than one value contributes its value's index in the ordered list,
// scaled. The estimate of a point's log fitness has two parts: an additive
// one, the mean plus one effect per parameter value (each value's mean
// residual, shrunk towards zero where it has few measurements, fitted by
// backfitting), which carries what each value does on its own to
// combinations not measured yet; and a distance-weighted mean of the
// residuals of its nearest measured neighbours, which carries what the
// values do together. Where the values act together more than on their own,
// the additive part misleads: so the estimate blends it with the
// neighbours' mean log fitness alone, each weighted by the inverse of its
// squared error on the trials it predicted before they were added (a
// space decides which serves it). Distances weight each parameter by the share of the
// measured variance its values explain (so a parameter that does not matter
// does not make neighbours far). A failed trial counts as bad as the worst
// ok one. The room left to explore at a point is its distance to the
// nearest config measured or in flight: configs in flight leave no room
// around them, so a window of proposals spreads out instead of asking for
// the same place many times. No randomness: the same trials give the same
// scores.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/types.hpp"
#include "search/space.hpp"

namespace evotune {

class Surrogate {
 public:
  using Point = std::vector<double>;

  explicit Surrogate(const SearchSpace& space);

  Point point(const Config& c) const;
  // A measured config: its fitness when ok, nullopt when it failed.
  void add(const Config& c, std::optional<double> fitness);
  // Parameter weights and the failures' value from every point added so
  // far; call after adding and before scoring.
  void refit();

  size_t size() const { return points_.size(); }
  size_t ok_count() const { return ok_count_; }
  // Estimated log fitness at x (lower is better); needs an ok point.
  double predict(const Point& x) const;
  // Distance from x to the nearest of the measured points and `pending`,
  // in the model's weights, scaled to [0, 1].
  double room(const Point& x, const std::vector<Point>& pending) const;
  // Lower is more promising: predicted log fitness less `exploration` ×
  // the spread of the measured log fitness × the room at x.
  double score(const Point& x, const std::vector<Point>& pending, double exploration) const;
  const std::vector<double>& weights() const { return weights_; }
  // The additive estimate's share of the blend, in [0, 1] (1 until there
  // are errors to weigh).
  double additive_share() const { return additive_share_; }
  // How well the model has foreseen the ok trials it predicted before they
  // were added: one less the better estimate's mean squared error over the
  // variance of the ok log fitness (1: exact; 0 or less: no better than
  // the mean; 0 until there is a prediction to judge).
  double skill() const;

 private:
  double distance2(const Point& a, const Point& b) const;

  const SearchSpace& space_;
  std::vector<size_t> dims_;  // parameters with more than one value
  std::vector<Point> points_;
  std::vector<std::optional<double>> log_fitness_;  // nullopt: failed
  size_t ok_count_ = 0;
  std::vector<double> weights_;  // per dim
  double weight_sum_ = 1;
  double fail_value_ = 0;  // log fitness a failure counts as
  double additive(const Point& x) const;
  // The two estimates at x: additive part plus the neighbours' residuals,
  // and the neighbours' log fitness alone.
  std::pair<double, double> estimates(const Point& x) const;
  std::vector<double> target_;                    // per point of the last refit: log fitness, failures counted
  double err_additive_ = 0, err_neighbours_ = 0;  // squared errors of each estimate on points before they were added
  size_t predicted_ = 0;                          // the points those errors were summed over
  double additive_share_ = 1;
  size_t value_at(const Point& x, size_t d) const;

  double mean_ = 0;                          // of the log fitness, failures counted
  std::vector<std::vector<double>> effect_;  // per dim, per value index
  std::vector<double> residual_;             // per point: log fitness less the additive part
  double spread_ = 0;                        // standard deviation of the ok log fitness
};

}  // namespace evotune
