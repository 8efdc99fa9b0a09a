// Charts as inline SVG, generated here: the HTML reports need no script, no library and no
// network to show them, the output is deterministic text that tests can read, and a browser
// renders it as it is. Every chart is one `<svg class="chart" data-chart="ID">` with a `<title>`;
// marks carry `<title>` tooltips with their exact values.
//
// Colours are fixed per meaning (a breakdown component has the same colour in every chart) and
// chosen from the Tableau 10 set, which stays distinguishable for the common colour-vision
// deficiencies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::reports::svg {

/// Escapes `& < > " '` for XML text and attribute values.
std::string escape(std::string_view s);

/// Tick positions for an axis from `lo` to at least `hi`: round steps of 1, 2 or 5 × 10^k, about
/// `target` of them; the last tick is at or above `hi`.
std::vector<double> nice_ticks(double lo, double hi, int target);

/// Colour of series `i` (Tableau 10, cycling).
const char* palette(std::size_t i);

/// Horizontal bars made of segments (a breakdown per bar).
struct StackedBars {
  std::string id;
  std::string title;
  std::string unit;        // axis unit, e.g. "s"
  bool normalize = false;  // draw every bar as 100 % of its total
  std::vector<std::string> segments;
  std::vector<std::string> colors;  // per segment
  struct Bar {
    std::string label;
    std::vector<double> values;  // per segment
    bool highlight = false;      // drawn with a dark outline (the base configuration)
  };
  std::vector<Bar> bars;
};
std::string stacked_bars(const StackedBars& c);

/// Horizontal bars, one value each, with an optional text after the bar.
struct Bars {
  std::string id;
  std::string title;
  std::string unit;
  std::optional<double> max_value;  // axis end (e.g. 100 for percentages); default from data
  struct Bar {
    std::string label;
    double value = 0;
    std::string note;  // written after the bar, e.g. "not modelled"
    bool highlight = false;
    bool missing = false;  // no value: a hatched placeholder instead of a bar
    std::string tooltip;
  };
  std::vector<Bar> bars;
};
std::string bars(const Bars& c);

/// Points on two axes; kinds are drawn with different markers and listed in the legend.
struct Scatter {
  std::string id;
  std::string title;
  std::string x_label, y_label;
  bool log_x = false, log_y = false;
  bool diagonal = false;          // the y = x line (predicted vs published)
  std::string diagonal_label = "predicted = published";  // written at its top end
  std::optional<double> x_limit;  // a vertical reference line
  std::string x_limit_label;
  enum class Marker { kDot, kRing, kCross, kDiamond };
  struct Kind {
    std::string name;
    std::string color;
    Marker marker = Marker::kDot;
  };
  std::vector<Kind> kinds;
  struct Point {
    double x = 0, y = 0;
    std::size_t kind = 0;
    std::string tooltip;
  };
  std::vector<Point> points;
};
std::string scatter(const Scatter& c);

/// A grid of cells coloured by value; cells without a value are crossed out.
struct Heatmap {
  std::string id;
  std::string title;
  std::string row_label, col_label;
  std::vector<std::string> rows, cols;
  struct Cell {
    std::optional<double> value;  // shown as text and colour
    std::string tooltip;
  };
  std::vector<Cell> cells;  // row-major
  std::string value_format = "{:.1f}";
  std::string legend;   // what the colour means
  long highlight = -1;  // a cell (row-major index) outlined in red, or -1
};
std::string heatmap(const Heatmap& c);

/// Lanes of blocks over time (a pipeline schedule).
struct Timeline {
  std::string id;
  std::string title;
  std::string time_unit = "ms";
  double time_scale = 1e3;  // seconds to time_unit
  double end_s = 0;         // right end of the axis
  std::vector<std::string> lanes;
  struct Kind {
    std::string name;
    std::string color;
  };
  std::vector<Kind> kinds;
  struct Block {
    std::size_t lane = 0;
    double start_s = 0, end_s = 0;
    std::size_t kind = 0;
    std::string text;  // drawn inside when the block is wide enough
    std::string tooltip;
  };
  std::vector<Block> blocks;
};
std::string timeline(const Timeline& c);

}  // namespace trainsim::reports::svg
