// `trainsim compare SIM.json REAL.json`: how far a simulated iteration is from a measured one.
//
// Both files are result documents of `trainsim run --format json` or `trainsim execute` (the keys
// of reports/summary.h). The comparison reports, each as sim, real and the relative error
// (sim − real) / real:
//   - the iteration time;
//   - every op kind of "task_kinds" (total time per iteration on the critical rank, and counts);
//   - the same totals summed per category ("compute", "tp", "dp", "pp", "optimizer", ...);
//   - the breakdown: compute, exposed communication per dimension, bubble, optimizer, data loading
//     (differences in seconds; the exposed-communication total as well).
// Files that are not result documents, or whose model/parallel/training settings differ, are
// input errors (exit 2) naming the file and the field.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace trainsim::cli {

struct CompareArgs {
  std::string sim;              // simulated result (run --format json)
  std::string real;             // measured result (execute)
  std::string format = "text";  // text | json | markdown
  std::string output;           // file; empty or "-" = stdout
};

CLI::App* add_compare_command(CLI::App& app, CompareArgs& args);
int run_compare_command(const CompareArgs& args);

/// The comparison of two result documents given as text (`*_name` names them in messages), in
/// `format` (text | json | markdown): what run_compare_command prints. For the fuzz target.
std::string compare_texts(std::string_view sim_text, const std::string& sim_name,
                          std::string_view real_text, const std::string& real_name,
                          const std::string& format);

}  // namespace trainsim::cli
