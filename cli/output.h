// Where a subcommand's result goes: stdout, or a file named by -o/--output ("-" is stdout).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
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

/// The check of a --report FOLDER option: an existing path that is not a folder is refused when
/// the command line is read, before any simulation (a run printed its whole result, then failed
/// to create the folder, exit 4).
inline CLI::Validator report_folder() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
          return "`" + path + "` is a file: --report takes a folder (it writes index.html and " +
                 "the data files into it)";
        }
        return {};
      },
      "FOLDER");
}

}  // namespace trainsim::cli
