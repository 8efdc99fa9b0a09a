#include "sim/core/parse.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "sim/core/limits.h"

namespace trainsim {
namespace {

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Shortest form that reads back the same (the bounds are short decimal numbers).
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[64];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

std::string range_text(double min, double max) {
  const bool has_min = min != std::numeric_limits<double>::lowest();
  const bool has_max = max != std::numeric_limits<double>::max();
  if (has_min && has_max) return "[" + number_text(min) + ", " + number_text(max) + "]";
  if (has_min) return ">= " + number_text(min);
  if (has_max) return "<= " + number_text(max);
  return "a finite number";
}

[[noreturn]] void throw_problem(NumberProblem p, std::string_view text, const ErrorContext& where,
                                const char* expected) {
  const std::string shown = clip_name(text);
  switch (p) {
    case NumberProblem::kNotFinite:
      throw_input("`" + shown + "` is not a finite number", where,
                  std::string("expected ") + expected);
    case NumberProblem::kSubnormal:
      throw_input("`" + shown + "` is too small to represent (a nonzero magnitude below 2.2e-308)",
                  where, "write 0 or a larger value");
    case NumberProblem::kTooLarge:
      throw_input("`" + shown + "` is too large for a 64-bit integer", where,
                  std::string("expected ") + expected);
    case NumberProblem::kNotANumber:
    case NumberProblem::kNone:
      break;
  }
  throw_input(std::string("expected ") + expected + ", got `" + shown + "`", where);
}

}  // namespace

std::string_view strip_bom(std::string_view text) {
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
      static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF) {
    text.remove_prefix(3);
  }
  return text;
}

std::string read_input_file(const std::string& path, std::string_view what, std::size_t max_bytes,
                            const std::string& field) {
  const std::string role(what);
  if (path.empty()) throw_input("empty file name given for the " + role, {"", 0, field});
  const ErrorContext at{path, 0, field};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw_input("cannot read the " + role + ": " + (errno == ENOENT ? "no such file" : "cannot stat"),
                at);
  }
  if (S_ISDIR(st.st_mode)) {
    const bool vowel =
        !role.empty() && std::string_view("aeiou").find(role[0]) != std::string_view::npos;
    throw_input("is a directory, not " + std::string(vowel ? "an " : "a ") + role, at,
                "give the path of a file");
  }
  if (!S_ISREG(st.st_mode)) {
    throw_input(std::string("is not a regular file (") +
                    (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device") +
                    "); a " + role + " must be a plain file",
                at);
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw_input("is " + std::to_string(st.st_size) + " bytes; a " + role + " is at most " +
                    std::to_string(max_bytes) + " bytes",
                at, "see docs/reliability.md");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input("cannot read the " + role, at);
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  // A file that grew since stat() is read up to the limit and refused beyond it.
  char extra[4096];
  while (in.read(extra, sizeof extra) || in.gcount() > 0) {
    text.append(extra, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      throw_input("is over " + std::to_string(max_bytes) + " bytes, the limit of a " + role, at);
    }
  }
  // Every input is text: a NUL byte means a binary file (or UTF-16, which spreads them over
  // ASCII), which the parsers would otherwise report as a nonsense header, key or column with
  // the binary bytes echoed to the terminal.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    const bool utf16 = text.size() >= 2 && ((static_cast<unsigned char>(text[0]) == 0xFF &&
                                             static_cast<unsigned char>(text[1]) == 0xFE) ||
                                            (static_cast<unsigned char>(text[0]) == 0xFE &&
                                             static_cast<unsigned char>(text[1]) == 0xFF));
    throw_input("is not a text file (a NUL byte at byte " + std::to_string(nul + 1) + "); a " +
                    role + " is text",
                at, utf16 ? "it looks like UTF-16: save it as UTF-8" : "check the path");
  }
  const std::string_view body = strip_bom(text);
  if (body.size() != text.size()) text.erase(0, 3);
  return text;
}

NumberResult to_double(std::string_view text) {
  if (text.empty() || text.size() > 1000) return {0, NumberProblem::kNotANumber};
  const std::string s(text);
  // strtod skips leading white space; a number here is the whole text.
  if (std::isspace(static_cast<unsigned char>(s.front()))) return {0, NumberProblem::kNotANumber};
  // strtod also reads C's hexadecimal floats (0x10 = 16, 0x1p4); a scenario's numbers are
  // decimal, so `0x10` is a typo to refuse, not sixteen.
  if (s.find_first_of("xXpP") != std::string::npos) return {0, NumberProblem::kNotANumber};
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return {0, NumberProblem::kNotANumber};
  if (!std::isfinite(v)) return {v, NumberProblem::kNotFinite};
  if (errno == ERANGE) {
    // Overflow gives HUGE_VAL (not finite, caught above); underflow a subnormal or 0.
    return {v, NumberProblem::kSubnormal};
  }
  if (v != 0 && std::fabs(v) < limits::kMinMagnitude) return {v, NumberProblem::kSubnormal};
  return {v, NumberProblem::kNone};
}

IntResult to_int64(std::string_view text) {
  if (text.empty()) return {0, NumberProblem::kNotANumber};
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Out of range only if the rest is digits: "99999999999999999999x" is not a number at all.
    for (const char* p = ptr; p != text.data() + text.size(); ++p) {
      if (*p < '0' || *p > '9') return {0, NumberProblem::kNotANumber};
    }
    return {0, NumberProblem::kTooLarge};
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) return {0, NumberProblem::kNotANumber};
  return {v, NumberProblem::kNone};
}

double parse_double(std::string_view text, const ErrorContext& where, double min, double max) {
  const NumberResult r = to_double(text);
  if (r.problem != NumberProblem::kNone) throw_problem(r.problem, text, where, "a number");
  if (r.value < min || r.value > max) {
    throw_input("`" + clip_name(text) + "` is outside the range " + range_text(min, max), where);
  }
  return r.value;
}

std::int64_t parse_int64(std::string_view text, const ErrorContext& where, std::int64_t min,
                         std::int64_t max) {
  const IntResult r = to_int64(text);
  if (r.problem != NumberProblem::kNone) throw_problem(r.problem, text, where, "an integer");
  if (r.value < min || r.value > max) {
    std::string range;
    if (min != std::numeric_limits<std::int64_t>::min()) range += ">= " + std::to_string(min);
    if (max != std::numeric_limits<std::int64_t>::max()) {
      range += (range.empty() ? "<= " : " and <= ") + std::to_string(max);
    }
    throw_input("`" + clip_name(text) + "` is outside the range " + range, where);
  }
  return r.value;
}

int parse_int(std::string_view text, const ErrorContext& where, int min, int max) {
  return static_cast<int>(parse_int64(text, where, min, max));
}

double check_number(double v, const ErrorContext& where, double min, double max,
                    std::string_view what) {
  if (!std::isfinite(v)) throw_input("not a finite number", where, "expected " + std::string(what));
  if (v != 0 && std::fabs(v) < limits::kMinMagnitude) {
    throw_input(number_text(v) + " is too small to represent (a nonzero magnitude below 2.2e-308)",
                where, "write 0 or a larger value");
  }
  if (v < min || v > max) {
    throw_input("value " + number_text(v) + " is out of range", where,
                "expected " + std::string(what));
  }
  return v;
}

void require_finite(double v, std::string_view output_field) {
  if (std::isfinite(v)) return;
  throw Error(ErrorKind::kRuntime,
              "internal error: output `" + std::string(output_field) + "` is " +
                  (std::isnan(v) ? "NaN" : "infinite") + "; nothing was printed",
              {}, "please report this with the command line and input files");
}

std::string clip_name(std::string_view name, std::size_t limit) {
  if (name.size() <= limit) return std::string(name);
  return std::string(name.substr(0, limit)) + "... (" + std::to_string(name.size()) +
         " characters)";
}

}  // namespace trainsim
