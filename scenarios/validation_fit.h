// Fitting declared constants to published runs, and leave-one-source-out generalization
// (`trainsim calibrate fit-runs`, `trainsim validate --cross-validate source`).
//
// A planner fits a small, declared set of constants to the runs of their own cluster and then
// predicts new configurations; cross-validation says how well that generalizes: each source's
// rows are predicted with the constants refitted on every other source's rows.
//
// The fit minimises Σ (predicted MFU − published MFU)² in points over the rows that constrain the
// parameters (a profile constant "<gpu>:<field>" is constrained by that GPU's rows; a scenario key
// by every row), by Gauss-Newton with a Levenberg-Marquardt damping and a finite-difference
// Jacobian. The standard error of each parameter is √(s²·(JᵀJ)⁻¹ᵢᵢ), s² = RSS / (n − k).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "scenarios/validation_runs.h"

namespace trainsim::scen {

struct FitParameter {
  std::string key;      // "<gpu>:<profile field>" or a float scenario key (e.g. scale.gpu_speed_sigma)
  double initial = 0;   // starting value (the profile's or the schema default's)
  double value = 0;     // fitted
  double stderr_ = 0;   // standard error (0 when the fit has no degrees of freedom left)
  int rows = 0;         // rows that constrain it
};

struct FitResult {
  std::vector<FitParameter> parameters;
  int rows = 0;              // rows used
  double rms_before_pts = 0; // RMS MFU error before and after, points
  double rms_after_pts = 0;
  int iterations = 0;
};

/// The starting value of a fit key (the built-in profile's constant, or the schema default).
double fit_key_initial(const std::string& key);

/// Fits `keys` to the rows of the CSV text (only rows whose id passes `use`, when given).
FitResult fit_runs(const std::string& csv_text, const std::string& name,
                   const std::vector<std::string>& keys, const std::string& fidelity = "analytic",
                   const std::vector<std::string>& exclude_sources = {});

/// The options that apply fitted values to a validation run.
ValidationOptions options_from_fit(const FitResult& fit);

/// The constants the built-in profiles declare as fitted to published runs (calibrate/profiles/
/// README.md): refitted per held-out source by cross-validation.
const std::vector<std::string>& declared_fit_keys();
/// Their unfitted priors (fit starting points, and the value a held-out fit keeps when no
/// remaining row constrains a constant).
const std::map<std::string, double>& declared_fit_priors();

struct CrossValidation {
  std::vector<ValidationRow> rows;  // each predicted with constants fitted without its source
  std::map<std::string, FitResult> fits;  // per held-out source
  ValidationSummary summary;
};
CrossValidation cross_validate_by_source(const std::string& csv_text, const std::string& name,
                                         const std::vector<std::string>& keys,
                                         const std::string& fidelity = "analytic");

}  // namespace trainsim::scen
