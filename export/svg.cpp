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

std::string scatter(const ScatterChart& c) {
  std::ostringstream o;
  o << header(c.title);
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool have_x = false, have_y = false, have_band = false;
  for (const auto& s : c.series)
    for (const auto& p : s.points) {
      x_lo = have_x ? std::min(x_lo, p.x) : p.x;
      x_hi = have_x ? std::max(x_hi, p.x) : p.x;
      have_x = true;
      if (s.kind == Series::Kind::band) {
        have_band = true;
        continue;
      }
      if (c.log_y && !(p.y > 0)) continue;
      y_lo = have_y ? std::min(y_lo, p.y) : p.y;
      y_hi = have_y ? std::max(y_hi, p.y) : p.y;
      have_y = true;
    }
  if (!have_x) x_lo = 0, x_hi = 1;
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (!have_y) y_lo = c.log_y ? 1 : 0, y_hi = c.log_y ? 10 : 1;
  std::vector<double> yt;
  if (c.log_y) {
    y_lo /= 1.05, y_hi *= 1.05;
    yt = log_ticks(y_lo, y_hi);
  } else {
    double pad = (y_hi - y_lo) * 0.05 + (y_hi == y_lo ? std::abs(y_hi) * 0.1 + 1 : 0);
    y_lo = std::max(0.0, y_lo - pad), y_hi += pad;
    yt = linear_ticks(y_lo, y_hi);
  }
  std::vector<double> xt = linear_ticks(x_lo, x_hi);
  const double left = kLeft, right = kWidth - kRight, top = kTop, bottom = kHeight - kBottom;
  Scale sx{x_lo, x_hi, left, right, false}, sy{y_lo, y_hi, bottom, top, c.log_y};

  // Grid, ticks and axes.
  for (double v : yt) {
    double y = sy(v);
    if (y < top - 0.5 || y > bottom + 0.5) continue;
    o << "<line x1=\"" << px(left) << "\" y1=\"" << px(y) << "\" x2=\"" << px(right) << "\" y2=\"" << px(y)
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << px(left - 6) << "\" y=\"" << px(y + 4) << "\" text-anchor=\"end\">" << tick_label(v)
      << "</text>\n";
  }
  for (double v : xt) {
    double x = sx(v);
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
  if (have_band) {
    o << "<line x1=\"" << px(left) << "\" y1=\"" << px(kBandY) << "\" x2=\"" << px(right) << "\" y2=\"" << px(kBandY)
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << px(left - 6) << "\" y=\"" << px(kBandY + 4) << "\" text-anchor=\"end\" fill=\"#555\">"
      << esc(c.band_label) << "</text>\n";
  }
  if (!have_x)
    o << "<text x=\"" << px((left + right) / 2) << "\" y=\"" << px((top + bottom) / 2)
      << "\" text-anchor=\"middle\" fill=\"#555\">no data</text>\n";

  // Series: dots and bands first, step lines over them.
  std::vector<std::pair<std::string, std::string>> entries;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& s : c.series) {
      if (s.points.empty() || (s.kind == Series::Kind::step) != (pass == 1)) continue;
      if (s.kind == Series::Kind::step) {
        o << "<path fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\" d=\"";
        bool first = true;
        for (const auto& p : s.points) {
          if (c.log_y && !(p.y > 0)) continue;
          o << (first ? "M" : " H") << px(sx(p.x)) << (first ? "," : " V") << px(sy(p.y));
          first = false;
        }
        if (!s.points.empty()) o << " H" << px(sx(x_hi));
        o << "\"/>\n";
      } else {
        for (const auto& p : s.points) {
          if (s.kind == Series::Kind::dots && c.log_y && !(p.y > 0)) continue;
          double y = s.kind == Series::Kind::band ? kBandY : sy(p.y);
          o << "<circle cx=\"" << px(sx(p.x)) << "\" cy=\"" << px(y) << "\" r=\"3\" fill=\"" << s.color
            << "\" fill-opacity=\"0.75\"/>\n";
        }
      }
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
