#include "scenarios/validation_fit.h"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "calibrate/profile.h"
#include "scenarios/schema.h"
#include "sim/core/error.h"

namespace trainsim::scen {
namespace {

bool is_profile_key(const std::string& key) { return key.find(':') != std::string::npos; }

ValidationOptions options_for(const std::vector<std::string>& keys, const Eigen::VectorXd& x) {
  ValidationOptions o;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (is_profile_key(keys[i])) {
      o.profile_overrides[keys[i]] = x[static_cast<Eigen::Index>(i)];
    } else {
      o.set[keys[i]] = fmt::format("{}", x[static_cast<Eigen::Index>(i)]);
    }
  }
  return o;
}

// MFU errors (points) of the rows that constrain the fit, in row order; NaN for a row that
// could not be simulated with these values.
std::vector<double> residuals(const std::string& text, const std::string& name,
                              const std::string& fidelity, const ValidationOptions& o,
                              const std::set<std::string>& rows) {
  std::vector<double> r;
  for (const ValidationRow& row : validate_runs_text(text, name, fidelity, o)) {
    if (!rows.count(row.id)) continue;
    r.push_back(row.mfu_err_pts ? *row.mfu_err_pts : std::nan(""));
  }
  return r;
}

double rms(const std::vector<double>& r) {
  double s = 0;
  for (double x : r) s += x * x;
  return r.empty() ? 0 : std::sqrt(s / static_cast<double>(r.size()));
}

}  // namespace

double fit_key_initial(const std::string& key) {
  // A declared fitted constant starts from its unfitted prior: the built-in profile holds the
  // fitted value, which must not leak into a fit that leaves its rows out.
  const auto prior = declared_fit_priors().find(key);
  if (prior != declared_fit_priors().end()) return prior->second;
  const auto colon = key.find(':');
  if (colon != std::string::npos) {
    calib::Profile p = calib::builtin_profile(key.substr(0, colon));
    const std::string field = key.substr(colon + 1);
    const double probe = 0.123456789;
    calib::Profile q = p;
    if (!apply_profile_override(q, field, probe)) {
      throw_input("unknown profile constant `" + field + "`", {"", 0, "--fit"},
                  "one of gemm_peak_efficiency, gemm_half_dim, attention_fwd_efficiency, "
                  "attention_bwd_efficiency, attention_fwd_overhead_keys, "
                  "attention_bwd_overhead_keys, memory_bw_efficiency, kernel_overhead_s, "
                  "nic_efficiency, data_loading_s");
    }
    if (field == "gemm_peak_efficiency") return p.gemm_peak_efficiency;
    if (field == "gemm_half_dim") return p.gemm_half_dim;
    if (field == "attention_fwd_efficiency") return p.attention_fwd_efficiency;
    if (field == "attention_bwd_efficiency") return p.attention_bwd_efficiency;
    if (field == "attention_fwd_overhead_keys") return p.attention_fwd_overhead_keys;
    if (field == "attention_bwd_overhead_keys") return p.attention_bwd_overhead_keys;
    if (field == "memory_bw_efficiency") return p.memory_bw_efficiency;
    if (field == "kernel_overhead_s") return p.kernel_overhead_s;
    if (field == "nic_efficiency") return p.nic_efficiency;
    return p.data_loading_s;
  }
  const KeyDef* k = find_key(key);
  if (k == nullptr || k->type != KeyType::kFloat) {
    throw_input("`" + key + "` is neither <gpu>:<profile constant> nor a float scenario key",
                {"", 0, "--fit"});
  }
  return std::stod(k->default_value);
}

FitResult fit_runs(const std::string& text, const std::string& name,
                   const std::vector<std::string>& keys, const std::string& fidelity,
                   const std::vector<std::string>& exclude_sources) {
  if (keys.empty()) throw_input("nothing to fit", {"", 0, "--fit"}, "name one or more keys");
  // A constant named twice would be two unknowns of one value (a singular fit, each row counted
  // twice, and two different values reported for it).
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (keys[i] == keys[j]) {
        throw_input("`" + keys[i] + "` is named twice", {"", 0, "--fit"}, "name each constant once");
      }
    }
  }
  FitResult fit;
  const auto k = static_cast<Eigen::Index>(keys.size());
  Eigen::VectorXd x(k);
  for (Eigen::Index i = 0; i < k; ++i) x[i] = fit_key_initial(keys[static_cast<std::size_t>(i)]);

  // Rows that constrain the fit: simulated, with a published MFU (or one derived), from a source
  // not excluded, and on a GPU that one of the profile keys names (or any GPU for scenario keys).
  std::set<std::string> use;
  std::map<std::string, int> per_key;
  const std::vector<ValidationRow> base = validate_runs_text(text, name, fidelity, options_for(keys, x));
  for (const ValidationRow& row : base) {
    if (!row.mfu_err_pts) continue;
    if (std::find(exclude_sources.begin(), exclude_sources.end(), row.source) !=
        exclude_sources.end())
      continue;
    bool constrains = false;
    for (const std::string& key : keys) {
      const auto colon = key.find(':');
      const bool hits = colon == std::string::npos || row.gpu == key.substr(0, colon);
      if (hits) ++per_key[key];
      constrains = constrains || hits;
    }
    if (constrains) use.insert(row.id);
  }
  fit.rows = static_cast<int>(use.size());
  std::vector<double> r = residuals(text, name, fidelity, options_for(keys, x), use);
  fit.rms_before_pts = rms(r);
  // Keys no row constrains keep their starting value; the others are fitted.
  std::vector<Eigen::Index> free;
  for (Eigen::Index i = 0; i < k; ++i) {
    if (per_key[keys[static_cast<std::size_t>(i)]] > 0) free.push_back(i);
  }
  const auto n = static_cast<Eigen::Index>(r.size());
  const auto f = static_cast<Eigen::Index>(free.size());
  Eigen::MatrixXd J(n, f);
  double lambda = 1e-3;
  for (int it = 0; it < 20 && f > 0 && n > 0; ++it) {
    fit.iterations = it + 1;
    for (Eigen::Index j = 0; j < f; ++j) {
      Eigen::VectorXd xp = x;
      const double h = std::max(1e-6, 1e-3 * std::fabs(x[free[j]]));
      xp[free[j]] += h;
      const std::vector<double> rp = residuals(text, name, fidelity, options_for(keys, xp), use);
      for (Eigen::Index i = 0; i < n; ++i) J(i, j) = (rp[i] - r[i]) / h;
    }
    Eigen::VectorXd rv = Eigen::Map<const Eigen::VectorXd>(r.data(), n);
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * rv;
    bool improved = false;
    for (int tries = 0; tries < 8 && !improved; ++tries) {
      Eigen::MatrixXd A = JtJ;
      A.diagonal() += lambda * JtJ.diagonal().cwiseMax(1e-12);
      const Eigen::VectorXd step = A.ldlt().solve(-g);
      Eigen::VectorXd xn = x;
      for (Eigen::Index j = 0; j < f; ++j) xn[free[j]] = std::max(1e-9, x[free[j]] + step[j]);
      const std::vector<double> rn = residuals(text, name, fidelity, options_for(keys, xn), use);
      const bool finite = std::all_of(rn.begin(), rn.end(), [](double v) { return std::isfinite(v); });
      if (finite && rms(rn) < rms(r)) {
        const double gain = rms(r) - rms(rn);
        x = xn;
        r = rn;
        lambda = std::max(1e-7, lambda / 10);
        improved = true;
        if (gain < 1e-6) it = 100;  // converged
      } else {
        lambda *= 10;
      }
    }
    if (!improved) break;
  }
  fit.rms_after_pts = rms(r);
  // Standard errors from the last Jacobian.
  Eigen::VectorXd se = Eigen::VectorXd::Zero(k);
  if (f > 0 && n > f) {
    const double s2 = [&] {
      double s = 0;
      for (double v : r) s += v * v;
      return s / static_cast<double>(n - f);
    }();
    const Eigen::MatrixXd cov = (J.transpose() * J).inverse() * s2;
    for (Eigen::Index j = 0; j < f; ++j) se[free[j]] = std::sqrt(std::max(0.0, cov(j, j)));
  }
  for (Eigen::Index i = 0; i < k; ++i) {
    const std::string& key = keys[static_cast<std::size_t>(i)];
    fit.parameters.push_back({key, fit_key_initial(key), x[i], se[i], per_key[key]});
  }
  return fit;
}

ValidationOptions options_from_fit(const FitResult& fit) {
  std::vector<std::string> keys;
  Eigen::VectorXd x(static_cast<Eigen::Index>(fit.parameters.size()));
  for (std::size_t i = 0; i < fit.parameters.size(); ++i) {
    keys.push_back(fit.parameters[i].key);
    x[static_cast<Eigen::Index>(i)] = fit.parameters[i].value;
  }
  return options_for(keys, x);
}

const std::map<std::string, double>& declared_fit_priors() {
  // calibrate/profiles/README.md: the one constant of the built-in profiles fitted to published
  // runs (no public measurement gives the GEMM rate an H100 sustains in training). Its prior,
  // before any row: the H100's burst MAMF (0.803 of peak, Bekman's ML Engineering table) times
  // the A100's measured sustained/burst ratio (257/271 = 0.95, He 2024 and the same table).
  static const std::map<std::string, double> kPriors = {
      {"h100-sxm:gemm_peak_efficiency", 0.803 * 257.0 / 271.2}};
  return kPriors;
}

const std::vector<std::string>& declared_fit_keys() {
  static const std::vector<std::string> kKeys = [] {
    std::vector<std::string> k;
    for (const auto& [key, prior] : declared_fit_priors()) k.push_back(key);
    return k;
  }();
  return kKeys;
}

CrossValidation cross_validate_by_source(const std::string& text, const std::string& name,
                                         const std::vector<std::string>& keys,
                                         const std::string& fidelity) {
  CrossValidation cv;
  const std::vector<ValidationRow> all = validate_runs_text(text, name, fidelity);
  std::vector<std::string> sources;
  for (const ValidationRow& row : all) {
    if (std::find(sources.begin(), sources.end(), row.source) == sources.end()) {
      sources.push_back(row.source);
    }
  }
  std::map<std::string, ValidationRow> by_id;
  for (const std::string& source : sources) {
    FitResult fit = fit_runs(text, name, keys, fidelity, {source});
    const ValidationOptions o = options_from_fit(fit);
    for (ValidationRow& row : validate_runs_text(text, name, fidelity, o)) {
      if (row.source == source) by_id.emplace(row.id, std::move(row));
    }
    cv.fits.emplace(source, std::move(fit));
  }
  for (const ValidationRow& row : all) cv.rows.push_back(by_id.at(row.id));
  cv.summary = summarize(cv.rows);
  return cv;
}

}  // namespace trainsim::scen
