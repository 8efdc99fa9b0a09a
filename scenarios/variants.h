// Fabric and configuration what-ifs side by side (`trainsim run SCENARIO --compare KEY=VALUES`):
// the same scenario run once per value of one or more keys (every combination, the first key
// slowest), each variant at the scenario's fidelity, so that one table answers "what does this
// fabric change do to the job?" (oversubscription 1:1 against 2:1, 1 against 16 QPs, a fabric
// file, failed links).
//
// Values are parsed and checked exactly as `--set` and `sweep --vary` check them (ranges such as
// 1:4 included); errors name `--compare` and the key. Variants run one after the other (a flow
// run of 12,288 GPUs takes seconds and up to a GiB).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/profile.h"
#include "scenarios/jobs.h"
#include "scenarios/scenario.h"
#include "sim/exec/result.h"

namespace trainsim::scen {

/// One combination of the compared values, and its run.
struct Variant {
  std::vector<std::pair<std::string, std::string>> config;  // (key, value) in --compare order
  std::string label;  // "oversubscription=2 qps_per_connection=16" (leaf names)
  Scenario scenario;
  exec::Result result;
  calib::Profile profile;
  // A scenario with `jobs:`: every job together and alone (scenarios/jobs.h); `result` is then the
  // first job's shared run with the fabric's network statistics.
  std::shared_ptr<const JobsOutcome> jobs;
};

struct VariantPlan {
  std::vector<std::string> keys;
  std::vector<std::vector<std::pair<std::string, std::string>>> configs;
};

/// Parses the --compare arguments (`KEY=V1,V2,...`) into the combinations to run. Throws
/// Error(kInput) located at `--compare` and the key for an unknown key, a bad value, a key given
/// twice, or more than `max_variants` combinations.
VariantPlan plan_variants(const std::vector<std::string>& compare, std::size_t max_variants = 64);

/// Loads the scenario (`path`, or the YAML text `default_yaml` named `default_name` when `path` is
/// empty) with `sets` and then each variant's values, calls `check` on it (e.g. the flow work
/// limit), runs it, and calls `done(i, n)` after each. Errors of one variant are thrown with
/// its label prefixed to the message.
std::vector<Variant> run_variants(
    const VariantPlan& plan, const std::string& path, const std::string& default_yaml,
    const std::string& default_name, const std::vector<std::string>& sets,
    const std::function<void(const Scenario&)>& check,
    const std::function<void(std::size_t, std::size_t)>& done = {});

}  // namespace trainsim::scen
