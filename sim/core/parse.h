// Checked input at the boundary (docs/reliability.md): reading an input file and converting its
// numbers. Every parser of the project converts numbers through these functions, so every number
// anywhere is whole (no trailing text), finite, not subnormal, within its key's range, and a
// problem is a trainsim::Error naming the file, line and key (the ErrorContext given).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "sim/core/error.h"

namespace trainsim {

/// The text without a leading UTF-8 byte-order mark (EF BB BF), which every reader accepts.
std::string_view strip_bom(std::string_view text);

/// Reads a whole input file for a parser. Refuses, naming the path: an empty path, a missing or
/// unreadable file, a directory, anything that is not a regular file (FIFO, device, socket: they
/// could block or never end), and a file over `max_bytes`. A leading UTF-8 BOM is removed.
/// `what` names the file's role in messages ("scenario file", "fabric file"); `field` goes into
/// the error's field (e.g. "calibration.profile").
std::string read_input_file(const std::string& path, std::string_view what, std::size_t max_bytes,
                            const std::string& field = {});

enum class NumberProblem {
  kNone,
  kNotANumber,  // empty, trailing text, not a number at all
  kNotFinite,   // inf, nan, or beyond the range of a double (1e999)
  kSubnormal,   // nonzero but below DBL_MIN in magnitude (1e-320, 1e-400)
  kTooLarge,    // an integer beyond int64
};

struct NumberResult {
  double value = 0;
  NumberProblem problem = NumberProblem::kNone;
};
struct IntResult {
  std::int64_t value = 0;
  NumberProblem problem = NumberProblem::kNone;
};

/// The whole text as a double (strtod syntax), or the reason it is not an acceptable one.
NumberResult to_double(std::string_view text);
/// The whole text as a decimal int64 (an optional leading `-`), or the reason it is not one.
IntResult to_int64(std::string_view text);

/// Converts `text` or throws kInput naming `where`: "expected a number, got `x`", "`1e999` is not
/// a finite number", "`1e-320` is too small ...", "`x` is outside [min, max]".
double parse_double(std::string_view text, const ErrorContext& where,
                    double min = std::numeric_limits<double>::lowest(),
                    double max = std::numeric_limits<double>::max());
std::int64_t parse_int64(std::string_view text, const ErrorContext& where,
                         std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                         std::int64_t max = std::numeric_limits<std::int64_t>::max());
int parse_int(std::string_view text, const ErrorContext& where,
              int min = std::numeric_limits<int>::min(), int max = std::numeric_limits<int>::max());

/// Checks a number already converted (from JSON): finite, not subnormal, within [min, max].
/// `what` describes the range in the message, e.g. "a fraction of peak in [0.001, 1]".
double check_number(double v, const ErrorContext& where, double min, double max,
                    std::string_view what);

/// The final guard on outputs: a NaN or infinite value about to be printed is an internal error
/// (kRuntime, exit 4) naming the output field, never a printed "nan".
void require_finite(double v, std::string_view output_field);

/// A name for messages: at most `limit` characters of it, with the length when cut.
std::string clip_name(std::string_view name, std::size_t limit = 80);

}  // namespace trainsim
