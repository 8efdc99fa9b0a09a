// The single error channel for problems a user can fix.
//
// Library code never exits: it throws `trainsim::Error`, which carries what kind of problem it is
// (bad input, an infeasible configuration, a runtime failure), where it was found (file, line,
// field) and an optional hint. Only the CLI maps the kind to a process exit code (DESIGN.md §3):
// 2 input/usage, 3 infeasible configuration, 4 runtime/GPU failure.
#pragma once

#include <stdexcept>
#include <string>

namespace trainsim {

enum class ErrorKind {
  kInput = 2,       // malformed or unknown input: YAML, CSV, profile, CLI value
  kInfeasible = 3,  // input is well formed but the configuration cannot run (divisibility, memory)
  kRuntime = 4,     // failure while running (GPU, NCCL, I/O)
};

struct ErrorContext {
  std::string file;   // source file the value came from ("" when not from a file, "--set" for CLI)
  int line = 0;       // 1-based line, 0 if unknown
  std::string field;  // dotted key or column name ("parallel.tp"), "" if not about one field
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, ErrorContext where = {}, std::string hint = {});

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  const ErrorContext& where() const { return where_; }
  const std::string& hint() const { return hint_; }
  int exit_code() const { return static_cast<int>(kind_); }

 private:
  static std::string format(const std::string& message, const ErrorContext& where,
                            const std::string& hint);
  ErrorKind kind_;
  std::string message_;
  ErrorContext where_;
  std::string hint_;
};

/// Shorthands used at validation boundaries.
[[noreturn]] void throw_input(std::string message, ErrorContext where = {}, std::string hint = {});
[[noreturn]] void throw_infeasible(std::string message, ErrorContext where = {},
                                   std::string hint = {});

}  // namespace trainsim
