// Import of nccl-tests output (all_reduce_perf, all_gather_perf, ...) and its α–β fit.
//
// nccl-tests prints one table per run: `#` header lines (version, the ranks and their GPUs, the
// column names), one row per message size with an out-of-place and an in-place column group, and
// a `# Avg bus bandwidth` trailer. The column set changed across versions (`error` became
// `#wrong`, `redop`/`root` appeared), and launchers prefix every line (`0: `, `[1,0]<stdout>:`),
// so the parser reads the column header instead of assuming fixed positions.
//
// Real outputs carry more than the table: rows of size 0, "..." where a README cut the table,
// launcher and NCCL log lines in between. Those lines are skipped and listed in the run
// (`skipped`), so the caller can say what was left out; anything else that is not a table row is
// still an error. The rank count is checked against the busbw/algbw ratio of the rows, which
// nccl-tests computes from it.
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
  // busbw/algbw of the out-of-place group (in-place when that is N/A); 0 when not printed.
  double algbw_GBps = 0, busbw_GBps = 0;
  // Half a unit of the last printed digit of those two cells (0.005 for "%.2f"), the rounding
  // the ratio check allows.
  double algbw_half_ulp = 0, busbw_half_ulp = 0;
  int line = 0;  // 1-based line in the file
};

/// Lines the parser leaves out, by kind; the caller reports them (describe_skipped).
enum class NcclTestsSkip {
  kSizeZero,   // a row of size 0 (nccl-tests -b 0): no time to fit
  kTruncated,  // "...", "[...]" or a row cut off with "...": part of the output was elided
  kNcclLog,    // NCCL INFO / WARN / TRACE lines (NCCL_DEBUG) between the table's lines
  kLauncher,   // any other line that is not the table's: mpirun, srun, MPI library messages
  kNoTime,     // a row whose every time cell is 0 or N/A: nothing was measured
  // Not left out: a row whose out-of-place time is 0 (not N/A), priced by its in-place time.
  kInPlaceTime,
};

struct NcclTestsSkippedLine {
  NcclTestsSkip kind;
  int line = 0;  // 1-based
};

/// Options of the import that the file may not carry.
struct NcclTestsOptions {
  /// The job's rank count, for files that do not state it (no `#  Rank` lines, no `nGpus`); it
  /// also replaces a stated count that the busbw/algbw ratio contradicts while agreeing with it
  /// (a device list cut short). 0: none given.
  int ranks = 0;
};

struct NcclTestsRun {
  std::string path;
  int first_line = 1;  // where the run starts in its file (a log may hold several runs)
  std::string op;  // all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | reduce |
                   // sendrecv
  int ranks = 0;
  int nodes = 0;  // distinct hosts in the rank lines; 0 when the file does not say
  std::string version_line;  // the `# nThread ... nGpus ...` line, without the launcher prefix
  std::string gpu_name;      // of rank 0, "" when the file has no rank lines
  int gpu_line = 0;          // the line gpu_name was read from
  std::string ranks_from;  // "`#  Rank` lines", "nThread x nGpus", "--ranks" or "busbw/algbw"
  std::vector<NcclTestsRow> rows;
  std::vector<NcclTestsSkippedLine> skipped;
  std::vector<std::string> notes;     // how the rank count was found, when not from the file
  std::vector<std::string> warnings;  // a value of the file replaced by an option
};

/// α–β fit of one (op, ranks) over the rows of one or more runs.
struct NcclTestsFit {
  MeasuredCollective measured;  // alpha_s = busbw_Bps = 0 when not fitted
  double max_rel_error = 0;     // over the fitted samples (those of at least kFitMinBytes)
  bool fitted = true;  // false: fewer than two sizes of at least kFitMinBytes, kept without a fit
  // Why it was not fitted, to follow "<op> over <n> ranks" in a note: "was measured at a single
  // size (1073741824 B)" or "has 1 size of at least 1 MiB (1048576 B) among 20 sizes"; "" when
  // fitted.
  std::string unfitted_reason;
  std::string files;            // the files of this (op, ranks), for messages
};

/// Smallest message the fit uses: below it NCCL switches to the LL/LL128 protocols and fewer
/// channels, which a single α–β line cannot follow; training collectives are far larger.
inline constexpr double kFitMinBytes = 1 << 20;

/// Parses nccl-tests output text; `path` names it in errors (kInput, with line and column). A
/// log may hold several runs one after another (a job script running all_reduce_perf, then
/// all_gather_perf, or the same test on 8 and then 16 GPUs): a run header (`# nccl-tests version`,
/// `# Collective test starting`, `# nThread ... nGpus`, a `#  Rank` line) after result rows starts
/// the next run, and each is returned as its own, with its own rank count, hosts and collective.
std::vector<NcclTestsRun> parse_nccl_tests_runs(const std::string& text, const std::string& path,
                                                const NcclTestsOptions& options = {});
/// As parse_nccl_tests_runs for text that holds one run; more than one is an input error naming
/// the line where the second starts.
NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& path,
                              const NcclTestsOptions& options = {});
/// Reads and parses a file.
std::vector<NcclTestsRun> read_nccl_tests_runs(const std::string& path,
                                               const NcclTestsOptions& options = {});
NcclTestsRun read_nccl_tests(const std::string& path, const NcclTestsOptions& options = {});

/// One line per kind of skipped line, e.g. "all_reduce_perf.txt: skipped 2 rows of size 0
/// (lines 16, 17)"; the first five line numbers of each kind are named. Rows priced by their
/// in-place time are listed the same way ("... 1 row whose out-of-place time is 0 uses its
/// in-place time (line 30)").
std::vector<std::string> describe_skipped(const NcclTestsRun& run);

/// The GPU preset whose built-in profile describes a CUDA device name as nccl-tests prints it
/// ("NVIDIA H100 80GB HBM3", "A100-SXM4-80GB"), "" when none does: the A100 40GB and 64GB, PCIe
/// and NVL cards, H800, GH200 have other memory, NVLink or clocks than the presets.
std::string gpu_preset_for_device_name(const std::string& name);

/// nccl-tests' bus-bandwidth factor: busbw = algbw · factor.
double nccl_tests_busbw_factor(const std::string& op, int ranks);

/// Least-squares fit of time = α + size · factor / busbw, one per (op, ranks) in `runs`, in the
/// order they first appear. Samples take the out-of-place time (in-place when that is N/A). Only
/// sizes of at least kFitMinBytes enter the fit; an (op, ranks) with fewer than two of them keeps
/// its samples unfitted (`fitted` false): one point cannot separate α from the bandwidth, and the
/// smaller sizes run other protocols than the line describes.
std::vector<NcclTestsFit> fit_nccl_tests(const std::vector<NcclTestsRun>& runs);

}  // namespace trainsim::calib
