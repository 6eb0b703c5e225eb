// SVG charts: layout in fixed pixels, coordinates rounded to 0.1 px so that
// the same input gives the same bytes.
#include "export/svg.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/strings.hpp"

namespace evotune::svg {

namespace {

constexpr double kWidth = 760, kHeight = 440;
constexpr double kLeft = 80, kRight = 190, kTop = 70, kBottom = 56;  // plot margins
constexpr double kBandY = 48;                                        // centre of the band above the plot
constexpr const char* kFont = "font-family=\"DejaVu Sans, Arial, sans-serif\"";

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string px(double v) {
  return strfmt("%.1f", v);
}

// A tick's label: as short as it can be without losing the tick's value.
std::string tick_label(double v) {
  if (v == 0) return "0";
  std::string s = strfmt("%.4g", v);
  return s;
}

std::string header(const std::string& title, double height = kHeight) {
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << kWidth << " " << height << "\" " << kFont << " font-size=\"12\">\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << kWidth << "\" height=\"" << height << "\" fill=\"white\"/>\n";
  o << "<text x=\"" << px(kWidth / 2) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">"
    << esc(title) << "</text>\n";
  return o.str();
}

// Maps data to pixels on one axis, linear or logarithmic.
struct Scale {
  double lo, hi, p0, p1;
  bool log;
  double operator()(double v) const {
    double a = log ? std::log10(std::max(v, 1e-300)) : v;
    double b = log ? std::log10(lo) : lo, c = log ? std::log10(hi) : hi;
    double t = c > b ? (a - b) / (c - b) : 0.5;
    return p0 + t * (p1 - p0);
  }
};

double nice_step(double raw) {
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

void legend(std::ostream& o, const std::vector<std::pair<std::string, std::string>>& entries) {
  double y = kTop + 4;
  const double x = kWidth - kRight + 16;
  for (const auto& [name, color] : entries) {
    o << "<rect x=\"" << px(x) << "\" y=\"" << px(y - 9) << "\" width=\"10\" height=\"10\" fill=\"" << color
      << "\"/>\n";
    o << "<text x=\"" << px(x + 16) << "\" y=\"" << px(y) << "\">" << esc(name) << "</text>\n";
    y += 18;
  }
}

}  // namespace

std::vector<double> linear_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double step = nice_step((hi - lo) / std::max(1, target));
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> t;
  if (!(lo > 0) || !(hi > lo)) return {lo};
  for (double d = std::pow(10.0, std::floor(std::log10(lo))); d <= hi; d *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      double v = m * d;
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
    }
  if (t.size() < 2) return {lo, hi};
  return t;
}

namespace {

// The plot area in pixels.
constexpr double kPlotLeft = kLeft, kPlotRight = kWidth - kRight, kPlotTop = kTop, kPlotBottom = kHeight - kBottom;

// What a scatter chart's axes span: the points' x range, and the y range of
// the points that are drawn against y (bands sit above the plot; a log axis
// skips values <= 0), each padded and given ticks.
struct ScatterAxes {
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool have_x = false, have_band = false;
  std::vector<double> xt, yt;
  Scale sx, sy;
};

ScatterAxes scatter_axes(const ScatterChart& c) {
  ScatterAxes a;
  bool have_y = false;
  for (const auto& s : c.series)
    for (const auto& p : s.points) {
      a.x_lo = a.have_x ? std::min(a.x_lo, p.x) : p.x;
      a.x_hi = a.have_x ? std::max(a.x_hi, p.x) : p.x;
      a.have_x = true;
      if (s.kind == Series::Kind::band) {
        a.have_band = true;
        continue;
      }
      if (c.log_y && !(p.y > 0)) continue;
      a.y_lo = have_y ? std::min(a.y_lo, p.y) : p.y;
      a.y_hi = have_y ? std::max(a.y_hi, p.y) : p.y;
      have_y = true;
    }
  if (!a.have_x) a.x_lo = 0, a.x_hi = 1;
  if (a.x_hi <= a.x_lo) a.x_hi = a.x_lo + 1;
  if (!have_y) a.y_lo = c.log_y ? 1 : 0, a.y_hi = c.log_y ? 10 : 1;
  if (c.log_y) {
    a.y_lo /= 1.05, a.y_hi *= 1.05;
    a.yt = log_ticks(a.y_lo, a.y_hi);
  } else {
    double pad = (a.y_hi - a.y_lo) * 0.05 + (a.y_hi == a.y_lo ? std::abs(a.y_hi) * 0.1 + 1 : 0);
    a.y_lo = std::max(0.0, a.y_lo - pad), a.y_hi += pad;
    a.yt = linear_ticks(a.y_lo, a.y_hi);
  }
  a.xt = linear_ticks(a.x_lo, a.x_hi);
  a.sx = Scale{a.x_lo, a.x_hi, kPlotLeft, kPlotRight, false};
  a.sy = Scale{a.y_lo, a.y_hi, kPlotBottom, kPlotTop, c.log_y};
  return a;
}

// Grid lines, ticks, the frame, the axis labels, the band's row.
void scatter_frame(std::ostream& o, const ScatterChart& c, const ScatterAxes& a) {
  const double left = kPlotLeft, right = kPlotRight, top = kPlotTop, bottom = kPlotBottom;
  for (double v : a.yt) {
    double y = a.sy(v);
    if (y < top - 0.5 || y > bottom + 0.5) continue;
    o << "<line x1=\"" << px(left) << "\" y1=\"" << px(y) << "\" x2=\"" << px(right) << "\" y2=\"" << px(y)
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << px(left - 6) << "\" y=\"" << px(y + 4) << "\" text-anchor=\"end\">" << tick_label(v)
      << "</text>\n";
  }
  for (double v : a.xt) {
    double x = a.sx(v);
    o << "<line x1=\"" << px(x) << "\" y1=\"" << px(bottom) << "\" x2=\"" << px(x) << "\" y2=\"" << px(bottom + 4)
      << "\" stroke=\"#333\"/>\n";
    o << "<text x=\"" << px(x) << "\" y=\"" << px(bottom + 17) << "\" text-anchor=\"middle\">" << tick_label(v)
      << "</text>\n";
  }
  o << "<rect x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\"" << px(right - left) << "\" height=\""
    << px(bottom - top) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << px((left + right) / 2) << "\" y=\"" << px(kHeight - 12) << "\" text-anchor=\"middle\">"
    << esc(c.x_label) << "</text>\n";
  o << "<text x=\"16\" y=\"" << px((top + bottom) / 2) << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
    << px((top + bottom) / 2) << ")\">" << esc(c.y_label) << (c.log_y ? " (log scale)" : "") << "</text>\n";
  if (a.have_band) {
    o << "<line x1=\"" << px(left) << "\" y1=\"" << px(kBandY) << "\" x2=\"" << px(right) << "\" y2=\"" << px(kBandY)
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << px(left - 6) << "\" y=\"" << px(kBandY + 4) << "\" text-anchor=\"end\" fill=\"#555\">"
      << esc(c.band_label) << "</text>\n";
  }
  if (!a.have_x)
    o << "<text x=\"" << px((left + right) / 2) << "\" y=\"" << px((top + bottom) / 2)
      << "\" text-anchor=\"middle\" fill=\"#555\">no data</text>\n";
}

// A step series as one path (log axis: points <= 0 left out), held to the
// right edge.
void step_path(std::ostream& o, const Series& s, bool log_y, const ScatterAxes& a) {
  o << "<path fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\" d=\"";
  bool first = true;
  for (const auto& p : s.points) {
    if (log_y && !(p.y > 0)) continue;
    o << (first ? "M" : " H") << px(a.sx(p.x)) << (first ? "," : " V") << px(a.sy(p.y));
    first = false;
  }
  if (!s.points.empty()) o << " H" << px(a.sx(a.x_hi));
  o << "\"/>\n";
}

// Dots at their values, or (a band) in the row above the plot.
void dots(std::ostream& o, const Series& s, bool log_y, const ScatterAxes& a) {
  for (const auto& p : s.points) {
    if (s.kind == Series::Kind::dots && log_y && !(p.y > 0)) continue;
    double y = s.kind == Series::Kind::band ? kBandY : a.sy(p.y);
    o << "<circle cx=\"" << px(a.sx(p.x)) << "\" cy=\"" << px(y) << "\" r=\"3\" fill=\"" << s.color
      << "\" fill-opacity=\"0.75\"/>\n";
  }
}

}  // namespace

std::string scatter(const ScatterChart& c) {
  std::ostringstream o;
  o << header(c.title);
  const ScatterAxes a = scatter_axes(c);
  scatter_frame(o, c, a);
  // Series: dots and bands first, step lines over them; the legend in that order.
  std::vector<std::pair<std::string, std::string>> entries;
  for (bool steps : {false, true})
    for (const auto& s : c.series) {
      if (s.points.empty() || (s.kind == Series::Kind::step) != steps) continue;
      if (steps)
        step_path(o, s, c.log_y, a);
      else
        dots(o, s, c.log_y, a);
      entries.emplace_back(s.name, s.color);
    }
  legend(o, entries);
  o << "</svg>\n";
  return o.str();
}

std::string bars(const BarChart& c) {
  // 28 px a bar: the chart is as tall as its bars need.
  const double row = 28, top = 44;
  const double height = top + row * static_cast<double>(std::max<size_t>(c.bars.size(), 2)) + 8 + kBottom;
  std::ostringstream o;
  o << header(c.title, height);
  double hi = 0;
  for (const auto& b : c.bars) hi = std::max(hi, b.value);
  if (!(hi > 0)) hi = 1;
  const double left = 170, right = kWidth - 170, bottom = height - kBottom;
  std::vector<double> xt = linear_ticks(0, hi * 1.02);
  Scale sx{0, xt.empty() ? hi : std::max(hi, xt.back()), left, right, false};
  for (double v : xt) {
    double x = sx(v);
    o << "<line x1=\"" << px(x) << "\" y1=\"" << px(top) << "\" x2=\"" << px(x) << "\" y2=\"" << px(bottom)
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << px(x) << "\" y=\"" << px(bottom + 17) << "\" text-anchor=\"middle\">" << tick_label(v)
      << "</text>\n";
  }
  o << "<line x1=\"" << px(left) << "\" y1=\"" << px(top) << "\" x2=\"" << px(left) << "\" y2=\"" << px(bottom)
    << "\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << px((left + right) / 2) << "\" y=\"" << px(height - 12) << "\" text-anchor=\"middle\">"
    << esc(c.x_label) << "</text>\n";
  double y = top + 4;
  for (const auto& b : c.bars) {
    const double h = row * 0.7, w = b.value > 0 ? sx(b.value) - left : 0;
    o << "<text x=\"" << px(left - 8) << "\" y=\"" << px(y + h / 2 + 4) << "\" text-anchor=\"end\">" << esc(b.label)
      << "</text>\n";
    if (w > 0)
      o << "<rect x=\"" << px(left) << "\" y=\"" << px(y) << "\" width=\"" << px(w) << "\" height=\"" << px(h)
        << "\" fill=\"" << b.color << "\"/>\n";
    o << "<text x=\"" << px(left + w + 6) << "\" y=\"" << px(y + h / 2 + 4) << "\" fill=\"#333\">" << esc(b.note)
      << "</text>\n";
    y += row;
  }
  if (c.bars.empty())
    o << "<text x=\"" << px((left + right) / 2) << "\" y=\"" << px((top + bottom) / 2)
      << "\" text-anchor=\"middle\" fill=\"#555\">no data</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace evotune::svg
