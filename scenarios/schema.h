// The scenario schema: every key a scenario, `--set` or a sweep may name, declared once.
//
// Each key has a dotted path (`parallel.pp`), a type, a unit, a default, a description, the values
// an enum accepts and aliases: the names other tools use for the same setting (Megatron-LM flags,
// Hugging Face config fields). Aliases are never accepted as keys, because two names for one
// setting would let a scenario set it twice; they only make "did you mean" point to the right key.
// The schema is built once on first use and is read-only afterwards (safe to share across threads).
#pragma once

#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.h"

namespace trainsim::scen {

enum class KeyType { kInt, kFloat, kBool, kString, kEnum, kSize };

// The `{}` initializers let the schema table (schema.cpp) use designated initializers that leave
// fields out without tripping -Wmissing-field-initializers.
struct KeyDef {
  std::string path{};  // dotted key, e.g. "parallel.pp"
  KeyType type = KeyType::kString;
  std::string unit{};           // "" for plain counts and switches
  std::string default_value{};  // text, as a user would write it
  std::string description{};
  // kEnum: the accepted values. kInt: words accepted besides numbers (`auto` for parallel.dp).
  std::vector<std::string> choices{};
  std::vector<std::string> aliases{};  // other tools' names, used only for suggestions
  // Numeric keys: the range a user may give (a default may sit outside it to mean "unset").
  double min_value = std::numeric_limits<double>::lowest();
  double max_value = std::numeric_limits<double>::max();
  // The bound itself is refused (a rate, a timer or a fraction that must be above 0).
  bool min_exclusive = false;
  bool max_exclusive = false;
};

/// All keys, grouped by section in a stable order.
const std::vector<KeyDef>& schema();

/// The key with this exact path, or nullptr.
const KeyDef* find_key(std::string_view path);

/// Keys added after full configurations were first recorded (the `config` of `run` and `execute`
/// output, which lists every key), each with the value that reproduces what a record made before
/// the key existed ran: a record whose `config` lacks the key is read with it.
const std::map<std::string, std::string>& values_before_key_existed();

/// True for a prefix that groups keys ("parallel", "cluster.fabric"), not for a key itself.
bool is_section(std::string_view prefix);

/// "did you mean `parallel.pp`?" for a misspelt or foreign key name (compared with full paths,
/// leaf names and aliases), or "" when nothing is close.
std::string suggest_key(std::string_view wrong);

/// "did you mean `x`?" for the candidate closest to `wrong`, or "" when none is close.
std::string did_you_mean(std::string_view wrong, const std::vector<std::string>& candidates);

/// Checks `text` against the key's type, choices and range and returns its canonical spelling
/// (`True` -> "true", `08` -> "8", `64KiB` -> "64K"). Throws Error (kInput) at `where`, naming the
/// expected type.
std::string normalize_value(const KeyDef& key, std::string_view text, const ErrorContext& where);

/// A human-readable table of keys: "" lists all keys, a section lists its keys, a key prints its
/// full entry. Throws Error (kInput) with a suggestion for anything else.
std::string explain(std::string_view key_or_prefix);

const char* to_string(KeyType type);

/// One key of a `jobs:` entry (scenarios/jobs.h), which is not a scenario key: `explain jobs`
/// lists them (text and JSON), `explain jobs.KEY` one. `default_value` "" when there is none.
struct JobEntryKey {
  const char* name;
  const char* type;
  const char* default_value;
  const char* description;
};
std::span<const JobEntryKey> job_entry_keys();

}  // namespace trainsim::scen
