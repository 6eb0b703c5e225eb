#include "search/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace evotune {

namespace {

// Neighbours an estimate averages over.
constexpr size_t kNeighbours = 5;
// Weight of a parameter whose values explain none of the variance: small,
// not zero, so that configs apart only there are still apart.
constexpr double kMinWeight = 0.2;
// Shrinkage of a value's additive effect: its residuals are summed over as
// many measurements again, so a value measured once moves the estimate a
// third of what it saw.
constexpr double kShrink = 2.0;
// Backfitting sweeps over the parameters (the effects settle in a few).
constexpr int kSweeps = 10;

// Share of the variance of y that the groups explain, corrected for the
// share that as many groups would explain by chance (epsilon squared), in
// [0, 1]. group[i] in [0, groups).
double explained_share(const std::vector<double>& y, const std::vector<size_t>& group, size_t groups) {
  const size_t n = y.size();
  if (n < 3 || groups < 2) return 0;
  double mean = 0;
  for (double v : y) mean += v;
  mean /= static_cast<double>(n);
  std::vector<double> sum(groups, 0), count(groups, 0);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    sum[group[i]] += y[i];
    count[group[i]] += 1;
    total += (y[i] - mean) * (y[i] - mean);
  }
  if (total <= 0) return 0;
  double between = 0;
  size_t used = 0;
  for (size_t g = 0; g < groups; ++g) {
    if (count[g] == 0) continue;
    ++used;
    const double m = sum[g] / count[g];
    between += count[g] * (m - mean) * (m - mean);
  }
  if (used < 2 || n <= used) return 0;
  const double within_mean_square = (total - between) / static_cast<double>(n - used);
  const double share = (between - static_cast<double>(used - 1) * within_mean_square) / total;
  return std::clamp(share, 0.0, 1.0);
}

}  // namespace

Surrogate::Surrogate(const SearchSpace& space) : space_(space) {
  for (size_t i = 0; i < space.params().size(); ++i)
    if (space.params()[i].values.size() > 1) dims_.push_back(i);
  weights_.assign(dims_.size(), 1.0);
  weight_sum_ = std::max<double>(1.0, static_cast<double>(dims_.size()));
}

size_t Surrogate::value_at(const Point& x, size_t d) const {
  const size_t n = space_.params()[dims_[d]].values.size();
  return static_cast<size_t>(std::lround(x[d] * static_cast<double>(n - 1)));
}

Surrogate::Point Surrogate::point(const Config& c) const {
  Point x(dims_.size());
  for (size_t d = 0; d < dims_.size(); ++d) {
    const size_t n = space_.params()[dims_[d]].values.size();
    x[d] = static_cast<double>(space_.value_index(c, dims_[d])) / static_cast<double>(n - 1);
  }
  return x;
}

void Surrogate::add(const Config& c, std::optional<double> fitness) {
  if (fitness && *fitness > 0 && ok_count_ >= 3 && !residual_.empty()) {
    const auto [a, n] = estimates(point(c));
    const double y = std::log(*fitness);
    err_additive_ += (a - y) * (a - y);
    err_neighbours_ += (n - y) * (n - y);
    ++predicted_;
  }
  points_.push_back(point(c));
  log_fitness_.push_back(fitness ? std::optional<double>(std::log(*fitness)) : std::nullopt);
  if (fitness) ++ok_count_;
}

void Surrogate::refit() {
  double worst = -std::numeric_limits<double>::infinity(), mean = 0, sq = 0;
  for (const auto& y : log_fitness_)
    if (y) worst = std::max(worst, *y), mean += *y, sq += *y * *y;
  if (ok_count_ == 0) return;
  fail_value_ = worst;
  mean /= static_cast<double>(ok_count_);
  spread_ = std::sqrt(std::max(0.0, sq / static_cast<double>(ok_count_) - mean * mean));
  std::vector<double> y;
  for (const auto& v : log_fitness_) y.push_back(v ? *v : fail_value_);
  weight_sum_ = 0;
  std::vector<size_t> group(points_.size());
  for (size_t d = 0; d < dims_.size(); ++d) {
    const size_t groups = space_.params()[dims_[d]].values.size();
    for (size_t i = 0; i < points_.size(); ++i) group[i] = value_at(points_[i], d);
    weights_[d] = kMinWeight + explained_share(y, group, groups);
    weight_sum_ += weights_[d];
  }
  if (weight_sum_ <= 0) weight_sum_ = 1;

  // The additive part, by backfitting: each parameter's effects in turn are
  // the shrunk mean residual of its values after the other parameters' effects.
  mean_ = 0;
  for (double v : y) mean_ += v;
  mean_ /= static_cast<double>(y.size());
  effect_.assign(dims_.size(), {});
  for (size_t d = 0; d < dims_.size(); ++d) effect_[d].assign(space_.params()[dims_[d]].values.size(), 0.0);
  std::vector<double> fit(points_.size(), mean_);
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    for (size_t d = 0; d < dims_.size(); ++d) {
      std::vector<double> sum(effect_[d].size(), 0), count(effect_[d].size(), 0);
      for (size_t i = 0; i < points_.size(); ++i) {
        const size_t v = value_at(points_[i], d);
        fit[i] -= effect_[d][v];
        sum[v] += y[i] - fit[i];
        count[v] += 1;
      }
      for (size_t v = 0; v < effect_[d].size(); ++v) effect_[d][v] = sum[v] / (count[v] + kShrink);
      for (size_t i = 0; i < points_.size(); ++i) fit[i] += effect_[d][value_at(points_[i], d)];
    }
  }
  residual_.resize(points_.size());
  for (size_t i = 0; i < points_.size(); ++i) residual_[i] = y[i] - fit[i];
  target_ = y;
  // Each estimate weighs by the inverse of its squared error on the trials
  // it predicted before they were added.
  const double err = err_additive_ + err_neighbours_;
  additive_share_ = err > 0 ? err_neighbours_ / err : 1;
}

double Surrogate::skill() const {
  if (predicted_ == 0 || spread_ <= 0) return 0;
  const double mean_square = std::min(err_additive_, err_neighbours_) / static_cast<double>(predicted_);
  return 1 - mean_square / (spread_ * spread_);
}

double Surrogate::additive(const Point& x) const {
  double s = mean_;
  for (size_t d = 0; d < effect_.size(); ++d) s += effect_[d][value_at(x, d)];
  return s;
}

double Surrogate::distance2(const Point& a, const Point& b) const {
  double s = 0;
  for (size_t d = 0; d < a.size(); ++d) s += weights_[d] * (a[d] - b[d]) * (a[d] - b[d]);
  return s;
}

double Surrogate::predict(const Point& x) const {
  const auto [a, n] = estimates(x);
  return additive_share_ * a + (1 - additive_share_) * n;
}

std::pair<double, double> Surrogate::estimates(const Point& x) const {
  // The nearest kNeighbours by a partial insertion sort (n is small), over
  // the points of the last refit.
  std::vector<std::pair<double, size_t>> near;  // distance², point
  for (size_t i = 0; i < residual_.size(); ++i) {
    const std::pair<double, size_t> e{distance2(x, points_[i]), i};
    if (near.size() == kNeighbours && e.first >= near.back().first) continue;
    auto at =
        std::upper_bound(near.begin(), near.end(), e, [](const auto& a, const auto& b) { return a.first < b.first; });
    near.insert(at, e);
    if (near.size() > kNeighbours) near.pop_back();
  }
  const double eps = 1e-3 * weight_sum_;
  double w = 0, r = 0, y = 0;
  for (const auto& [d2, i] : near) {
    w += 1 / (d2 + eps);
    r += residual_[i] / (d2 + eps);
    y += target_[i] / (d2 + eps);
  }
  if (w <= 0) return {additive(x), mean_};
  return {additive(x) + r / w, y / w};
}

double Surrogate::room(const Point& x, const std::vector<Point>& pending) const {
  double nearest = weight_sum_;
  for (const Point& p : points_) nearest = std::min(nearest, distance2(x, p));
  for (const Point& p : pending) nearest = std::min(nearest, distance2(x, p));
  return std::sqrt(nearest / weight_sum_);
}

double Surrogate::score(const Point& x, const std::vector<Point>& pending, double exploration) const {
  return predict(x) - exploration * spread_ * room(x, pending);
}

}  // namespace evotune
