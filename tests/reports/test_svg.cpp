// Tests of the SVG charts (reports/svg.h): escaping, tick choice, and that each chart draws one
// mark per value with its tooltip, deterministically.
#include <gtest/gtest.h>

#include <string>

#include "reports/svg.h"

namespace trainsim::reports::svg {
namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Svg, Escape) {
  EXPECT_EQ(escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
}

// Steps of 1, 2 or 5 × 10^k, the smallest giving at most `target` intervals: 0..5.6 in 6 is
// 0, 1, ..., 6; 0..0.7 is 0, 0.2, ..., 0.8 (steps of 0.1 would make 7); 0..230 is 0, 50, ..., 250.
TEST(Svg, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 5.6, 6), (std::vector<double>{0, 1, 2, 3, 4, 5, 6}));
  const std::vector<double> small = nice_ticks(0, 0.7, 6);
  ASSERT_EQ(small.size(), 5u);
  EXPECT_NEAR(small[1], 0.2, 1e-12);
  EXPECT_NEAR(small.back(), 0.8, 1e-12);
  EXPECT_EQ(nice_ticks(0, 230, 6), (std::vector<double>{0, 50, 100, 150, 200, 250}));
  EXPECT_EQ(nice_ticks(0, 0, 6).front(), 0.0);  // degenerate range still gives an axis
}

TEST(Svg, StackedBarsDrawEverySegment) {
  StackedBars c;
  c.id = "t";
  c.title = "T <1>";
  c.unit = "s";
  c.segments = {"a", "b", "c"};
  c.colors = {"#111", "#222", "#333"};
  c.bars = {{"x", {1, 2, 0}, false}, {"y", {3, 0, 1}, true}};
  const std::string out = stacked_bars(c);
  EXPECT_EQ(out.rfind("<svg", 0), 0u);
  EXPECT_NE(out.find("data-chart=\"t\""), std::string::npos);
  EXPECT_NE(out.find("<title id=\"t-title\">T &lt;1&gt;</title>"), std::string::npos);
  EXPECT_EQ(count(out, "class=\"mark\""), 4u);  // zero segments are not drawn
  EXPECT_NE(out.find("x · b: 2 s (66.7 %)"), std::string::npos);
  EXPECT_EQ(stacked_bars(c), out);
}

TEST(Svg, ScatterHeatmapTimelineBars) {
  Scatter s;
  s.id = "s";
  s.kinds = {{"ok", "#000", Scatter::Marker::kDot}, {"no", "#f00", Scatter::Marker::kCross}};
  s.points = {{1, 2, 0, "one"}, {3, 4, 1, "two"}};
  s.diagonal = true;
  const std::string sc = scatter(s);
  EXPECT_EQ(count(sc, "<circle"), 2u);  // one point and the legend swatch
  EXPECT_EQ(count(sc, "<title>two</title>"), 1u);
  EXPECT_NE(sc.find("predicted = published"), std::string::npos);

  Heatmap h;
  h.id = "h";
  h.rows = {"1", "2"};
  h.cols = {"a"};
  h.cells = {{12.5, "twelve"}, {std::nullopt, "none"}};
  h.highlight = 0;
  const std::string hm = heatmap(h);
  EXPECT_NE(hm.find(">12.5</text>"), std::string::npos);
  EXPECT_NE(hm.find("<title>none</title>"), std::string::npos);
  EXPECT_NE(hm.find("stroke-width=\"3\""), std::string::npos);

  Timeline t;
  t.id = "tl";
  t.lanes = {"stage 0"};
  t.kinds = {{"f", "#00f"}};
  t.blocks = {{0, 0.0, 0.5, 0, "0", "block"}};
  t.end_s = 1;
  EXPECT_NE(timeline(t).find("<title>block</title>"), std::string::npos);

  Bars b;
  b.id = "b";
  b.unit = "%";
  b.bars = {{"x", 40, "", false, false, ""}, {"y", 0, "not modelled", false, true, "why"}};
  const std::string bs = bars(b);
  EXPECT_NE(bs.find("url(#b-hatch)"), std::string::npos);
  EXPECT_NE(bs.find("not modelled"), std::string::npos);
}

}  // namespace
}  // namespace trainsim::reports::svg
