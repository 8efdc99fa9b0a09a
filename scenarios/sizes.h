// Byte and count sizes written the way users type them: `8`, `64K`, `1M`, `8G`.
//
// Suffixes are powers of two (K = 2^10, M = 2^20, G = 2^30, T = 2^40), as DESIGN.md §5 fixes for
// every command; a trailing `B` or `iB` is accepted (`64KiB`, `1MB` are both 2^n multiples).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/error.h"

namespace trainsim::scen {

/// Parses a non-negative size. Throws `Error` (kInput) at `where` for anything else: an empty
/// string, a fraction, a negative number, an unknown suffix or a value beyond int64.
std::int64_t parse_size(std::string_view text, const ErrorContext& where);

/// The shortest exact spelling: 65536 -> "64K", 1000 -> "1000", 0 -> "0".
std::string format_size(std::int64_t value);

}  // namespace trainsim::scen
