// SVG charts for the report: a scatter of points with a step line (the
// convergence of a run) and horizontal bars (elites against the default and
// the baselines). Plain SVG 1.1 text with no scripts or external references,
// readable by browsers, image viewers and Markdown renderers, and the same
// bytes for the same input.
#pragma once

#include <string>
#include <vector>

namespace evotune::svg {

struct Point {
  double x = 0, y = 0;
};

struct Series {
  enum class Kind {
    dots,  // one dot per point
    step,  // a line holding each y until the next x
    band,  // dots in a band above the plot (points without a y: only x counts)
  };
  std::string name;   // the legend's label
  std::string color;  // any SVG colour, e.g. "#1b9e77"
  Kind kind = Kind::dots;
  std::vector<Point> points;
};

struct ScatterChart {
  std::string title, x_label, y_label;
  std::string band_label = "no time";  // what the band above the plot holds
  bool log_y = false;                  // a logarithmic y axis (every y > 0)
  std::vector<Series> series;
};

// The chart as an SVG document. Series without points are left out of the
// legend; a chart without any point still renders its frame and a note.
std::string scatter(const ScatterChart& chart);

struct Bar {
  std::string label;  // left of the bar
  double value = 0;   // its length; <= 0 draws none
  std::string color;
  std::string note;  // right of the bar, e.g. "12.3 µs · 1.05x"
};

struct BarChart {
  std::string title, x_label;
  std::vector<Bar> bars;  // top to bottom
};

std::string bars(const BarChart& chart);

// "Nice" axis ticks (1, 2 or 5 times a power of ten) covering [lo, hi], and
// for a logarithmic axis the 1-2-5 values of each decade inside it (at least
// the two ends when the range is narrower than that).
std::vector<double> linear_ticks(double lo, double hi, int target = 5);
std::vector<double> log_ticks(double lo, double hi);

}  // namespace evotune::svg
