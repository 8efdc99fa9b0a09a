#include "reports/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainsim::reports::svg {
namespace {

constexpr double kWidth = 900;
constexpr double kCharWidth = 6.6;  // average width of a 12 px sans-serif character
// Labels are measured generously: digits and capitals are wider than the average, and a label
// cut off at the left edge is worse than some white space.
constexpr double kLabelCharWidth = 7.4;
constexpr double kLegendRow = 20;

std::string n(double v) { return fmt::format("{:.1f}", v); }

std::string open_svg(const std::string& id, const std::string& title, double w, double h) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"{0}\" "
      "viewBox=\"0 0 {1} {2}\" width=\"{1}\" height=\"{2}\" role=\"img\" "
      "aria-labelledby=\"{0}-title\" font-family=\"system-ui, sans-serif\" font-size=\"12\">"
      "<title id=\"{0}-title\">{3}</title>",
      escape(id), n(w), n(h), escape(title));
}

std::string text(double x, double y, const std::string& s, const char* anchor = "start",
                 const char* extra = "") {
  return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>", n(x), n(y), anchor,
                     extra, escape(s));
}

std::string rect(double x, double y, double w, double h, const std::string& fill,
                 const std::string& tooltip, const std::string& extra = "") {
  std::string out = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}",
                                n(x), n(y), n(std::max(0.0, w)), n(std::max(0.0, h)), fill, extra);
  if (tooltip.empty()) return out + "/>";
  return out + "><title>" + escape(tooltip) + "</title></rect>";
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke,
                 const char* extra = "") {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"{}/>", n(x1),
                     n(y1), n(x2), n(y2), stroke, extra);
}

// Tick labels with as many decimals as the step needs.
std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return fmt::format("{:.{}f}", v, std::clamp(decimals, 0, 6));
}

std::string log_tick_label(double v) {
  if (v >= 1e4 || v < 1e-3) return fmt::format("{:g}", v);
  return fmt::format("{}", v);
}

// Legend entries laid out left to right, wrapping at the chart width; returns its height.
double legend(std::string& out, double x0, double y0, double width,
              const std::vector<std::pair<std::string, std::string>>& entries) {
  double x = x0, y = y0;
  for (const auto& [name, swatch] : entries) {
    const double w = 18 + kCharWidth * static_cast<double>(name.size()) + 16;
    if (x + w > x0 + width && x > x0) {
      x = x0;
      y += kLegendRow;
    }
    out += swatch.rfind('<', 0) == 0
               ? fmt::format("<g transform=\"translate({},{})\">{}</g>", n(x), n(y - 9), swatch)
               : rect(x, y - 9, 12, 12, swatch, "");
    out += text(x + 17, y + 1, name);
    x += w;
  }
  return y - y0 + kLegendRow;
}

double label_width(const std::vector<std::string>& labels, double min_w, double max_w) {
  std::size_t longest = 0;
  for (const std::string& s : labels) longest = std::max(longest, s.size());
  return std::clamp(kLabelCharWidth * static_cast<double>(longest) + 20, min_w, max_w);
}

// A vertical axis-aligned grid with ticks along the bottom of a horizontal-bar chart.
void x_axis(std::string& out, double x0, double x1, double y_top, double y_bottom, double max_v,
            const std::vector<double>& ticks, const std::string& unit) {
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (const double t : ticks) {
    const double x = x0 + (x1 - x0) * t / max_v;
    out += line(x, y_top, x, y_bottom, "#e3e3e3");
    out += text(x, y_bottom + 15, tick_label(t, step), "middle", " fill=\"#555\"");
  }
  out += line(x0, y_bottom, x1, y_bottom, "#999");
  if (!unit.empty()) out += text(x1, y_bottom + 32, unit, "end", " fill=\"#555\"");
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double p0 = 0, p1 = 1;  // pixel positions of lo and hi
  double map(double v) const {
    const double a = log ? std::log10(std::max(v, 1e-300)) : v;
    const double l = log ? std::log10(lo) : lo;
    const double h = log ? std::log10(hi) : hi;
    return p0 + (p1 - p0) * (a - l) / (h - l);
  }
  std::vector<std::pair<double, std::string>> ticks() const {
    std::vector<std::pair<double, std::string>> out;
    if (log) {
      for (int e = static_cast<int>(std::floor(std::log10(lo)));
           e <= static_cast<int>(std::ceil(std::log10(hi))); ++e) {
        for (const double m : {1.0, 2.0, 5.0}) {
          const double v = m * std::pow(10.0, e);
          if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.emplace_back(v, log_tick_label(v));
        }
      }
      return out;
    }
    const std::vector<double> t = nice_ticks(lo, hi, 6);
    const double step = t.size() > 1 ? t[1] - t[0] : 1;
    for (const double v : t) {
      if (v <= hi * (1 + 1e-12) + 1e-12) out.emplace_back(v, tick_label(v, step));
    }
    return out;
  }
};

// Fits an axis to values: linear from a round number below the data to one above it, or log
// from the power of ten below to the one above.
Axis fit_axis(std::vector<double> values, bool log, bool from_zero) {
  Axis a;
  a.log = log;
  if (log) {
    values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0); }),
                 values.end());
  }
  if (values.empty()) values = {log ? 1.0 : 0.0, log ? 10.0 : 1.0};
  double lo = *std::min_element(values.begin(), values.end());
  double hi = *std::max_element(values.begin(), values.end());
  if (log) {
    a.lo = std::pow(10.0, std::floor(std::log10(lo)));
    a.hi = std::pow(10.0, std::ceil(std::log10(hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
    return a;
  }
  if (from_zero) lo = std::min(lo, 0.0);
  if (hi <= lo) hi = lo + 1;
  const std::vector<double> t = nice_ticks(lo, hi, 6);
  const double step = t.size() > 1 ? t[1] - t[0] : 1;
  a.lo = std::floor(lo / step) * step;
  a.hi = t.back();
  return a;
}

std::string marker(Scatter::Marker m, double x, double y, const std::string& color,
                   const std::string& tooltip) {
  const std::string tip = "<title>" + escape(tooltip) + "</title>";
  switch (m) {
    case Scatter::Marker::kDot:
      return fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.75\">{}"
          "</circle>",
          n(x), n(y), color, tip);
    case Scatter::Marker::kRing:
      return fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"2.5\">{}</circle>",
          n(x), n(y), color, tip);
    case Scatter::Marker::kCross:
      return fmt::format(
          "<path d=\"M{0} {1}L{2} {3}M{0} {3}L{2} {1}\" stroke=\"{4}\" "
          "stroke-width=\"1.8\">{5}</path>",
          n(x - 3.5), n(y - 3.5), n(x + 3.5), n(y + 3.5), color, tip);
    case Scatter::Marker::kDiamond:
      return fmt::format("<path d=\"M{0} {1}L{2} {3}L{0} {4}L{5} {3}Z\" fill=\"{6}\">{7}</path>",
                         n(x), n(y - 5), n(x + 5), n(y), n(y + 5), n(x - 5), color, tip);
  }
  return "";
}

std::string swatch(Scatter::Marker m, const std::string& color) {
  return marker(m, 6, 6, color, "");
}

// Viridis at five stops, linearly interpolated: perceptually ordered and readable in grey.
std::string viridis(double t) {
  static const double kStops[5][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(std::lround(kStops[i][c] + (kStops[i + 1][c] - kStops[i][c]) * f));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

}  // namespace

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double span = hi - lo;
  double step = std::pow(10.0, std::floor(std::log10(span / std::max(1, target))));
  const double per = span / step / std::max(1, target);
  if (per > 5) {
    step *= 10;
  } else if (per > 2) {
    step *= 5;
  } else if (per > 1) {
    step *= 2;
  }
  std::vector<double> out;
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (double v = first;; v += step) {
    out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
    if (v >= hi - step * 1e-9) break;
  }
  return out;
}

const char* palette(std::size_t i) {
  static const char* kTableau10[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                     "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kTableau10[i % 10];
}

std::string stacked_bars(const StackedBars& c) {
  std::vector<std::string> labels;
  for (const auto& b : c.bars) labels.push_back(b.label);
  const double left = label_width(labels, 80, 330);
  const double right = 90;
  std::vector<std::pair<std::string, std::string>> entries;
  for (std::size_t s = 0; s < c.segments.size(); ++s)
    entries.emplace_back(c.segments[s], c.colors[s]);
  std::string body;
  const double legend_h = legend(body, left, 16, kWidth - left - right, entries);
  const double bar_h = 22, gap = 8;
  const double top = legend_h + 14;
  const double bottom = top + static_cast<double>(c.bars.size()) * (bar_h + gap);
  double max_total = 0;
  for (const auto& b : c.bars) {
    double t = 0;
    for (const double v : b.values) t += std::max(0.0, v);
    max_total = std::max(max_total, t);
  }
  const double axis_max_data = c.normalize ? 100.0 : (max_total > 0 ? max_total : 1.0);
  const std::vector<double> ticks = nice_ticks(0, axis_max_data, 6);
  const double axis_max = ticks.back();
  const double x0 = left, x1 = kWidth - right;
  std::string grid;
  x_axis(grid, x0, x1, top - 4, bottom, axis_max, ticks, c.normalize ? "% of the total" : c.unit);
  std::string marks;
  for (std::size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    const double y = top + static_cast<double>(i) * (bar_h + gap);
    double total = 0;
    for (const double v : b.values) total += std::max(0.0, v);
    const double scale = c.normalize ? (total > 0 ? 100.0 / total : 0.0) : 1.0;
    marks += text(left - 8, y + bar_h / 2 + 4, b.label, "end",
                  b.highlight ? " font-weight=\"bold\"" : "");
    double at = 0;
    for (std::size_t s = 0; s < b.values.size() && s < c.segments.size(); ++s) {
      const double v = std::max(0.0, b.values[s]);
      if (v <= 0) continue;
      const double w = (x1 - x0) * v * scale / axis_max;
      const std::string tip = fmt::format("{} · {}: {:.4g} {} ({:.1f} %)", b.label, c.segments[s],
                                          v, c.unit, total > 0 ? 100 * v / total : 0.0);
      marks +=
          rect(x0 + (x1 - x0) * at / axis_max, y, w, bar_h, c.colors[s], tip, " class=\"mark\"");
      at += v * scale;
    }
    if (b.highlight) {
      marks += rect(x0, y - 1, (x1 - x0) * at / axis_max, bar_h + 2, "none", "",
                    " stroke=\"#222\" stroke-width=\"1.5\"");
    }
    // The absolute total, also when the bar is drawn as 100 %.
    marks += text(x0 + (x1 - x0) * at / axis_max + 6, y + bar_h / 2 + 4,
                  fmt::format("{:.4g} {}", total, c.unit), "start", " fill=\"#333\"");
  }
  const double h = bottom + 40;
  return open_svg(c.id, c.title, kWidth, h) + grid + body + marks + "</svg>";
}

std::string bars(const Bars& c) {
  std::vector<std::string> labels;
  for (const auto& b : c.bars) labels.push_back(b.label);
  const double left = label_width(labels, 80, 360);
  const double right = 150;
  const double bar_h = 20, gap = 8, top = 12;
  const double bottom = top + static_cast<double>(c.bars.size()) * (bar_h + gap);
  double max_v = 0;
  for (const auto& b : c.bars) {
    if (!b.missing) max_v = std::max(max_v, b.value);
  }
  const std::vector<double> ticks = nice_ticks(0, c.max_value.value_or(max_v > 0 ? max_v : 1), 6);
  const double axis_max = ticks.back();
  const double x0 = left, x1 = kWidth - right;
  const std::string hatch = c.id + "-hatch";
  std::string out = fmt::format(
      "<defs><pattern id=\"{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f2f2f2\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/>"
      "</pattern></defs>",
      escape(hatch));
  x_axis(out, x0, x1, top - 4, bottom, axis_max, ticks, c.unit);
  for (std::size_t i = 0; i < c.bars.size(); ++i) {
    const auto& b = c.bars[i];
    const double y = top + static_cast<double>(i) * (bar_h + gap);
    out += text(left - 8, y + bar_h / 2 + 4, b.label, "end",
                b.highlight ? " font-weight=\"bold\"" : "");
    const std::string tip =
        b.tooltip.empty() ? fmt::format("{}: {:.4g} {}", b.label, b.value, c.unit) : b.tooltip;
    double end = x0;
    if (b.missing) {
      out += rect(x0, y, (x1 - x0) * 0.25, bar_h, "url(#" + escape(hatch) + ")", tip,
                  " class=\"mark\"");
      end = x0 + (x1 - x0) * 0.25;
    } else {
      const double w = (x1 - x0) * std::max(0.0, b.value) / axis_max;
      out += rect(x0, y, w, bar_h, b.highlight ? "#e15759" : "#4e79a7", tip, " class=\"mark\"");
      end = x0 + w;
    }
    const std::string note =
        b.note.empty() ? (b.missing ? "" : fmt::format("{:.4g} {}", b.value, c.unit)) : b.note;
    out += text(end + 6, y + bar_h / 2 + 4, note, "start", " fill=\"#333\"");
  }
  return open_svg(c.id, c.title, kWidth, bottom + 40) + out + "</svg>";
}

std::string scatter(const Scatter& c) {
  const double left = 70, right = 24, top_legend = 8;
  std::string body;
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& k : c.kinds) entries.emplace_back(k.name, swatch(k.marker, k.color));
  const double legend_h = legend(body, left, top_legend + 12, kWidth - left - right, entries);
  const double top = top_legend + legend_h + 8;
  const double height = 440;
  const double bottom = height - 50;
  std::vector<double> xs, ys;
  for (const auto& p : c.points) {
    xs.push_back(p.x);
    ys.push_back(p.y);
  }
  if (c.x_limit) xs.push_back(*c.x_limit);
  if (c.diagonal) {
    // Same domain on both axes, so that the diagonal is the 45° line.
    std::vector<double> all = xs;
    all.insert(all.end(), ys.begin(), ys.end());
    xs = all;
    ys = all;
  }
  Axis ax = fit_axis(xs, c.log_x, !c.log_x && !c.diagonal);
  Axis ay = fit_axis(ys, c.log_y, !c.log_y && !c.diagonal);
  ax.p0 = left;
  ax.p1 = kWidth - right;
  ay.p0 = bottom;
  ay.p1 = top;
  std::string grid;
  for (const auto& [v, label] : ax.ticks()) {
    const double x = ax.map(v);
    grid += line(x, top, x, bottom, "#e6e6e6");
    grid += text(x, bottom + 16, label, "middle", " fill=\"#555\"");
  }
  for (const auto& [v, label] : ay.ticks()) {
    const double y = ay.map(v);
    grid += line(left, y, kWidth - right, y, "#e6e6e6");
    grid += text(left - 6, y + 4, label, "end", " fill=\"#555\"");
  }
  grid += line(left, bottom, kWidth - right, bottom, "#999");
  grid += line(left, top, left, bottom, "#999");
  grid += text((left + kWidth - right) / 2, bottom + 36, c.x_label, "middle");
  grid += fmt::format(
      "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}"
      "</text>",
      n((top + bottom) / 2), escape(c.y_label));
  if (c.diagonal) {
    const double lo = std::max(ax.lo, ay.lo), hi = std::min(ax.hi, ay.hi);
    grid +=
        line(ax.map(lo), ay.map(lo), ax.map(hi), ay.map(hi), "#888", " stroke-dasharray=\"5 4\"");
    grid += text(ax.map(hi) - 4, ay.map(hi) + 14, c.diagonal_label, "end", " fill=\"#777\"");
  }
  if (c.x_limit) {
    const double x = ax.map(*c.x_limit);
    grid += line(x, top, x, bottom, "#e15759", " stroke-dasharray=\"6 3\" stroke-width=\"1.5\"");
    grid += text(x + 4, top + 12, c.x_limit_label, "start", " fill=\"#c03030\"");
  }
  std::string marks;
  for (const auto& p : c.points) {
    const auto& k = c.kinds[std::min(p.kind, c.kinds.size() - 1)];
    marks += marker(k.marker, ax.map(p.x), ay.map(p.y), k.color, p.tooltip);
  }
  return open_svg(c.id, c.title, kWidth, height) + grid + body + "<g class=\"mark\">" + marks +
         "</g></svg>";
}

std::string heatmap(const Heatmap& c) {
  const double left = std::max(90.0, label_width(c.rows, 60, 200) + 30);
  const double top = 40;
  const double cell_w =
      std::min(72.0, (kWidth - left - 20) / std::max<std::size_t>(1, c.cols.size()));
  const double cell_h = 26;
  double lo = std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::lowest();
  for (const auto& cell : c.cells) {
    if (cell.value) {
      lo = std::min(lo, *cell.value);
      hi = std::max(hi, *cell.value);
    }
  }
  if (lo > hi) lo = hi = 0;
  const double span = hi > lo ? hi - lo : 1;
  std::string out;
  const std::string grad = c.id + "-scale";
  out += fmt::format("<defs><linearGradient id=\"{}\">", escape(grad));
  for (int i = 0; i <= 4; ++i) {
    out += fmt::format("<stop offset=\"{}%\" stop-color=\"{}\"/>", i * 25, viridis(i / 4.0));
  }
  out += "</linearGradient></defs>";
  const double grid_w = cell_w * static_cast<double>(c.cols.size());
  out += text(left + grid_w / 2, 14, c.col_label, "middle", " font-weight=\"bold\"");
  for (std::size_t j = 0; j < c.cols.size(); ++j) {
    out += text(left + cell_w * (static_cast<double>(j) + 0.5), top - 8, c.cols[j], "middle");
  }
  out += fmt::format(
      "<text transform=\"translate(14,{}) rotate(-90)\" text-anchor=\"middle\" "
      "font-weight=\"bold\">{}</text>",
      n(top + cell_h * static_cast<double>(c.rows.size()) / 2), escape(c.row_label));
  std::string marks, outline;
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const double y = top + cell_h * static_cast<double>(i);
    out += text(left - 8, y + cell_h / 2 + 4, c.rows[i], "end");
    for (std::size_t j = 0; j < c.cols.size(); ++j) {
      const Heatmap::Cell& cell = c.cells[i * c.cols.size() + j];
      const double x = left + cell_w * static_cast<double>(j);
      if (static_cast<long>(i * c.cols.size() + j) == c.highlight) {
        outline = rect(x + 1, y + 1, cell_w - 2, cell_h - 2, "none", "",
                       " stroke=\"#e15759\" stroke-width=\"3\" pointer-events=\"none\"");
      }
      if (cell.value) {
        const double t = (*cell.value - lo) / span;
        marks += rect(x + 1, y + 1, cell_w - 2, cell_h - 2, viridis(t), cell.tooltip);
        marks += text(x + cell_w / 2, y + cell_h / 2 + 4,
                      fmt::format(fmt::runtime(c.value_format), *cell.value), "middle",
                      t < 0.62 ? " fill=\"#fff\" pointer-events=\"none\""
                               : " fill=\"#111\" pointer-events=\"none\"");
      } else {
        marks += rect(x + 1, y + 1, cell_w - 2, cell_h - 2, "#f1f1f1", cell.tooltip);
        marks += fmt::format(
            "<path d=\"M{} {}L{} {}M{} {}L{} {}\" stroke=\"#b5b5b5\" "
            "pointer-events=\"none\"/>",
            n(x + cell_w / 2 - 5), n(y + cell_h / 2 - 5), n(x + cell_w / 2 + 5),
            n(y + cell_h / 2 + 5), n(x + cell_w / 2 - 5), n(y + cell_h / 2 + 5),
            n(x + cell_w / 2 + 5), n(y + cell_h / 2 - 5));
      }
    }
  }
  const double bottom = top + cell_h * static_cast<double>(c.rows.size());
  const double ly = bottom + 18;
  out += rect(left, ly, 200, 10, "url(#" + escape(grad) + ")", "");
  out += text(left, ly + 24, fmt::format(fmt::runtime(c.value_format), lo), "start");
  out += text(left + 200, ly + 24, fmt::format(fmt::runtime(c.value_format), hi), "end");
  out += text(left + 212, ly + 9, c.legend, "start", " fill=\"#555\"");
  out += text(left + 212, ly + 25,
              std::string("× = no feasible configuration") +
                  (c.highlight >= 0 ? ";  red outline = the scenario's own" : ""),
              "start", " fill=\"#555\"");
  return open_svg(c.id, c.title, std::max(kWidth, left + grid_w + 20), ly + 34) + out +
         "<g class=\"mark\">" + marks + outline + "</g></svg>";
}

std::string timeline(const Timeline& c) {
  const double left = label_width(c.lanes, 80, 220);
  const double right = 24;
  std::string body;
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& k : c.kinds) entries.emplace_back(k.name, k.color);
  const double legend_h = legend(body, left, 16, kWidth - left - right, entries);
  const double top = legend_h + 12;
  const double lane_h = 22, gap = 6;
  const double bottom = top + static_cast<double>(c.lanes.size()) * (lane_h + gap);
  const double end = c.end_s > 0 ? c.end_s : 1;
  const std::vector<double> ticks = nice_ticks(0, end * c.time_scale, 8);
  const double axis_max = ticks.back() / c.time_scale;
  const double x0 = left, x1 = kWidth - right;
  std::string grid;
  x_axis(grid, x0, x1, top - 4, bottom, ticks.back(), ticks, c.time_unit);
  for (std::size_t l = 0; l < c.lanes.size(); ++l) {
    grid += text(left - 8, top + static_cast<double>(l) * (lane_h + gap) + lane_h / 2 + 4,
                 c.lanes[l], "end");
  }
  std::string marks;
  for (const auto& b : c.blocks) {
    const double xa = x0 + (x1 - x0) * b.start_s / axis_max;
    const double xb = x0 + (x1 - x0) * std::min(b.end_s, axis_max) / axis_max;
    const double y = top + static_cast<double>(b.lane) * (lane_h + gap);
    marks += rect(xa, y, std::max(0.6, xb - xa - 0.4), lane_h, c.kinds[b.kind].color, b.tooltip);
    if (!b.text.empty() && xb - xa > kCharWidth * static_cast<double>(b.text.size()) + 4) {
      marks += text((xa + xb) / 2, y + lane_h / 2 + 4, b.text, "middle",
                    " fill=\"#fff\" font-size=\"10\" pointer-events=\"none\"");
    }
  }
  return open_svg(c.id, c.title, kWidth, bottom + 40) + grid + body + "<g class=\"mark\">" + marks +
         "</g></svg>";
}

}  // namespace trainsim::reports::svg
