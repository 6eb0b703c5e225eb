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

Surrogate::Point Surrogate::point(const Config& c) const {
  Point x(dims_.size());
  for (size_t d = 0; d < dims_.size(); ++d) {
    const size_t n = space_.params()[dims_[d]].values.size();
    x[d] = static_cast<double>(space_.value_index(c, dims_[d])) / static_cast<double>(n - 1);
  }
  return x;
}

void Surrogate::add(const Config& c, std::optional<double> fitness) {
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
    for (size_t i = 0; i < points_.size(); ++i)
      group[i] = static_cast<size_t>(std::lround(points_[i][d] * static_cast<double>(groups - 1)));
    weights_[d] = kMinWeight + explained_share(y, group, groups);
    weight_sum_ += weights_[d];
  }
  if (weight_sum_ <= 0) weight_sum_ = 1;
}

double Surrogate::distance2(const Point& a, const Point& b) const {
  double s = 0;
  for (size_t d = 0; d < a.size(); ++d) s += weights_[d] * (a[d] - b[d]) * (a[d] - b[d]);
  return s;
}

double Surrogate::predict(const Point& x) const {
  // The nearest kNeighbours by a partial insertion sort (n is small).
  std::vector<std::pair<double, double>> near;  // distance², log fitness
  for (size_t i = 0; i < points_.size(); ++i) {
    const double y = log_fitness_[i] ? *log_fitness_[i] : fail_value_;
    const std::pair<double, double> e{distance2(x, points_[i]), y};
    if (near.size() == kNeighbours && e.first >= near.back().first) continue;
    auto at = std::upper_bound(near.begin(), near.end(), e, [](const auto& a, const auto& b) { return a.first < b.first; });
    near.insert(at, e);
    if (near.size() > kNeighbours) near.pop_back();
  }
  const double eps = 1e-3 * weight_sum_;
  double w = 0, s = 0;
  for (const auto& [d2, y] : near) {
    w += 1 / (d2 + eps);
    s += y / (d2 + eps);
  }
  return w > 0 ? s / w : 0;
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
