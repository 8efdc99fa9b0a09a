// Shared by the libFuzzer targets (docs/reliability.md). A target feeds one parser arbitrary
// bytes. An input problem must surface as trainsim::Error (the CLI turns it into exit 2 or 3);
// anything else escaping the parser (std::out_of_range from a stoi, a JSON library exception,
// bad_alloc) is a defect, and libFuzzer reports it as a crash with the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

#include "sim/core/error.h"

namespace trainsim::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits "A<marker>B" into A and B (B empty when the marker is absent).
inline std::pair<std::string_view, std::string_view> split_at(std::string_view text,
                                                              std::string_view marker) {
  const std::size_t at = text.find(marker);
  if (at == std::string_view::npos) return {text, {}};
  return {text.substr(0, at), text.substr(at + marker.size())};
}

// A trainsim::Error must carry a message and a valid kind; its text is formatted (what()).
inline void check_error(const Error& e) {
  const int code = e.exit_code();
  if ((code != 2 && code != 3 && code != 4) || std::string(e.what()).empty()) {
    std::fprintf(stderr, "malformed trainsim::Error (exit %d): %s\n", code, e.what());
    std::abort();
  }
  if (code == 4) {
    // A parser never reports a runtime failure for an input problem.
    std::fprintf(stderr, "input reported as a runtime error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace trainsim::fuzz
