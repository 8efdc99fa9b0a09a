// Where a subcommand's result goes: stdout, or a file named by -o/--output ("-" is stdout).
#pragma once

#include <fstream>
#include <iostream>
#include <string>

#include "sim/core/error.h"

namespace trainsim::cli {

inline void write_output(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) throw Error(ErrorKind::kRuntime, "write failed", {"stdout", 0, ""});
    return;
  }
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kRuntime, "cannot write the output file", {path, 0, ""});
  out << text;
  out.flush();
  if (!out) throw Error(ErrorKind::kRuntime, "write failed", {path, 0, ""});
}

}  // namespace trainsim::cli
