// The report's SVG charts: axis ticks, scales and what each chart draws.
#include <string>

#include "export/svg.hpp"
#include "tests/catch.hpp"

using namespace evotune;

namespace {

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("axis ticks are 1-2-5 steps inside the range, per decade on a log axis", "[export][svg]") {
  CHECK(svg::linear_ticks(0, 153) == std::vector<double>{0, 50, 100, 150});
  CHECK(svg::linear_ticks(1, 64) == std::vector<double>{20, 40, 60});
  CHECK(svg::linear_ticks(95, 105) == std::vector<double>{96, 98, 100, 102, 104});
  CHECK(svg::log_ticks(90, 1100) == std::vector<double>{100, 200, 500, 1000});
  CHECK(svg::log_ticks(3, 4) == std::vector<double>{3, 4});  // no 1-2-5 value inside: the ends
}

TEST_CASE("a scatter draws every point, the band's points above the plot, a step line and a legend", "[export][svg]") {
  svg::ScatterChart c;
  c.title = "a <title> & more";
  c.x_label = "trial";
  c.y_label = "p50 µs";
  c.series.push_back({"ok (3)", "#1b9e77", svg::Series::Kind::dots, {{1, 10}, {2, 8}, {4, 12}}});
  c.series.push_back({"incorrect (1)", "#d95f02", svg::Series::Kind::band, {{3, 0}}});
  c.series.push_back({"best so far", "#222222", svg::Series::Kind::step, {{1, 10}, {2, 8}}});
  c.series.push_back({"unused", "#000000", svg::Series::Kind::dots, {}});
  const std::string s = svg::scatter(c);
  CHECK(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(s.find("a &lt;title&gt; &amp; more") != std::string::npos);
  CHECK(count_of(s, "<circle") == 4);
  CHECK(count_of(s, "fill=\"#d95f02\" fill-opacity") == 1);
  CHECK(count_of(s, "<path") == 1);
  CHECK(s.find(">best so far<") != std::string::npos);
  CHECK(s.find(">unused<") == std::string::npos);  // empty series: not in the legend
  CHECK(s == svg::scatter(c));                     // the same bytes every time
  // The band's dot sits above the plot frame (y = 70), the others inside it.
  CHECK(s.find("cy=\"48.0\" r=\"3\" fill=\"#d95f02\"") != std::string::npos);

  svg::ScatterChart empty;
  CHECK(svg::scatter(empty).find(">no data<") != std::string::npos);
}

TEST_CASE("bars: one per entry, as long as its value, the chart as tall as its bars", "[export][svg]") {
  svg::BarChart c;
  c.title = "elites";
  c.bars = {{"default config", 200, "#999999", "200 µs · 1.00x"}, {"elite #1", 100, "#1b9e77", "100 µs · 2.00x"}};
  const std::string s = svg::bars(c);
  CHECK(count_of(s, "<rect x=\"170.0\"") == 2);
  CHECK(s.find(">100 µs · 2.00x<") != std::string::npos);
  // The first bar is twice the second's length.
  const auto width = [&](const std::string& color) {
    size_t at = s.find("fill=\"" + color + "\"/>");
    size_t w = s.rfind("width=\"", at) + 7;
    return std::stod(s.substr(w, s.find('"', w) - w));
  };
  CHECK(width("#999999") == Approx(2 * width("#1b9e77")).epsilon(0.01));
  c.bars.push_back({"elite #2", 150, "#1b9e77", ""});
  CHECK(svg::bars(c).find("height=\"192\"") != std::string::npos);  // 44 + 3 x 28 + 8 + 56
}
