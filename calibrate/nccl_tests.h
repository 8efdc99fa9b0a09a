// Import of nccl-tests output (all_reduce_perf, all_gather_perf, ...) and its α–β fit.
//
// nccl-tests prints one table per run: `#` header lines (version, the ranks and their GPUs, the
// column names), one row per message size with an out-of-place and an in-place column group, and
// a `# Avg bus bandwidth` trailer. The column set changed across versions (`error` became
// `#wrong`, `redop`/`root` appeared), and launchers prefix every line (`0: `, `[1,0]<stdout>:`),
// so the parser reads the column header instead of assuming fixed positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/profile.h"

namespace trainsim::calib {

/// One size row. A time of 0 means the cell was `N/A` or the column group is absent.
struct NcclTestsRow {
  std::int64_t size_bytes = 0;
  std::int64_t count = 0;
  std::string type;
  std::string redop;  // "" when the file has no redop column
  int root = -1;      // -1 when the file has no root column or the collective has no root
  double out_of_place_us = 0;
  double in_place_us = 0;
  int line = 0;  // 1-based line in the file
};

struct NcclTestsRun {
  std::string path;
  std::string op;  // all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | reduce |
                   // sendrecv
  int ranks = 0;
  int nodes = 0;  // distinct hosts in the rank lines; 0 when the file does not say
  std::string version_line;  // the `# nThread ... nGpus ...` line, without the launcher prefix
  std::string gpu_name;      // of rank 0, "" when the file has no rank lines
  std::vector<NcclTestsRow> rows;
};

/// α–β fit of one (op, ranks) over the rows of one or more runs.
struct NcclTestsFit {
  MeasuredCollective measured;
  double max_rel_error = 0;  // over the fitted samples (those of at least kFitMinBytes)
};

/// Smallest message the fit uses: below it NCCL switches to the LL/LL128 protocols and fewer
/// channels, which a single α–β line cannot follow; training collectives are far larger.
inline constexpr double kFitMinBytes = 1 << 20;

/// Parses nccl-tests output text; `path` names it in errors (kInput, with line and column).
NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& path);
/// Reads and parses a file.
NcclTestsRun read_nccl_tests(const std::string& path);

/// nccl-tests' bus-bandwidth factor: busbw = algbw · factor.
double nccl_tests_busbw_factor(const std::string& op, int ranks);

/// Least-squares fit of time = α + size · factor / busbw, one per (op, ranks) in `runs`, in the
/// order they first appear. Samples take the out-of-place time (in-place when that is N/A).
std::vector<NcclTestsFit> fit_nccl_tests(const std::vector<NcclTestsRun>& runs);

}  // namespace trainsim::calib
