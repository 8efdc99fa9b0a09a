// Output of a multi-job run (`trainsim run` on a scenario with `jobs:`; scenarios/jobs.h): one
// row per job (its servers, iteration time together and alone, the slowdown, MFU, exposed
// communication per dimension) and the fabric's load per class of link with the links the jobs
// shared; the JSON document holds every job's full result (result_json) beside them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/jobs.h"

namespace trainsim::reports {

/// Servers as ranges: "0-383", "0-3, 8-11, 20 (3 runs)"; long lists are cut after `max_runs`.
std::string server_ranges(const std::vector<int>& hosts, std::size_t max_runs = 6);

/// The per-job table (rows only: job, GPUs, placement, servers, start, iterations, mean
/// iteration, alone,
/// slowdown, MFU, exposed DP/PP/TP), with `prefix` cells before each row's own.
std::vector<std::vector<std::string>> jobs_rows(const scen::JobsOutcome& o,
                                                const std::vector<std::string>& prefix);
/// The header of jobs_rows, with `prefix` column names before.
std::vector<std::string> jobs_header(const std::vector<std::string>& prefix);

std::string jobs_text(const scen::JobsOutcome& o, const scen::Scenario& s);
nlohmann::ordered_json jobs_json(const scen::JobsOutcome& o, const scen::Scenario& s);
/// DIR/index.html (each job's iteration together and alone, its breakdown, the fabric's load per
/// link class), DIR/results.json (jobs_json) and DIR/results.csv (one row per job).
void write_jobs_report(const std::string& dir, const scen::JobsOutcome& o, const scen::Scenario& s);

}  // namespace trainsim::reports
