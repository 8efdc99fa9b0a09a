#include "calibrate/nccl_tests.h"

#include <Eigen/Dense>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "sim/collective/analytic.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"

namespace trainsim::calib {
namespace {

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// Launchers tag each line with the rank that printed it: `srun -l` writes "0: ", Open MPI's
// --tag-output writes "[1,0]<stdout>:". Only one prefix is removed, so a table cell is never lost.
std::string strip_launcher_prefix(const std::string& line) {
  static const std::regex kPrefix(R"(^(\[\d+,\d+\]<std(out|err)>:|\s*\d+:(\s|$)))");
  std::smatch m;
  if (std::regex_search(line, m, kPrefix)) return m.suffix().str();
  return line;
}

// Binary names first (all_reduce_perf), then the shorter spellings used in file names. Longer
// names come before the names they contain (reduce_scatter before reduce).
std::string op_from_name(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '_' || c == '-'; }),
          s.end());
  static const std::pair<const char*, const char*> kNames[] = {
      {"allreduce", "all_reduce"},         {"allgather", "all_gather"},
      {"reducescatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
      {"broadcast", "broadcast"},          {"bcast", "broadcast"},
      {"sendrecv", "sendrecv"},            {"reduce", "reduce"}};
  for (const auto& [key, op] : kNames) {
    if (s.find(key) != std::string::npos) return op;
  }
  return "";
}

bool is_na(const std::string& cell) { return cell == "N/A"; }

std::string fmt_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

[[noreturn]] void bad_cell(const std::string& path, int line, std::size_t col,
                           const std::string& name, const std::string& cell, const char* want) {
  throw_input("`" + cell + "` is not " + want,
              {path, line, "column " + std::to_string(col + 1) + " (" + name + ")"});
}

std::int64_t parse_int(const std::string& cell, const std::string& path, int line,
                       std::size_t col, const std::string& name) {
  const IntResult r = to_int64(cell);
  if (r.problem != NumberProblem::kNone) bad_cell(path, line, col, name, cell, "an integer");
  return r.value;
}

// A table number through the checked conversion: finite, not subnormal, >= 0; `max` bounds the
// cells that enter a fit (times), the others (algbw, busbw, #wrong) only need to be numbers.
double parse_double(const std::string& cell, const std::string& path, int line, std::size_t col,
                    const std::string& name, double max = std::numeric_limits<double>::max()) {
  const NumberResult r = to_double(cell);
  if (r.problem != NumberProblem::kNone || r.value < 0) {
    bad_cell(path, line, col, name, cell, "a number >= 0 or N/A");
  }
  if (r.value > max) {
    throw_input("`" + cell + "` is above the limit of " + fmt_number(max),
                {path, line, "column " + std::to_string(col + 1) + " (" + name + ")"},
                "docs/reliability.md gives the input limits");
  }
  return r.value;
}

// A header count (nGpus, nThread, Rank): an integer in [0, kMaxRanks].
int header_count(const std::string& digits, const std::string& path, int line, const char* name) {
  return static_cast<int>(parse_int64(digits, {path, line, name}, 0, limits::kMaxRanks));
}

std::string basename(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

double nccl_tests_busbw_factor(const std::string& op, int ranks) {
  if (op == "all_reduce") return coll::busbw_factor(coll::Kind::kAllReduce, ranks);
  if (op == "all_gather") return coll::busbw_factor(coll::Kind::kAllGather, ranks);
  if (op == "reduce_scatter") return coll::busbw_factor(coll::Kind::kReduceScatter, ranks);
  if (op == "all_to_all") return coll::busbw_factor(coll::Kind::kAllToAll, ranks);
  if (op == "broadcast") return coll::busbw_factor(coll::Kind::kBroadcast, ranks);
  // reduce_perf reports busbw = algbw, as broadcast does; coll::Kind has no reduce.
  if (op == "reduce") return ranks > 1 ? 1.0 : 0.0;
  return coll::busbw_factor(coll::Kind::kSendRecv, ranks);
}

namespace {

// Half a unit of the last digit printed in a number cell ("181.09" -> 0.005, "182" -> 0.5).
double half_ulp(const std::string& cell) {
  const auto e = cell.find_first_of("eE");
  const auto mantissa_end = e == std::string::npos ? cell.size() : e;
  const auto dot = cell.find('.');
  const std::size_t decimals =
      dot == std::string::npos || dot > mantissa_end ? 0 : mantissa_end - dot - 1;
  double h = 0.5 * std::pow(10.0, -static_cast<double>(decimals));
  if (e != std::string::npos) {
    const NumberResult x = to_double(cell.substr(e + 1));
    if (x.problem == NumberProblem::kNone) h *= std::pow(10.0, x.value);
  }
  return h;
}

// "...", "…", "[...]", "(... 12 lines ...)": a marker where part of the output was left out.
bool is_elision(const std::string& s) {
  const auto first = s.find_first_not_of(" \t#");
  if (first == std::string::npos) return false;
  const std::string t = s.substr(first);
  for (const char* m : {"...", "\xE2\x80\xA6", "[...", "[\xE2\x80\xA6", "(...", "(\xE2\x80\xA6"}) {
    if (t.rfind(m, 0) == 0) return true;
  }
  return false;
}

// A row cut off where the cells stop: a cell "..." / "…" or a last cell ending in one.
bool has_elided_cell(const std::vector<std::string>& cells) {
  for (const std::string& c : cells) {
    if (c.find("...") != std::string::npos || c.find("\xE2\x80\xA6") != std::string::npos) {
      return true;
    }
  }
  return false;
}

bool is_nccl_log(const std::string& line) {
  return line.find("NCCL INFO") != std::string::npos ||
         line.find("NCCL WARN") != std::string::npos ||
         line.find("NCCL TRACE") != std::string::npos;
}

// nccl-tests' own failure report: the table after it, if any, is not a measurement.
bool is_test_failure(const std::string& line) {
  return line.find("Test NCCL failure") != std::string::npos ||
         line.find("Test CUDA failure") != std::string::npos ||
         line.find("Test failure") != std::string::npos;
}

// A table row starts with two integers (size, count); a launcher line does not ("7 more
// processes have sent help message").
bool looks_like_row(const std::vector<std::string>& cells) {
  if (cells.empty() || !std::isdigit(static_cast<unsigned char>(cells[0][0]))) return false;
  if (cells.size() < 2) return true;
  return std::all_of(cells[1].begin(), cells[1].end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

const char* skip_kind_name(NcclTestsSkip k, bool plural) {
  switch (k) {
    case NcclTestsSkip::kSizeZero: return plural ? "rows of size 0" : "row of size 0";
    case NcclTestsSkip::kTruncated:
      return plural ? "truncated lines (\"...\")" : "truncated line (\"...\")";
    case NcclTestsSkip::kNcclLog: return plural ? "NCCL log lines" : "NCCL log line";
    case NcclTestsSkip::kLauncher:
      return plural ? "launcher or shell lines (not nccl-tests output)"
                    : "launcher or shell line (not nccl-tests output)";
    case NcclTestsSkip::kNoTime:
      return plural ? "rows without a time (every time cell 0 or N/A)"
                    : "row without a time (every time cell 0 or N/A)";
    case NcclTestsSkip::kInPlaceTime:
      return plural ? "rows whose out-of-place time is 0 use their in-place time"
                    : "row whose out-of-place time is 0 uses its in-place time";
  }
  return "";
}

// Whether the op's busbw/algbw ratio depends on the rank count.
bool ratio_tells_ranks(const std::string& op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" || op == "all_to_all";
}

// The rank count a busbw/algbw factor f means: 2(n−1)/n for all-reduce, (n−1)/n for the others
// whose factor depends on n; +inf at or past the limit the factor approaches.
double ranks_for_factor(const std::string& op, double f) {
  const double top = op == "all_reduce" ? 2.0 : 1.0;
  if (f >= top) return std::numeric_limits<double>::infinity();
  return top / (top - f);
}

std::string factor_formula(const std::string& op) {
  if (op == "all_reduce") return "2(n-1)/n";
  if (ratio_tells_ranks(op)) return "(n-1)/n";
  return "1";
}

// What the busbw/algbw ratio of the rows says: the measured factor, its rounding allowance and
// the row it comes from (the one with the largest algbw, printed to the most significant digits).
struct RatioEvidence {
  bool present = false;
  double factor = 0, tolerance = 0;
  int line = 0;
};

RatioEvidence ratio_evidence(const std::vector<NcclTestsRow>& rows) {
  RatioEvidence e;
  const NcclTestsRow* best = nullptr;
  for (const NcclTestsRow& r : rows) {
    if (r.algbw_GBps > 0 && r.busbw_GBps > 0 && (!best || r.algbw_GBps > best->algbw_GBps)) {
      best = &r;
    }
  }
  if (!best) return e;
  e.present = true;
  e.factor = best->busbw_GBps / best->algbw_GBps;
  // The ratio of two rounded numbers: relative errors add. A little more for the division.
  e.tolerance = e.factor * (best->algbw_half_ulp / best->algbw_GBps +
                            best->busbw_half_ulp / best->busbw_GBps) * 1.01 +
                1e-9 * e.factor;
  e.line = best->line;
  // Cells so far apart that the ratio overflows say nothing about the rank count.
  if (!std::isfinite(e.factor) || !std::isfinite(e.tolerance)) e.present = false;
  return e;
}

// The integers n whose factor lies within the evidence's tolerance, as [lo, hi]; lo > hi when
// none; hi may be INT_MAX (the factor is too close to its limit to bound n).
std::pair<std::int64_t, std::int64_t> ranks_range(const std::string& op, const RatioEvidence& e) {
  const double lo_f = std::max(0.0, e.factor - e.tolerance), hi_f = e.factor + e.tolerance;
  const double lo = ranks_for_factor(op, lo_f), hi = ranks_for_factor(op, hi_f);
  const auto max = static_cast<double>(limits::kMaxRanks);
  if (!(lo <= max)) return {1, 0};  // a factor at or past its limit: no rank count fits
  const auto lo_n = static_cast<std::int64_t>(std::ceil(lo - 1e-9));
  const std::int64_t hi_n =
      !(hi <= max) ? limits::kMaxRanks : static_cast<std::int64_t>(std::floor(hi + 1e-9));
  return {std::max<std::int64_t>(lo_n, 2), hi_n};
}

bool factor_agrees(const std::string& op, int ranks, const RatioEvidence& e) {
  return std::abs(nccl_tests_busbw_factor(op, ranks) - e.factor) <= e.tolerance;
}

std::string fmt_factor(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", f);
  return buf;
}

// What the ratio implies, in words: "32 ranks" or "between 30 and 34 ranks".
std::string implied_ranks(const std::string& op, const RatioEvidence& e) {
  const auto [lo, hi] = ranks_range(op, e);
  if (lo > hi) {
    return "no rank count (" + op + " has busbw = algbw x " + factor_formula(op) + ")";
  }
  if (lo == hi) return std::to_string(lo) + " ranks";
  if (hi >= limits::kMaxRanks) return "at least " + std::to_string(lo) + " ranks";
  return "between " + std::to_string(lo) + " and " + std::to_string(hi) + " ranks";
}

// Settles run.ranks from the file's count (`stated`, 0 when none), --ranks and the ratio.
void resolve_ranks(NcclTestsRun& run, int stated, const std::string& stated_from,
                   const NcclTestsOptions& o) {
  const std::string& path = run.path;
  // Messages name the run's first line when the file holds several (its first is line 1).
  const std::string label =
      run.first_line > 1 ? path + ":" + std::to_string(run.first_line) : path;
  const RatioEvidence e = ratio_evidence(run.rows);
  const bool informative = e.present && ratio_tells_ranks(run.op);
  const std::string ratio_text = e.present ? "busbw/algbw = " + fmt_factor(e.factor) + " (line " +
                                                 std::to_string(e.line) + ")"
                                           : std::string();
  // Ops whose factor is 1 whatever the rank count: the ratio still says whether this is one.
  if (e.present && !ratio_tells_ranks(run.op) && std::abs(e.factor - 1.0) > e.tolerance) {
    throw_input(ratio_text + ", but " + run.op + " reports busbw = algbw",
                {path, e.line, "busbw"},
                "is this " + run.op + " output? The collective came from " +
                    "the `# Collective test starting` line, the file name or the columns");
  }
  const auto use = [&](int n, const std::string& from) {
    run.ranks = n;
    run.ranks_from = from;
  };
  if (stated > 0 && (!informative || factor_agrees(run.op, stated, e))) {
    if (o.ranks > 0 && o.ranks != stated) {
      run.warnings.push_back(label + ": --ranks " + std::to_string(o.ranks) +
                             " not used: the file states " + std::to_string(stated) +
                             " ranks (" + stated_from + ")" +
                             (informative ? ", and " + ratio_text + " agrees" : std::string()));
    }
    use(stated, stated_from);
    return;
  }
  if (stated > 0) {
    // The stated count contradicts the ratio nccl-tests computed from the real one.
    if (o.ranks > 0 && factor_agrees(run.op, o.ranks, e)) {
      run.warnings.push_back(label + ": --ranks " + std::to_string(o.ranks) + " replaces the " +
                             std::to_string(stated) + " ranks the file states (" + stated_from +
                             "), as " + ratio_text + " implies " + implied_ranks(run.op, e));
      use(o.ranks, "--ranks");
      return;
    }
    const std::string implied = implied_ranks(run.op, e);
    std::string hint = "a device list cut short, or nGpus of one process under mpirun, reads as "
                       "too few ranks";
    const auto [lo, hi] = ranks_range(run.op, e);
    if (lo == hi) hint = "if the job had " + std::to_string(lo) + " ranks, pass --ranks " +
                         std::to_string(lo) + "; " + hint;
    throw_input("the file states " + std::to_string(stated) + " ranks (" + stated_from + "), but " +
                    ratio_text + " implies " + implied + " for " + run.op +
                    " (busbw = algbw x " + factor_formula(run.op) + ")" +
                    (o.ranks > 0 ? "; --ranks " + std::to_string(o.ranks) + " does not fit it either"
                                 : std::string()),
                {path, e.line, "busbw"}, hint);
  }
  // The file states no rank count.
  if (o.ranks > 0) {
    if (informative && !factor_agrees(run.op, o.ranks, e)) {
      throw_input("--ranks " + std::to_string(o.ranks) + " disagrees with " + ratio_text +
                      ", which implies " + implied_ranks(run.op, e) + " for " + run.op +
                      " (busbw = algbw x " + factor_formula(run.op) + ")",
                  {path, e.line, "busbw"});
    }
    use(o.ranks, "--ranks");
    return;
  }
  if (informative) {
    const auto [lo, hi] = ranks_range(run.op, e);
    if (lo == hi) {
      run.notes.push_back(label + ": no rank count in the file; " + ratio_text + " gives " +
                          std::to_string(lo) + " ranks (busbw = algbw x " +
                          factor_formula(run.op) + "); --ranks sets it");
      use(static_cast<int>(lo), "busbw/algbw");
      return;
    }
  }
  throw_input("cannot tell the rank count: no `#  Rank` lines, no `nGpus` above 1 in the header" +
                  (informative ? ", and " + ratio_text + " fits " + implied_ranks(run.op, e)
                               : std::string()),
              {path, 0, ""}, "pass --ranks N, the number of ranks of the job");
}

// Every row's busbw/algbw must be the factor of the run's rank count, within the rounding of
// the two printed cells (the true ratio lies in [(b − δb)/(a + δa), (b + δb)/(a − δa)]): a row
// that is not belongs to another run, pasted below this one without its header.
void check_row_ratios(const NcclTestsRun& run) {
  const double f = nccl_tests_busbw_factor(run.op, run.ranks);
  for (const NcclTestsRow& r : run.rows) {
    if (!(r.algbw_GBps > 0 && r.busbw_GBps > 0)) continue;
    // Cells so far apart that the ratio overflows say nothing (as in ratio_evidence).
    if (!std::isfinite(r.busbw_GBps / r.algbw_GBps)) continue;
    const double lo = (r.busbw_GBps - r.busbw_half_ulp) / (r.algbw_GBps + r.algbw_half_ulp);
    const double hi = r.algbw_GBps > r.algbw_half_ulp
                          ? (r.busbw_GBps + r.busbw_half_ulp) / (r.algbw_GBps - r.algbw_half_ulp)
                          : std::numeric_limits<double>::infinity();
    if (f >= lo * (1 - 1e-9) && f <= hi * (1 + 1e-9)) continue;
    RatioEvidence e;
    e.present = true;
    e.factor = r.busbw_GBps / r.algbw_GBps;
    e.tolerance = (hi - lo) / 2;
    throw_input("busbw/algbw = " + fmt_factor(e.factor) + " (busbw " + fmt_number(r.busbw_GBps) +
                    ", algbw " + fmt_number(r.algbw_GBps) + ") implies " +
                    implied_ranks(run.op, e) + ", but the run has " + std::to_string(run.ranks) +
                    " ranks (" + run.ranks_from + "), for which " + run.op + " has busbw = algbw x " +
                    fmt_factor(f),
                {run.path, r.line, "busbw"},
                "a row of another run? Keep each run's header lines (`# nThread ... nGpus`, "
                "`#  Rank ...`), which start a new run, or import it from a file of its own");
  }
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isdigit(c) != 0;
  });
}

// A time unit other than microseconds in the units line under the column header (`(ms)`): the
// samples and the fit are in microseconds, and nccl-tests prints nothing else.
bool is_other_time_unit(const std::string& token) {
  for (const char* u : {"(ms)", "(s)", "(ns)", "(sec)", "(msec)", "(nsec)", "(seconds)",
                        "(millis)", "(milliseconds)", "(nanoseconds)"}) {
    if (token == u) return true;
  }
  return false;
}

}  // namespace

std::string gpu_preset_for_device_name(const std::string& name) {
  std::string n;
  for (unsigned char c : name) n += static_cast<char>(std::toupper(c));
  for (char& c : n) {
    if (c == '-' || c == '_') c = ' ';
  }
  const auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  // The memory size where the name prints one ("40GB" in "A100-SXM4-40GB"), else 0.
  int gb = 0;  // stays 0 for a size too long to be one
  static const std::regex kGb(R"((\d{1,6})\s*GB)");
  std::smatch m;
  if (std::regex_search(n, m, kGb)) gb = std::stoi(m[1].str());
  n += " ";  // so "H20 " does not match "H200"
  if (has("GB200")) return gb == 0 || gb == 186 ? "gb200" : "";
  if (has("GB300")) return gb == 0 || gb == 288 ? "gb300" : "";
  if (has("GH200") || has("PCIE") || has("NVL") || has("H20 ")) return "";
  if (has("H200")) return "h200-sxm";
  if (has("H100")) return gb == 0 || gb == 80 ? "h100-sxm" : "";
  if (has("H800")) return gb == 0 || gb == 80 ? "h800" : "";
  if (has("B200")) return gb == 0 || gb == 180 ? "b200" : "";
  if (has("B300")) return gb == 0 || gb == 288 ? "b300" : "";
  if (has("A800")) return gb == 80 ? "a800" : "";
  if (has("A100")) return gb == 80 ? "a100-80gb" : gb == 40 ? "a100-40gb" : "";
  return "";
}

std::vector<std::string> describe_skipped(const NcclTestsRun& run) {
  std::vector<std::string> out;
  for (NcclTestsSkip k : {NcclTestsSkip::kSizeZero, NcclTestsSkip::kNoTime,
                          NcclTestsSkip::kTruncated, NcclTestsSkip::kNcclLog,
                          NcclTestsSkip::kLauncher, NcclTestsSkip::kInPlaceTime}) {
    std::vector<int> lines;
    for (const NcclTestsSkippedLine& s : run.skipped) {
      if (s.kind == k) lines.push_back(s.line);
    }
    if (lines.empty()) continue;
    std::string text = run.path + ": " +
                       (k == NcclTestsSkip::kInPlaceTime ? "" : "skipped ") +
                       std::to_string(lines.size()) + " " + skip_kind_name(k, lines.size() > 1) +
                       " (line" + (lines.size() > 1 ? "s " : " ");
    const std::size_t shown = std::min<std::size_t>(lines.size(), 5);
    for (std::size_t i = 0; i < shown; ++i) {
      text += (i ? ", " : "") + std::to_string(lines[i]);
    }
    if (lines.size() > shown) text += " and " + std::to_string(lines.size() - shown) + " more";
    out.push_back(text + ")");
  }
  return out;
}

namespace {

const std::regex& rank_line_regex() {
  static const std::regex r(
      R"(^#\s+Rank\s+(\d+)\s.*\son\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*?)\s*$)");
  return r;
}
const std::regex& ngpus_regex() {
  static const std::regex r(R"(\bnGpus\s+(\d+))");
  return r;
}
const std::regex& starting_regex() {
  static const std::regex r(R"(Collective test starting:\s*(\S+))");
  return r;
}

// One run's lines (`lines`, the first at line `first_line` of the file). `inherited` are the
// columns of the run before, for a run that prints no column header of its own.
NcclTestsRun parse_run(const std::vector<std::string>& lines, int first_line,
                       const std::string& path, const NcclTestsOptions& options,
                       std::vector<std::string>& inherited) {
  const std::regex& kRankLine = rank_line_regex();
  const std::regex& kNGpus = ngpus_regex();
  static const std::regex kNThread(R"(\bnThread\s+(\d+))");
  const std::regex& kStarting = starting_regex();
  NcclTestsRun run;
  run.path = path;
  run.first_line = first_line;
  std::vector<std::string> columns;
  std::set<int> ranks;
  std::set<std::string> hosts;
  int version_ranks = 0;
  int lineno = first_line - 1;
  const auto skip = [&](NcclTestsSkip k) { run.skipped.push_back({k, lineno}); };
  for (const std::string& raw : lines) {
    ++lineno;
    const std::string line = strip_launcher_prefix(raw);
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    std::smatch m;
    if (line[first] == '#') {
      const std::string body = line.substr(first);
      if (std::regex_search(body, m, kStarting) && run.op.empty()) {
        run.op = op_from_name(m[1].str());
      } else if (std::regex_search(body, m, kNGpus)) {
        if (run.version_line.empty()) run.version_line = body;
        std::smatch t;
        const std::int64_t threads =
            std::regex_search(body, t, kNThread) ? header_count(t[1].str(), path, lineno, "nThread")
                                                 : 1;
        const std::int64_t gpus = header_count(m[1].str(), path, lineno, "nGpus");
        if (gpus * threads > limits::kMaxRanks) {
          throw_input("nGpus x nThread = " + std::to_string(gpus * threads) + " ranks is above " +
                          std::to_string(limits::kMaxRanks),
                      {path, lineno, "nGpus"});
        }
        version_ranks = static_cast<int>(gpus * threads);
      } else if (std::regex_match(body, m, kRankLine)) {
        const int rank = header_count(m[1].str(), path, lineno, "Rank");
        if (ranks.empty() || rank == 0) {
          run.gpu_name = m[3].str();
          run.gpu_line = lineno;
        }
        ranks.insert(rank);
        hosts.insert(m[2].str());
      } else if (is_elision(body)) {
        skip(NcclTestsSkip::kTruncated);  // e.g. a device list shortened with "#  ..."
      } else {
        const auto cols = split_ws(body.substr(1));
        if (!cols.empty() && cols[0] == "size") columns = cols;
        if (!cols.empty() && cols[0] == "(B)") {
          // The units line under the column header: times must be in microseconds.
          for (const std::string& u : cols) {
            if (is_other_time_unit(u)) {
              throw_input("times in `" + u + "`: nccl-tests prints them in microseconds "
                              "(`(us)`), which the samples and the fit are in",
                          {path, lineno, "column header units"},
                          "was the table converted or edited? Give the times in microseconds "
                          "under a `(us)` header");
            }
          }
        }
      }
      continue;
    }
    if (is_test_failure(line)) {
      throw_input("nccl-tests reports a failure: `" + line.substr(first, 80) + "`",
                  {path, lineno, "column 1"}, "the run did not finish; measure again");
    }
    // NCCL_DEBUG=INFO output interleaves with the table; it is not part of it.
    if (is_nccl_log(line)) {
      skip(NcclTestsSkip::kNcclLog);
      continue;
    }
    if (is_elision(line)) {
      skip(NcclTestsSkip::kTruncated);
      continue;
    }
    const auto cells = split_ws(line);
    // A row cut off with "..." (`8388608  ...`) before the test for a row: its second cell is
    // no count, but it is the table's.
    if (!cells.empty() && all_digits(cells[0]) && has_elided_cell(cells)) {
      skip(NcclTestsSkip::kTruncated);
      continue;
    }
    if (!looks_like_row(cells)) {
      skip(NcclTestsSkip::kLauncher);  // mpirun / srun / MPI library messages, banners
      continue;
    }
    if (has_elided_cell(cells)) {
      skip(NcclTestsSkip::kTruncated);
      continue;
    }
    if (cells[0] == "0") {
      skip(NcclTestsSkip::kSizeZero);
      continue;
    }
    if (columns.empty()) columns = inherited;
    if (columns.empty()) {
      throw_input("result row before the column header (`#  size  count  type ...`)",
                  {path, lineno, "column 1"});
    }
    if (cells.size() != columns.size()) {
      const std::size_t col = std::min(cells.size(), columns.size());
      throw_input("expected " + std::to_string(columns.size()) + " columns, found " +
                      std::to_string(cells.size()),
                  {path, lineno,
                   "column " + std::to_string(col + 1) +
                       (col < columns.size() ? " (" + columns[col] + ")" : "")},
                  "a row cut short in a paste can be marked with \"...\" to be skipped");
    }
    NcclTestsRow row;
    row.line = lineno;
    int time_groups = 0, algbw_groups = 0, busbw_groups = 0;
    bool out_of_place_zero = false;  // a printed 0 (not N/A) in the first time column
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string& name = columns[c];
      const std::string& cell = cells[c];
      if (name == "size") {
        row.size_bytes = parse_int(cell, path, lineno, c, name);
        if (static_cast<double>(row.size_bytes) > limits::kMaxMessageBytes) {
          bad_cell(path, lineno, c, name, cell, "a size of at most 2^50 bytes");
        }
      } else if (name == "count") {
        row.count = parse_int(cell, path, lineno, c, name);
      } else if (name == "type") {
        row.type = cell;
      } else if (name == "redop") {
        row.redop = cell;
      } else if (name == "root") {
        const std::int64_t root = parse_int(cell, path, lineno, c, name);
        if (root < -1 || root > limits::kMaxRanks) {
          bad_cell(path, lineno, c, name, cell, "a rank (or -1)");
        }
        row.root = static_cast<int>(root);
      } else if (name == "time") {
        const double t =
            is_na(cell) ? 0.0
                        : parse_double(cell, path, lineno, c, name, limits::kMaxCollectiveTime_us);
        if (time_groups == 0 && !is_na(cell) && t == 0) out_of_place_zero = true;
        (time_groups++ == 0 ? row.out_of_place_us : row.in_place_us) = t;
      } else if (!is_na(cell)) {
        // algbw, busbw, #wrong / error: checked to be numbers; the bandwidths (first group that
        // prints them) are kept for the rank-count check.
        const double v = parse_double(cell, path, lineno, c, name);
        if (name == "algbw" && algbw_groups++ == 0 && row.algbw_GBps == 0 && v > 0) {
          row.algbw_GBps = v;
          row.algbw_half_ulp = half_ulp(cell);
        } else if (name == "busbw" && busbw_groups++ == 0 && row.busbw_GBps == 0 && v > 0) {
          row.busbw_GBps = v;
          row.busbw_half_ulp = half_ulp(cell);
        }
      }
    }
    if (row.size_bytes <= 0) bad_cell(path, lineno, 0, columns[0], cells[0], "a size > 0");
    if (!(row.out_of_place_us > 0) && !(row.in_place_us > 0)) {
      skip(NcclTestsSkip::kNoTime);  // nothing measured; listed, not silently dropped
      continue;
    }
    if (out_of_place_zero) skip(NcclTestsSkip::kInPlaceTime);  // still a row: listed
    run.rows.push_back(row);
  }
  if (!columns.empty()) inherited = columns;
  if (run.rows.empty()) {
    std::string what;  // what was skipped, without the file name each line starts with
    for (const std::string& s : describe_skipped(run)) {
      what += (what.empty() ? "" : "; ") + s.substr(path.size() + 2);
    }
    const std::string which =
        first_line > 1 ? "the run that starts at line " + std::to_string(first_line) + " has "
                       : std::string();
    throw_input(what.empty() ? which + "no result rows (is this nccl-tests output?)"
                             : which + "no result rows left: " + what,
                {path, first_line > 1 ? first_line : 0, ""});
  }
  if (run.op.empty()) run.op = op_from_name(basename(path));
  if (run.op.empty()) {
    // Newer nccl-tests print redop and root for every collective; only rooted ones use root.
    const NcclTestsRow& r = run.rows.front();
    if (r.root >= 0) run.op = r.redop == "none" ? "broadcast" : "reduce";
  }
  if (run.op.empty()) {
    throw_input("cannot tell which collective this is",
                {path, 0, ""},
                "keep the `# Collective test starting:` line or name the file after the test "
                "(all_reduce_perf.txt, ...)");
  }
  // nThread x nGpus counts one process's ranks: under mpirun (nGpus 1 per process) it is not the
  // job's size, so without rank lines a count of 1 is taken as unknown, not as a 1-rank run.
  const int stated =
      !ranks.empty() ? static_cast<int>(ranks.size()) : (version_ranks > 1 ? version_ranks : 0);
  resolve_ranks(run, stated, !ranks.empty() ? "`#  Rank` lines" : "nThread x nGpus", options);
  if (run.ranks < 2) {
    throw_input("a run of " + std::to_string(run.ranks) + " rank (" + run.ranks_from +
                    ") moves nothing between GPUs: a collective needs at least 2 ranks",
                {run.path, run.first_line, run.ranks_from == "--ranks" ? "--ranks" : ""},
                "import runs of 2 or more ranks");
  }
  if (run.op == "sendrecv" && run.ranks != 2) {
    // sendrecv_perf over n ranks sends from each rank to the next, all at once; the simulator's
    // send/recv is one pair, so a fit is looked up for 2 ranks only.
    run.warnings.push_back(run.path + ": sendrecv over " + std::to_string(run.ranks) +
                           " ranks: its fit is stored for " + std::to_string(run.ranks) +
                           " ranks, but the simulator prices a send/recv as one pair (2 ranks), "
                           "so it prices nothing; a run of 2 ranks (-g 2, or mpirun -np 2) does");
  }
  check_row_ratios(run);
  // Hosts are only known when the rank lines list every rank (not when --ranks replaced them),
  // or when one process drove every rank (nThread x nGpus with no rank lines): one host.
  run.nodes = run.ranks == static_cast<int>(ranks.size()) ? static_cast<int>(hosts.size())
              : ranks.empty() && run.ranks_from == "nThread x nGpus" ? 1
                                                                    : 0;
  return run;
}

}  // namespace

std::vector<NcclTestsRun> parse_nccl_tests_runs(const std::string& text, const std::string& path,
                                                const NcclTestsOptions& options) {
  if (options.ranks < 0 || options.ranks > limits::kMaxRanks) {
    throw_input("--ranks " + std::to_string(options.ranks) + " is not a rank count (1 to " +
                    std::to_string(limits::kMaxRanks) + ")",
                {path, 0, "--ranks"});
  }
  // Split at each run header that follows result rows: within one run every header line comes
  // before the table, and only the trailer (`# Avg bus bandwidth`, `# Collective test
  // concluded`) after it.
  struct Segment {
    int first_line = 1;
    std::vector<std::string> lines;
  };
  std::vector<Segment> segments(1);
  bool rows_seen = false;
  std::istringstream in(std::string(strip_bom(text)));
  int lineno = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string line = strip_launcher_prefix(raw);
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') {
      const std::string body = line.substr(first);
      std::smatch m;
      const bool header = body.find("nccl-tests version") != std::string::npos ||
                          std::regex_search(body, m, starting_regex()) ||
                          std::regex_search(body, m, ngpus_regex()) ||
                          std::regex_match(body, m, rank_line_regex());
      if (header && rows_seen) {
        segments.push_back({lineno, {}});
        rows_seen = false;
      }
    } else if (first != std::string::npos && !is_nccl_log(line) && !is_elision(line)) {
      const auto cells = split_ws(line);
      if (looks_like_row(cells) && cells.size() >= 2) rows_seen = true;
    }
    segments.back().lines.push_back(raw);
  }
  std::vector<NcclTestsRun> runs;
  std::vector<std::string> columns;
  for (const Segment& seg : segments) {
    runs.push_back(parse_run(seg.lines, seg.first_line, path, options, columns));
  }
  return runs;
}

NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& path,
                              const NcclTestsOptions& options) {
  std::vector<NcclTestsRun> runs = parse_nccl_tests_runs(text, path, options);
  if (runs.size() > 1) {
    throw_input("holds " + std::to_string(runs.size()) + " nccl-tests runs; the second starts here",
                {path, runs[1].first_line, ""}, "import it with read_nccl_tests_runs");
  }
  return std::move(runs.front());
}

std::vector<NcclTestsRun> read_nccl_tests_runs(const std::string& path,
                                               const NcclTestsOptions& options) {
  return parse_nccl_tests_runs(
      read_input_file(path, "nccl-tests output", limits::kMaxNcclTestsBytes), path, options);
}

NcclTestsRun read_nccl_tests(const std::string& path, const NcclTestsOptions& options) {
  return parse_nccl_tests(
      read_input_file(path, "nccl-tests output", limits::kMaxNcclTestsBytes), path, options);
}

std::vector<NcclTestsFit> fit_nccl_tests(const std::vector<NcclTestsRun>& runs) {
  std::vector<std::pair<std::string, int>> order;
  std::map<std::pair<std::string, int>, std::vector<std::pair<double, double>>> samples;
  // The files each fit comes from, for its messages.
  std::map<std::pair<std::string, int>, std::vector<std::string>> files;
  // The known host counts of each (op, ranks), with a run of each: a profile's fit is per (op,
  // ranks), so runs of one rank count on different numbers of servers cannot share one.
  std::map<std::pair<std::string, int>, std::map<int, const NcclTestsRun*>> hosts;
  for (const NcclTestsRun& r : runs) {
    const auto key = std::make_pair(r.op, r.ranks);
    if (!samples.count(key)) order.push_back(key);
    files[key].push_back(r.path);
    if (r.nodes > 0) {
      auto& seen = hosts[key];
      seen.emplace(r.nodes, &r);
      if (seen.size() > 1) {
        const NcclTestsRun& other =
            seen.begin()->second == &r ? *seen.rbegin()->second : *seen.begin()->second;
        throw_input(r.op + " over " + std::to_string(r.ranks) + " ranks ran on " +
                        std::to_string(r.nodes) + " host(s) here and on " +
                        std::to_string(other.nodes) + " in " + other.path + ":" +
                        std::to_string(other.first_line) +
                        "; a profile holds one fit per collective and rank count",
                    {r.path, r.first_line, ""}, "import them into separate profiles");
      }
    }
    auto& s = samples[key];
    for (const NcclTestsRow& row : r.rows) {
      const double t = row.out_of_place_us > 0 ? row.out_of_place_us : row.in_place_us;
      if (t > 0) s.emplace_back(static_cast<double>(row.size_bytes), t);
    }
  }
  std::vector<NcclTestsFit> fits;
  for (const auto& key : order) {
    auto all = samples[key];
    std::sort(all.begin(), all.end());
    const std::string what = key.first + " over " + std::to_string(key.second) + " ranks";
    const std::vector<std::string>& from = files[key];
    const ErrorContext at{from.front(), 0, ""};
    const std::string others =
        from.size() > 1 ? "with " + std::to_string(from.size() - 1) + " other file(s) of " + what
                        : std::string();
    const double factor = nccl_tests_busbw_factor(key.first, key.second);
    if (!(factor > 0)) {
      throw_input("a 1-rank " + key.first + " moves no data; nothing to fit", at, others);
    }
    std::string file_list;
    for (const std::string& f : from) file_list += (file_list.empty() ? "" : ", ") + f;
    if (all.empty()) throw_input("no times (every time cell is N/A) for " + what, at, others);
    std::vector<std::pair<double, double>> fit;
    std::set<double> fit_sizes;
    for (const auto& s : all) {
      if (s.first >= kFitMinBytes) {
        fit.push_back(s);
        fit_sizes.insert(s.first);
      }
    }
    if (fit_sizes.size() < 2) {
      // One size cannot separate the start-up time from the bandwidth, and sizes below 1 MiB run
      // the LL/LL128 protocols on fewer channels, which the line does not describe (fitted on
      // them, the 8-GPU all-reduce of tests/calibrate/data reads 54 GB/s instead of 479). The
      // samples are kept, unfitted, so the measurement is not lost.
      std::set<double> sizes;
      for (const auto& s : all) sizes.insert(s.first);
      NcclTestsFit f;
      f.measured.op = key.first;
      f.measured.ranks = key.second;
      f.measured.samples = all;
      f.fitted = false;
      f.unfitted_reason =
          sizes.size() == 1
              ? "was measured at a single size (" +
                    std::to_string(static_cast<std::int64_t>(all.front().first)) + " B)"
              : "has " + std::to_string(fit_sizes.size()) + " size" +
                    (fit_sizes.size() == 1 ? "" : "s") + " of at least 1 MiB (" +
                    std::to_string(static_cast<std::int64_t>(kFitMinBytes)) + " B) among " +
                    std::to_string(sizes.size()) + " sizes";
      f.files = file_list;
      fits.push_back(std::move(f));
      continue;
    }
    // Relative least squares, min Σ((α + S·x − t)/t)²: every size counts alike, instead of the
    // largest message deciding α.
    const Eigen::Index n = static_cast<Eigen::Index>(fit.size());
    Eigen::MatrixXd a(n, 2);
    Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      a(i, 0) = 1.0 / fit[i].second;
      a(i, 1) = fit[i].first / fit[i].second;
    }
    Eigen::Vector2d ab = a.colPivHouseholderQr().solve(b);
    if (ab(0) < 0) {
      // A negative start-up time is noise at large sizes; refit the slope through the origin.
      ab(0) = 0;
      ab(1) = a.col(1).sum() / a.col(1).squaredNorm();
    }
    if (!(ab(1) > 0)) {
      throw_input("times of " + what + " do not grow with size; cannot fit", at, others);
    }
    NcclTestsFit f;
    f.measured.op = key.first;
    f.measured.ranks = key.second;
    f.measured.alpha_s = ab(0) * 1e-6;
    f.measured.busbw_Bps = factor / (ab(1) * 1e-6);
    if (!(f.measured.alpha_s < limits::kMaxLatency_s) ||
        !(f.measured.busbw_Bps >= limits::kMinBandwidth_Bps &&
          f.measured.busbw_Bps <= limits::kMaxBandwidth_Bps)) {
      throw_input("the fit of " + what + " gives a start-up time of " +
                      fmt_number(f.measured.alpha_s) + " s and a bus bandwidth of " +
                      fmt_number(f.measured.busbw_Bps) +
                      " B/s, outside the physical bounds (below 1 s; 1 MB/s to 1 PB/s)",
                  at, others.empty() ? "check the time columns" : others);
    }
    f.measured.samples = all;
    f.files = file_list;
    for (const auto& [size, t] : fit) {
      f.max_rel_error = std::max(f.max_rel_error, std::abs(ab(0) + size * ab(1) - t) / t);
    }
    fits.push_back(std::move(f));
  }
  return fits;
}

}  // namespace trainsim::calib
