// Where a subcommand's result goes: stdout, or a file named by -o/--output ("-" is stdout).
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
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
  errno = 0;
  std::ofstream out(path);
  if (!out) {
    throw Error(ErrorKind::kRuntime,
                std::string("cannot write the output file") +
                    (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()),
                {path, 0, ""});
  }
  out << text;
  out.flush();
  if (!out) {
    throw Error(ErrorKind::kRuntime,
                std::string("write failed") +
                    (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()),
                {path, 0, ""});
  }
}

/// The check of an output FILE option (-o, --out, --trace), when the command line is read: an
/// empty name, a folder, or a file in a folder that does not exist is refused before any work
/// (an empty -o wrote to stdout and exit 0; a missing folder failed after the run, exit 4).
/// "-" (stdout) passes.
inline CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "an empty file name (leave the option out to write to stdout)";
        if (path == "-") return {};
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec)) {
          return "`" + path + "` is a folder: give the name of a file to write";
        }
        const std::filesystem::path parent = std::filesystem::path(path).parent_path();
        if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
          return "`" + parent.string() + "`, the folder of `" + path + "`, does not exist";
        }
        return {};
      },
      "FILE");
}

/// The check of an input FILE option when the command line is read: only an empty name (which
/// would read as "not given"). Whether the file exists and is a regular file is left to
/// read_input_file (sim/core/parse.h), which says so in trainsim's words, naming the file and
/// what it was to be ("PATH: is a directory, not an execute record").
inline CLI::Validator input_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        return path.empty() ? "an empty file name" : std::string();
      },
      "FILE");
}

/// The check of a --report FOLDER option: an existing path that is not a folder is refused when
/// the command line is read, before any simulation (a run printed its whole result, then failed
/// to create the folder, exit 4).
inline CLI::Validator report_folder(std::string option = "--report",
                                    std::string writes = "it writes index.html and the data files into it") {
  return CLI::Validator(
      [option, writes](std::string& path) -> std::string {
        if (path.empty()) return "an empty folder name";
        std::error_code ec;
        // The nearest part of the path that exists must be a folder (`a.json/report` cannot be
        // created under a file).
        for (std::filesystem::path p = path; !p.empty(); p = p.parent_path()) {
          if (std::filesystem::exists(p, ec)) {
            if (!std::filesystem::is_directory(p, ec) && p != std::filesystem::path(path)) {
              return "`" + p.string() + "` is a file: " + option + " cannot create `" + path +
                     "` under it";
            }
            break;
          }
          if (p == p.parent_path()) break;
        }
        if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
          return "`" + path + "` is a file: " + option + " takes a folder (" + writes + ")";
        }
        return {};
      },
      "FOLDER");
}

}  // namespace trainsim::cli
