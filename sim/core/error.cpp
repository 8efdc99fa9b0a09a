#include "sim/core/error.h"

namespace trainsim {

Error::Error(ErrorKind kind, std::string message, ErrorContext where, std::string hint)
    : std::runtime_error(format(message, where, hint)),
      kind_(kind),
      message_(std::move(message)),
      where_(std::move(where)),
      hint_(std::move(hint)) {}

std::string Error::format(const std::string& message, const ErrorContext& where,
                          const std::string& hint) {
  std::string out;
  if (!where.file.empty()) {
    out += where.file;
    if (where.line > 0) {
      out += ':';
      out += std::to_string(where.line);
    }
    out += ": ";
  }
  if (!where.field.empty()) {
    out += '`';
    out += where.field;
    out += "`: ";
  }
  out += message;
  if (!hint.empty()) {
    out += " (";
    out += hint;
    out += ')';
  }
  return out;
}

void throw_input(std::string message, ErrorContext where, std::string hint) {
  throw Error(ErrorKind::kInput, std::move(message), std::move(where), std::move(hint));
}

void throw_infeasible(std::string message, ErrorContext where, std::string hint) {
  throw Error(ErrorKind::kInfeasible, std::move(message), std::move(where), std::move(hint));
}

}  // namespace trainsim
