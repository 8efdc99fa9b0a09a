#include "scenarios/sizes.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <limits>
#include <utility>

namespace trainsim::scen {
namespace {

constexpr std::array<std::pair<char, int>, 4> kSuffixes = {
    {{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}}};

[[noreturn]] void bad_size(std::string_view text, const ErrorContext& where) {
  throw_input(fmt::format("`{}` is not a size", text), where,
              "write a whole number with an optional power-of-two suffix: 8, 64K, 1M, 8G, 1T");
}

}  // namespace

std::int64_t parse_size(std::string_view text, const ErrorContext& where) {
  std::size_t i = 0;
  std::int64_t number = 0;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const int digit = text[i] - '0';
    if (number > (kMax - digit) / 10) bad_size(text, where);
    number = number * 10 + digit;
    ++i;
  }
  if (i == 0) bad_size(text, where);

  std::string_view rest = text.substr(i);
  int shift = 0;
  if (!rest.empty()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(rest.front())));
    for (const auto& [letter, bits] : kSuffixes) {
      if (unit == letter) shift = bits;
    }
    if (shift == 0) bad_size(text, where);
    rest.remove_prefix(1);
    if (rest == "iB" || rest == "ib") rest.remove_prefix(2);
    if (rest == "B" || rest == "b") rest.remove_prefix(1);
    if (!rest.empty()) bad_size(text, where);
  }
  if (number > (kMax >> shift)) bad_size(text, where);
  return number << shift;
}

std::string format_size(std::int64_t value) {
  if (value != 0) {
    for (auto it = kSuffixes.rbegin(); it != kSuffixes.rend(); ++it) {
      const std::int64_t unit = std::int64_t{1} << it->second;
      if (value % unit == 0) return std::to_string(value / unit) + it->first;
    }
  }
  return std::to_string(value);
}

}  // namespace trainsim::scen
