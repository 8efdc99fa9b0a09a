// Published training runs (the CSV format of shared/validation/README.md) and how the model's
// predictions compare with them: the engine of `trainsim validate`.
//
// Blank cells are filled by stated rules (each row records what it assumed), and published figures
// are compared like with like: a TFLOP/s figure that counts the recompute forward pass (Megatron-LM
// SC21, Eq. 3) is compared with the predicted hardware TFLOP/s, and the published iteration time and
// MFU implied by it are derived with the model's own FLOP accounting (and marked as derived).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "sim/exec/result.h"

namespace trainsim::scen {

struct RunFigures {
  std::optional<double> iter_s, tokens_s, mfu, tflops_gpu, hfu;
};

struct ValidationRow {
  std::string id;
  std::string source;
  std::string gpu;                             // the row's GPU preset
  int line = 0;                                // line in the CSV file
  std::map<std::string, std::string> assumed;  // filled-in value -> rule that chose it
  RunFigures predicted;
  exec::Breakdown predicted_breakdown;         // where the predicted iteration time goes
  // The scenario keys the row was simulated with (its cells, its `set`, the command's --set and
  // what the searches chose), as `key=value`: `trainsim run --set ...` with them (and the
  // fidelity) runs the same configuration.
  std::vector<std::string> scenario_set;
  RunFigures published;                        // as published or derived (see `derived`)
  std::vector<std::string> derived;            // which published figures were derived, and how
  // Published figures that disagree with each other under the row's FLOP convention (a time,
  // iter_s or tokens_s, and a FLOP rate, tflops_gpu or mfu, that imply more than 3 % other
  // FLOPs per iteration than the convention counts), with the convention they fit.
  std::vector<std::string> warnings;
  bool tflops_counts_recompute = false;
  std::string flops_convention;                // what the row's published FLOP figures count
  // Errors: MFU in points (predicted − published), iteration time and TFLOP/s in percent.
  std::optional<double> mfu_err_pts, iter_err_pct, tflops_err_pct;
  std::string error_message;                   // non-empty when the row could not be simulated
  std::map<std::string, std::string> cells;    // every cell of the row as written (trimmed)
};

struct ValidationSummary {
  int rows = 0, simulated = 0;
  int mfu_rows = 0, iter_rows = 0;
  double median_abs_mfu_err_pts = 0;
  double max_abs_mfu_err_pts = 0;
  double iter_time_mape = 0;  // percent
};

/// Changes to every row before it is simulated: scenario keys (as `--set`) and profile constants
/// ("<gpu>:<field>", e.g. "h100-sxm:gemm_peak_efficiency"), used by fitting and cross-validation.
struct ValidationOptions {
  std::map<std::string, std::string> set;
  std::map<std::string, double> profile_overrides;
};

/// Sets one named compute/collective constant of a profile; false for an unknown field.
bool apply_profile_override(calib::Profile& p, const std::string& field, double value);

/// Reads the CSV; malformed files (missing columns, bad numbers) throw trainsim::Error naming the
/// file, line and column. Rows that parse but cannot be simulated carry `error_message`.
/// `fidelity`: analytic, schedule or flow (the recompute choice is made at analytic fidelity).
std::vector<ValidationRow> validate_runs(const std::string& csv_path,
                                         const std::string& fidelity = "analytic",
                                         const ValidationOptions& options = {});
/// Same, from CSV text (`name` is used in messages).
std::vector<ValidationRow> validate_runs_text(const std::string& csv_text, const std::string& name,
                                              const std::string& fidelity = "analytic",
                                              const ValidationOptions& options = {});

ValidationSummary summarize(const std::vector<ValidationRow>& rows);

/// The CSV columns, in order; and the optional ones (`framework`, `flops_convention`).
const std::vector<std::string>& validation_columns();

/// `validate --group-by`: rows grouped by the cells of some columns, a numeric column optionally
/// cut into ranges (`seq:2048:8192`: up to 2,048, above it up to 8,192, above 8,192), and each
/// group's signed MFU error (predicted − published, points) and iteration-time MAPE.
struct GroupColumn {
  std::string column;
  std::vector<double> cuts;  // ascending; empty: each distinct cell is its own group
};
/// Parses "COL[:CUT...][,COL...]"; a column that is not one of the format's, or a cut that is not
/// an ascending finite number, is an input error naming `--group-by`.
std::vector<GroupColumn> parse_group_by(const std::string& spec);
struct ValidationGroup {
  std::vector<std::string> key;  // one label per group column, in the spec's order
  int rows = 0, mfu_rows = 0, iter_rows = 0;
  double median_mfu_err_pts = 0, min_mfu_err_pts = 0, max_mfu_err_pts = 0;
  double median_abs_mfu_err_pts = 0;
  double iter_time_mape = 0;
};
/// The groups in order of their labels (ranges in ascending order, then cells as text). A cut
/// column whose cell is not a number is an input error naming the row.
std::vector<ValidationGroup> group_rows(const std::vector<ValidationRow>& rows,
                                        const std::vector<GroupColumn>& by);
const std::vector<std::string>& optional_validation_columns();

}  // namespace trainsim::scen
