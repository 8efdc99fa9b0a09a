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

NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& path) {
  static const std::regex kRankLine(
      R"(^#\s+Rank\s+(\d+)\s.*\son\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*?)\s*$)");
  static const std::regex kNGpus(R"(\bnGpus\s+(\d+))");
  static const std::regex kNThread(R"(\bnThread\s+(\d+))");
  static const std::regex kStarting(R"(Collective test starting:\s*(\S+))");
  NcclTestsRun run;
  run.path = path;
  std::vector<std::string> columns;
  std::set<int> ranks;
  std::set<std::string> hosts;
  int version_ranks = 0;
  std::istringstream in(std::string(strip_bom(text)));
  int lineno = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
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
        if (ranks.empty() || rank == 0) run.gpu_name = m[3].str();
        ranks.insert(rank);
        hosts.insert(m[2].str());
      } else {
        const auto cols = split_ws(body.substr(1));
        if (!cols.empty() && cols[0] == "size") columns = cols;
      }
      continue;
    }
    // NCCL_DEBUG=INFO output interleaves with the table; it is not part of it.
    if (line.find("NCCL INFO") != std::string::npos ||
        line.find("NCCL WARN") != std::string::npos) {
      continue;
    }
    const auto cells = split_ws(line);
    if (!std::isdigit(static_cast<unsigned char>(line[first]))) {
      throw_input("unexpected line in nccl-tests output: `" + line.substr(first, 60) + "`",
                  {path, lineno, "column 1"});
    }
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
                       (col < columns.size() ? " (" + columns[col] + ")" : "")});
    }
    NcclTestsRow row;
    row.line = lineno;
    int time_groups = 0;
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
        (time_groups++ == 0 ? row.out_of_place_us : row.in_place_us) = t;
      } else if (!is_na(cell)) {
        // algbw, busbw, #wrong / error: checked to be numbers, derived from the time.
        parse_double(cell, path, lineno, c, name);
      }
    }
    if (row.size_bytes <= 0) bad_cell(path, lineno, 0, columns[0], cells[0], "a size > 0");
    run.rows.push_back(row);
  }
  if (run.rows.empty()) throw_input("no result rows (is this nccl-tests output?)", {path, 0, ""});
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
  run.ranks = !ranks.empty() ? static_cast<int>(ranks.size()) : version_ranks;
  if (run.ranks < 1) {
    throw_input("no rank count: neither `#  Rank` lines nor `nGpus` in the header", {path, 0, ""});
  }
  run.nodes = static_cast<int>(hosts.size());
  return run;
}

NcclTestsRun read_nccl_tests(const std::string& path) {
  return parse_nccl_tests(
      read_input_file(path, "nccl-tests output", limits::kMaxNcclTestsBytes), path);
}

std::vector<NcclTestsFit> fit_nccl_tests(const std::vector<NcclTestsRun>& runs) {
  std::vector<std::pair<std::string, int>> order;
  std::map<std::pair<std::string, int>, std::vector<std::pair<double, double>>> samples;
  // The files each fit comes from, for its messages.
  std::map<std::pair<std::string, int>, std::vector<std::string>> files;
  for (const NcclTestsRun& r : runs) {
    const auto key = std::make_pair(r.op, r.ranks);
    if (!samples.count(key)) order.push_back(key);
    files[key].push_back(r.path);
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
    std::vector<std::pair<double, double>> fit;
    for (const auto& s : all) {
      if (s.first >= kFitMinBytes) fit.push_back(s);
    }
    if (fit.size() < 2) fit = all;
    if (fit.size() < 2 || fit.front().first == fit.back().first) {
      throw_input("need times at two or more sizes to fit " + what, at, others);
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
    for (const auto& [size, t] : fit) {
      f.max_rel_error = std::max(f.max_rel_error, std::abs(ab(0) + size * ab(1) - t) / t);
    }
    fits.push_back(std::move(f));
  }
  return fits;
}

}  // namespace trainsim::calib
