#include "calibrate/gemm_fit.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <set>

#include "sim/core/error.h"

namespace trainsim::calib {
namespace {

double log_shape_factor(const GemmSample& s, double d0) {
  return std::log(s.m / (s.m + d0)) + std::log(s.n / (s.n + d0)) + std::log(s.k / (s.k + d0));
}

// For a fixed d0 the model t = o + c_i·y, with c_i the time at e_max = 1 and y = 1 / e_max, is
// linear in y: the y minimising Σ ((o + c_i·y) / t_i − 1)² is a ratio of sums. Returns y and the
// sum of squared relative residuals left.
struct GridPoint {
  double inv_emax = 0;
  double sse = 0;
};

GridPoint solve_for_d0(const std::vector<GemmSample>& s, double overhead, double d0) {
  const auto n = static_cast<Eigen::Index>(s.size());
  Eigen::VectorXd a(n), r(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const GemmSample& x = s[static_cast<std::size_t>(i)];
    a[i] = gemm_surface_time(x, 1.0, d0) / x.seconds;
    r[i] = 1.0 - overhead / x.seconds;
  }
  GridPoint g;
  g.inv_emax = a.dot(r) / a.squaredNorm();
  g.sse = (a * g.inv_emax - r).squaredNorm();
  return g;
}

// Minimises f over [lo, hi]: the best of `grid` + 1 evenly spaced points, then golden-section
// search inside that point's neighbours (`iters` steps). Returns the last bracket's midpoint
// (`x`) and the best grid point with its value.
struct GridGolden {
  double x = 0, grid_x = 0, grid_value = 0;
};
template <class F>
GridGolden grid_golden_min(F&& f, double lo, double hi, int grid, int iters) {
  const double span = hi - lo;
  int best = 0;
  double best_v = 0;
  for (int i = 0; i <= grid; ++i) {
    const double v = f(lo + span * i / grid);
    if (i == 0 || v < best_v) {
      best = i;
      best_v = v;
    }
  }
  double l = lo + span * std::max(0, best - 1) / grid;
  double h = lo + span * std::min(grid, best + 1) / grid;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = h - phi * (h - l), b = l + phi * (h - l);
  double fa = f(a), fb = f(b);
  for (int it = 0; it < iters; ++it) {
    if (fa < fb) {
      h = b;
      b = a;
      fb = fa;
      a = h - phi * (h - l);
      fa = f(a);
    } else {
      l = a;
      a = b;
      fa = fb;
      b = l + phi * (h - l);
      fb = f(b);
    }
  }
  return {(l + h) / 2, lo + span * best / grid, best_v};
}

// One launch cost shared by every memory-bound kind and a slope per kind: rows t_i = o +
// bytes_i · y_k(i), each divided by t_i so that the target is 1 (relative residuals).
void fit_memory_kinds(const std::map<std::string, std::vector<std::pair<double, double>>>& by_kind,
                      double hbm_Bps, KernelFits& f) {
  std::vector<std::string> kinds;
  Eigen::Index rows = 0;
  for (const auto& [kind, samples] : by_kind) {
    kinds.push_back(kind);
    rows += static_cast<Eigen::Index>(samples.size());
  }
  const auto cols = static_cast<Eigen::Index>(kinds.size()) + 1;
  if (rows < cols) return;  // too few samples to separate the kinds: the common line only
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(rows, cols);
  Eigen::Index r = 0;
  for (Eigen::Index c = 1; c < cols; ++c) {
    for (const auto& [bytes, t] : by_kind.at(kinds[static_cast<std::size_t>(c - 1)])) {
      a(r, 0) = 1.0 / t;
      a(r, c) = bytes / t;
      ++r;
    }
  }
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(rows);
  Eigen::VectorXd x = a.colPivHouseholderQr().solve(ones);
  if (!(x[0] >= 0)) {  // no negative launch cost: every slope on its own through the origin
    x[0] = 0;
    for (Eigen::Index c = 1; c < cols; ++c) {
      x[c] = a.col(c).squaredNorm() > 0 ? a.col(c).sum() / a.col(c).squaredNorm() : 0;
    }
  }
  const double o = x[0];
  // The single slope through the same o, for kinds that were not timed.
  double sa = 0, saa = 0;
  for (const auto& [kind, samples] : by_kind) {
    for (const auto& [bytes, t] : samples) {
      const double ai = bytes / t, ri = 1 - o / t;
      sa += ai * ri;
      saa += ai * ai;
    }
  }
  f.memory_joint_overhead_s = o;
  f.memory_joint_common_efficiency = sa > 0 ? saa / (sa * hbm_Bps) : f.memory.efficiency;
  for (Eigen::Index c = 1; c < cols; ++c) {
    const std::string& kind = kinds[static_cast<std::size_t>(c - 1)];
    if (!(x[c] > 0)) {
      f.notes.push_back("memory-bound kind " + kind + ": no slope left above the launch cost, "
                        "common efficiency kept");
      continue;
    }
    KindFit k;
    k.efficiency = 1.0 / (x[c] * hbm_Bps);
    double sq = 0, sq_common = 0;
    for (const auto& [bytes, t] : by_kind.at(kind)) {
      const double own = o + bytes / (k.efficiency * hbm_Bps);
      const double common = f.memory.overhead_s + bytes / (f.memory.efficiency * hbm_Bps);
      sq += (own / t - 1) * (own / t - 1);
      sq_common += (common / t - 1) * (common / t - 1);
      ++k.samples;
    }
    k.rms_rel_error = std::sqrt(sq / k.samples);
    k.rms_rel_error_common = std::sqrt(sq_common / k.samples);
    f.memory_by_kind[kind] = k;
  }
}

}  // namespace

double gemm_surface_time(const GemmSample& s, double peak_efficiency, double half_dim) {
  return 2.0 * s.m * s.n * s.k * s.batch /
         (s.peak_flops * peak_efficiency * std::exp(log_shape_factor(s, half_dim)));
}

GemmFit fit_gemm_surface(const std::vector<GemmSample>& samples, double overhead_s,
                         double max_half_dim) {
  if (samples.size() < 2) throw_input("a GEMM surface needs at least 2 samples", {"", 0, "gemm"});
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const GemmSample& s = samples[i];
    if (!(s.m > 0 && s.n > 0 && s.k > 0 && s.batch > 0 && s.peak_flops > 0 &&
          s.seconds > overhead_s)) {
      throw_input(fmt::format("GEMM sample {} ({}x{}x{}, {:.3g} s) is not usable: shape and peak "
                              "must be > 0, the time above the {:.3g} s overhead",
                              i, s.m, s.n, s.k, s.seconds, overhead_s),
                  {"", 0, "gemm"});
    }
  }
  // Grid in log(1 + d0) from 0 to max_half_dim (d0 = 0 means no shape penalty), then golden
  // section inside the best cell's neighbours.
  auto d0_at = [&](double u) { return std::expm1(u); };
  const double u = grid_golden_min(
      [&](double x) { return solve_for_d0(samples, overhead_s, d0_at(x)).sse; }, 0.0,
      std::log1p(max_half_dim), 240, 80).x;
  GemmFit f;
  f.overhead_s = overhead_s;
  f.half_dim = d0_at(u);
  f.peak_efficiency = 1.0 / solve_for_d0(samples, overhead_s, f.half_dim).inv_emax;
  f.samples = static_cast<int>(samples.size());
  double sq = 0;
  for (const GemmSample& s : samples) {
    const double pred = gemm_surface_time(s, f.peak_efficiency, f.half_dim) + overhead_s;
    const double rel = std::abs(pred - s.seconds) / s.seconds;
    sq += rel * rel;
    f.max_rel_error = std::max(f.max_rel_error, rel);
  }
  f.rms_rel_error = std::sqrt(sq / static_cast<double>(samples.size()));
  return f;
}

GemmFit fit_gemm_surface_and_overhead(const std::vector<GemmSample>& samples,
                                      double max_half_dim) {
  if (samples.empty()) throw_input("a GEMM surface needs at least 2 samples", {"", 0, "gemm"});
  double shortest = samples.front().seconds;
  for (const GemmSample& s : samples) shortest = std::min(shortest, s.seconds);
  // The residual of the best surface as a function of the overhead: a coarse grid, then golden
  // section inside the best cell's neighbours (as for d0 inside fit_gemm_surface).
  auto err = [&](double o) { return fit_gemm_surface(samples, o, max_half_dim).rms_rel_error; };
  const double top = (1 - 1e-6) * std::max(0.0, shortest);  // below every sample
  const GridGolden g = grid_golden_min(err, 0.0, top, 24, 40);
  // The best grid point, if the search inside its neighbours ended worse (a non-unimodal error).
  const double o = err(g.x) <= g.grid_value ? g.x : g.grid_x;
  return fit_gemm_surface(samples, o, max_half_dim);
}

BandwidthFit fit_memory_bandwidth(const std::vector<std::pair<double, double>>& bs,
                                  double hbm_Bps) {
  if (bs.size() < 2) {
    throw_input("a bandwidth fit needs at least 2 memory-bound samples", {"", 0, "memory"});
  }
  if (!(hbm_Bps > 0)) throw_input("HBM bandwidth must be > 0", {"", 0, "hbm_Bps"});
  const auto n = static_cast<Eigen::Index>(bs.size());
  // Relative residuals: divide each row t = o + bytes·x by t, so the target is 1.
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd ones = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto [bytes, t] = bs[static_cast<std::size_t>(i)];
    if (!(bytes > 0 && t > 0)) {
      throw_input(
          fmt::format("memory sample {} ({} B, {} s) must have bytes and time > 0", i, bytes, t),
          {"", 0, "memory"});
    }
    a(i, 0) = 1.0 / t;
    a(i, 1) = bytes / t;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(ones);
  if (x[0] < 0) {  // no negative launch cost: refit through the origin
    x[0] = 0;
    x[1] = a.col(1).dot(ones) / a.col(1).squaredNorm();
  }
  BandwidthFit f;
  f.overhead_s = x[0];
  f.efficiency = 1.0 / (x[1] * hbm_Bps);
  f.samples = static_cast<int>(bs.size());
  for (const auto& [bytes, t] : bs) {
    f.max_rel_error = std::max(f.max_rel_error, std::abs(x[0] + bytes * x[1] - t) / t);
  }
  return f;
}

double fit_flops_efficiency(const std::vector<std::pair<double, double>>& fs, double peak_flops,
                            double overhead_s) {
  if (fs.empty()) throw_input("no samples to fit an efficiency from", {"", 0, "attention"});
  // min Σ (a_i·y − 1)² with a_i = flops_i / (peak · t'_i), y = 1 / efficiency.
  Eigen::VectorXd a(static_cast<Eigen::Index>(fs.size()));
  for (std::size_t i = 0; i < fs.size(); ++i) {
    const double t = fs[i].second - overhead_s;
    if (!(fs[i].first > 0 && t > 0 && peak_flops > 0)) {
      throw_input(fmt::format("sample {} ({} FLOPs, {} s) is not usable after the {} s overhead", i,
                              fs[i].first, fs[i].second, overhead_s),
                  {"", 0, "attention"});
    }
    a[static_cast<Eigen::Index>(i)] = fs[i].first / (peak_flops * t);
  }
  const double y = a.sum() / a.squaredNorm();
  return 1.0 / y;
}

constexpr double kUnlimitedKeys = 1e300;

AttentionFit fit_attention_rate(const std::vector<AttentionSample>& samples, double peak_flops,
                                double overhead_s) {
  if (samples.empty()) throw_input("no samples to fit an efficiency from", {"", 0, "attention"});
  std::vector<std::pair<double, double>> flat;
  double k_min = kUnlimitedKeys, k_max = 0;
  for (const AttentionSample& s : samples) {
    flat.emplace_back(s.flops, s.seconds);
    k_min = std::min(k_min, s.keys);
    k_max = std::max(k_max, s.keys);
  }
  AttentionFit f{fit_flops_efficiency(flat, peak_flops, overhead_s), 0};
  if (!(k_min > 0) || k_max < 2 * k_min) return f;
  // y_i = peak · t'_i / flops_i = 1/e + (k0/e) / K_i; minimise Σ ((A + B/K_i) / y_i − 1)².
  Eigen::Matrix2d n = Eigen::Matrix2d::Zero();
  Eigen::Vector2d r = Eigen::Vector2d::Zero();
  for (const AttentionSample& s : samples) {
    const double y = peak_flops * (s.seconds - overhead_s) / s.flops;
    const Eigen::Vector2d row(1.0 / y, 1.0 / (s.keys * y));
    n += row * row.transpose();
    r += row;
  }
  const Eigen::Vector2d x = n.ldlt().solve(r);
  if (!(x[0] > 0) || !(x[1] > 0)) return f;  // no rise with K: the flat rate
  // The curve's second constant must earn its place: an F-test at 5 % of the relative residuals
  // against the flat rate's, so that timing noise on a flat kernel is not read as a curve.
  const std::size_t count = samples.size();
  if (count < 3) return f;
  double rss_flat = 0, rss_curve = 0;
  for (const AttentionSample& s : samples) {
    const double y = peak_flops * (s.seconds - overhead_s) / s.flops;
    rss_flat += std::pow(1.0 / (f.efficiency * y) - 1, 2);
    rss_curve += std::pow((x[0] + x[1] / s.keys) / y - 1, 2);
  }
  // F(1, d) at 5 %, d = count − 2 degrees of freedom (statistical tables); beyond 30, F(1, 30).
  constexpr double kF5[] = {161.4, 18.51, 10.13, 7.71, 6.61, 5.99, 5.59, 5.32, 5.12, 4.96,
                            4.84,  4.75,  4.67,  4.60, 4.54, 4.49, 4.45, 4.41, 4.38, 4.35,
                            4.32,  4.30,  4.28,  4.26, 4.24, 4.23, 4.21, 4.20, 4.18, 4.17};
  const std::size_t d = count - 2;
  const double critical = kF5[std::min<std::size_t>(d, 30) - 1];
  if (rss_curve > 0 && (rss_flat - rss_curve) / (rss_curve / static_cast<double>(d)) < critical) {
    return f;
  }
  // A plateau above the peak is the curve extrapolated past what any kernel can do: the
  // samples do not pin it, so the flat rate stands.
  if (x[0] < 1) return f;
  return {1.0 / x[0], x[1] / x[0]};
}

std::vector<RateIssue> check_sample_rates(const std::vector<MeasuredKernel>& samples,
                                          const PeakRates& peaks) {
  std::vector<RateIssue> out;
  const double ok = 1 + kPeakRateTolerance;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const MeasuredKernel& k = samples[i];
    if (!(k.median_s > 0)) continue;  // the profile reader refuses these
    if (k.op == "gemm") {
      const double peak = k.dtype == "fp8"    ? peaks.dense_fp8_flops
                          : k.dtype == "fp32" ? peaks.fp32_flops
                                              : peaks.dense_16bit_flops;
      const double flops = 2 * k.m * k.n * k.k * k.batch;
      const double rate = flops / k.median_s;
      if (peak > 0 && rate > ok * peak) {
        out.push_back({i,
                       fmt::format("a {} GEMM {}x{}x{}{} does 2·m·n·k{} = {:.4g} FLOP in {:.4g} s: "
                                   "{:.4g} TFLOP/s, {:.3g} x the GPU's {:.4g} TFLOP/s peak (at "
                                   "most {:.2f} x is possible)",
                                   k.dtype, k.m, k.n, k.k, k.batch > 1 ? fmt::format(" x{}", k.batch) : "",
                                   k.batch > 1 ? "·batch" : "", flops, k.median_s, rate / 1e12,
                                   rate / peak, peak / 1e12, ok),
                       true});
      }
    } else if (k.op == "attention_fwd" || k.op == "attention_bwd") {
      const double peak = peaks.dense_16bit_flops;
      const double rate = k.flops / k.median_s;
      if (peak > 0 && rate > 2 * ok * peak) {
        out.push_back({i,
                       fmt::format("{} counts {:.4g} FLOP in {:.4g} s: {:.4g} TFLOP/s, {:.3g} x the "
                                   "GPU's {:.4g} TFLOP/s peak (at most {:.2f} x is possible: a "
                                   "causal kernel computes about half of the products counted)",
                                   k.op, k.flops, k.median_s, rate / 1e12, rate / peak,
                                   peak / 1e12, 2 * ok),
                       true});
      }
    } else if (peaks.hbm_Bps > 0) {
      const double rate = k.bytes / k.median_s;
      const bool in_mix = timed_in_mix(k);
      if (rate > (in_mix ? 1.0 : ok) * peaks.hbm_Bps) {
        out.push_back(
            {i,
             fmt::format("{} moves {:.4g} B in {:.4g} s: {:.4g} TB/s, {:.3g} x the GPU's {:.4g} "
                         "TB/s HBM bandwidth{}",
                         k.op, k.bytes, k.median_s, rate / 1e12, rate / peaks.hbm_Bps,
                         peaks.hbm_Bps / 1e12,
                         in_mix ? " (timed in the mix of a training step, where its inputs may "
                                  "have stayed in L2)"
                                : fmt::format(" (at most {:.2f} x is possible: the bench's "
                                              "inputs do not fit in L2)",
                                              ok)),
             !in_mix});
      }
    }
  }
  return out;
}

double fit_in_mix_factor(const std::vector<GemmSample>& in_mix, const GemmFit& burst) {
  // t_i = o + c_i / κ with c_i the burst surface's time: linear in y = 1/κ, and the y that
  // minimises Σ ((o + c_i·y) / t_i − 1)² is a ratio of sums (as for e_max in solve_for_d0).
  double num = 0, den = 0;
  for (const GemmSample& s : in_mix) {
    const double a = gemm_surface_time(s, burst.peak_efficiency, burst.half_dim) / s.seconds;
    num += a * (1.0 - burst.overhead_s / s.seconds);
    den += a * a;
  }
  if (!(num > 0 && den > 0)) {
    throw_input("the in-mix GEMM samples leave no time beyond the GEMM overhead",
                {"", 0, "gemm"});
  }
  return den / num;
}

KernelFits fit_kernels(const std::vector<MeasuredKernel>& samples, const PeakRates& peaks,
                       const std::string& gemm_dtype, const GemmFit* base_surface) {
  KernelFits f;
  f.gemm_dtype = gemm_dtype;
  // A sample faster than the GPU can run it is a broken measurement or an edited file: one
  // such GEMM (1 ps for 2.3e11 FLOP) set e_max to 2.8e15 and the rest of the surface with it.
  const std::vector<RateIssue> rates = check_sample_rates(samples, peaks);
  std::size_t impossible = 0;
  for (const RateIssue& r : rates) impossible += r.impossible;
  for (const RateIssue& r : rates) {
    if (!r.impossible) {
      f.fast_in_mix.push_back(r);
      continue;
    }
    throw_input(fmt::format("faster than the GPU can run it: {}{}", r.what,
                            impossible > 1 ? fmt::format(" ({} more samples like it)",
                                                         impossible - 1)
                                           : ""),
                {"", 0, fmt::format("kernels_measured[{}].median_s", r.index)},
                "a time, shape or GPU that is not what ran: re-measure or remove the sample");
  }
  std::vector<std::pair<double, double>> mem;
  std::vector<AttentionSample> att_fwd, att_bwd, att64_fwd, att64_bwd;
  std::map<std::string, std::vector<std::pair<double, double>>> mem_by_kind;
  std::vector<GemmSample> gemms;
  double gemm_peak = 0;
  if (gemm_dtype == "fp8") {
    gemm_peak = peaks.dense_fp8_flops;
  } else if (gemm_dtype == "fp32") {
    gemm_peak = peaks.fp32_flops;
  } else {
    gemm_peak = peaks.dense_16bit_flops;
  }
  if (!(gemm_peak > 0)) {
    throw_input("no peak FLOP/s for GEMM dtype `" + gemm_dtype + "` on this GPU", {"", 0, "gemm"});
  }
  // A kind timed in the mix of a training step (`calibrate from-execute`) is fitted on those
  // samples alone: a burst of the same kernel ran at another clock. GEMMs keep the surface of
  // their burst samples (few in-mix shapes cannot condition it) and take one factor from the
  // in-mix ones, below.
  std::set<std::string> in_mix_kinds;
  std::vector<GemmSample> in_mix_gemms;
  for (const MeasuredKernel& k : samples) {
    if (timed_in_mix(k)) in_mix_kinds.insert(k.op);
  }
  for (const MeasuredKernel& k : samples) {
    const bool in_mix = timed_in_mix(k);
    if (k.op != "gemm" && in_mix_kinds.count(k.op) && !in_mix) continue;
    if (is_memory_bound_kernel(k.op)) {
      mem.emplace_back(k.bytes, k.median_s);
      mem_by_kind[k.op].emplace_back(k.bytes, k.median_s);
    } else if (k.op == "attention_fwd") {
      // The keys a query computes, as the sample's FLOPs count them (4·batch·m·K·d); k is the
      // head dimension: 64 or less goes to the 64 curve's samples (split below).
      (k.k <= 64 ? att64_fwd : att_fwd)
          .push_back({k.flops, k.flops / (4 * k.batch * k.m * k.k), k.median_s});
    } else if (k.op == "attention_bwd") {
      (k.k <= 64 ? att64_bwd : att_bwd)
          .push_back({k.flops, k.flops / (8 * k.batch * k.m * k.k), k.median_s});
    } else if (k.dtype == gemm_dtype && k.batch == 1) {
      (in_mix ? in_mix_gemms : gemms).push_back({k.m, k.n, k.k, k.batch, gemm_peak, k.median_s});
    }
  }
  f.gemm_from_base = gemms.size() < 2 && !in_mix_gemms.empty() && base_surface != nullptr;
  if (gemms.size() < 2 && !in_mix_gemms.empty() && !f.gemm_from_base) {
    // No burst surface to scale: the in-mix GEMMs are the surface.
    gemms.insert(gemms.end(), in_mix_gemms.begin(), in_mix_gemms.end());
    in_mix_gemms.clear();
  }
  f.memory = fit_memory_bandwidth(mem, peaks.hbm_Bps);
  fit_memory_kinds(mem_by_kind, peaks.hbm_Bps, f);
  if (const auto c = f.memory_by_kind.find("copy"); c != f.memory_by_kind.end()) {
    f.copy_bw_Bps = c->second.efficiency * peaks.hbm_Bps;
  }
  if (f.gemm_from_base) {
    // The base profile's surface keeps its shape (e_max, d0, fixed cost) and takes the in-mix
    // factor below, as a burst surface would.
    f.gemm = *base_surface;
    f.gemm.samples = 0;
    f.gemm.rms_rel_error = f.gemm.max_rel_error = 0;
    f.notes.push_back(fmt::format(
        "no burst {} GEMM samples: the base profile's surface (e_max {:.3f}, d0 {:.1f}, fixed "
        "cost {:.3g} s) keeps its shape and takes the in-mix factor of {} GEMMs",
        gemm_dtype, base_surface->peak_efficiency, base_surface->half_dim,
        base_surface->overhead_s, in_mix_gemms.size()));
  } else {
    if (gemms.size() < 2) {
      throw_input("fewer than 2 unbatched " + gemm_dtype + " GEMM samples", {"", 0, "gemm"},
                  "time the grid GEMMs in the training precision");
    }
    f.gemm = fit_gemm_surface_and_overhead(gemms);
  }
  f.gemm_in_mix_samples = static_cast<int>(in_mix_gemms.size());
  if (!in_mix_gemms.empty()) {
    f.gemm_in_mix_factor = fit_in_mix_factor(in_mix_gemms, f.gemm);
    f.gemm.peak_efficiency *= f.gemm_in_mix_factor;
  }
  for (const MeasuredKernel& k : samples) {
    if (k.op != "gemm" || k.dtype != gemm_dtype || !(k.median_s > 0)) continue;
    const GemmSample s{k.m, k.n, k.k, k.batch, k.batch > 1 ? peaks.dense_16bit_flops : gemm_peak,
                       k.median_s};
    const double rel =
        (f.gemm.overhead_s + gemm_surface_time(s, f.gemm.peak_efficiency, f.gemm.half_dim)) /
            k.median_s -
        1;
    KernelFits::GemmResidual& r = f.gemm_by_op[k.label.substr(0, k.label.find('.'))];
    ++r.samples;
    r.rms_rel_error += rel * rel;  // sums until the loop ends
    r.mean_rel_error += rel;
  }
  for (auto& [op, r] : f.gemm_by_op) {
    r.rms_rel_error = std::sqrt(r.rms_rel_error / r.samples);
    r.mean_rel_error /= r.samples;
  }
  // Both head dimensions timed for both passes (the standard grid: 64 and 128): a curve each,
  // the profile's at 128 and its 64 curve (Profile::attention_hd64). Otherwise one curve over
  // every sample, as before the head dimension mattered.
  const bool split64 =
      !att_fwd.empty() && !att_bwd.empty() && !att64_fwd.empty() && !att64_bwd.empty();
  if (split64) {
    const double peak = peaks.dense_16bit_flops;
    const AttentionFit a = fit_attention_rate(att64_fwd, peak, f.memory.overhead_s);
    const AttentionFit b = fit_attention_rate(att64_bwd, peak, f.memory.overhead_s);
    f.attention_hd64_fwd_efficiency = a.efficiency;
    f.attention_hd64_fwd_overhead_keys = a.overhead_keys;
    f.attention_hd64_bwd_efficiency = b.efficiency;
    f.attention_hd64_bwd_overhead_keys = b.overhead_keys;
  } else {
    att_fwd.insert(att_fwd.end(), att64_fwd.begin(), att64_fwd.end());
    att_bwd.insert(att_bwd.end(), att64_bwd.begin(), att64_bwd.end());
  }
  if (!att_fwd.empty()) {
    const AttentionFit a = fit_attention_rate(att_fwd, peaks.dense_16bit_flops, f.memory.overhead_s);
    f.attention_fwd_efficiency = a.efficiency;
    f.attention_fwd_overhead_keys = a.overhead_keys;
  } else {
    f.notes.push_back("no attention_fwd samples: attention_fwd_efficiency kept");
  }
  if (!att_bwd.empty()) {
    const AttentionFit a = fit_attention_rate(att_bwd, peaks.dense_16bit_flops, f.memory.overhead_s);
    f.attention_bwd_efficiency = a.efficiency;
    f.attention_bwd_overhead_keys = a.overhead_keys;
  } else {
    f.notes.push_back("no attention_bwd samples: attention_bwd_efficiency kept");
  }
  // An efficiency is a fraction of a peak the samples cannot beat (check_sample_rates), so one
  // above 1 comes from the form of the fit, not from the GPU: an error, never a clamp.
  auto above_one = [&](double v, const std::string& name, const std::string& why) {
    if (v > 1.0) {
      throw_input(fmt::format("{} fitted as {:.4g}, above 1", name, v), {"", 0, name}, why);
    }
  };
  const std::string mem_why =
      "the samples' bytes or the GPU's HBM bandwidth are not what ran (check the profile's gpu)";
  above_one(f.memory.efficiency, "memory_bw_efficiency", mem_why);
  above_one(f.memory_joint_common_efficiency, "memory_bw_efficiency", mem_why);
  for (const auto& [kind, k] : f.memory_by_kind) {
    above_one(k.efficiency, "memory_bw_efficiency_by_kind." + kind,
              in_mix_kinds.count(kind)
                  ? "fitted on samples timed in the mix (exec:" + kind +
                        "), whose inputs stayed in L2: leave that kind's samples out"
                  : mem_why);
  }
  above_one(f.gemm.peak_efficiency, "gemm_peak_efficiency",
            "the surface's e_max is its rate at infinite dimensions: shapes that share their "
            "dimensions cannot condition it (time the grid's GEMMs too, calibrate kernels "
            "always does), or the peak is not this GPU's (check the profile's gpu)");
  above_one(f.attention_fwd_efficiency, "attention_fwd_efficiency",
            "the samples' FLOPs or the GPU's peak are not what ran (check the profile's gpu)");
  above_one(f.attention_bwd_efficiency, "attention_bwd_efficiency",
            "the samples' FLOPs or the GPU's peak are not what ran (check the profile's gpu)");
  above_one(f.attention_hd64_fwd_efficiency, "attention_head_dim_64.fwd_efficiency",
            "the samples' FLOPs or the GPU's peak are not what ran (check the profile's gpu)");
  above_one(f.attention_hd64_bwd_efficiency, "attention_head_dim_64.bwd_efficiency",
            "the samples' FLOPs or the GPU's peak are not what ran (check the profile's gpu)");
  // An in-mix kind above the copy kernel's bandwidth, the fastest the burst bench streams HBM
  // on this GPU: its inputs likely stayed in L2 between the step's kernels.
  if (f.copy_bw_Bps > 0) {
    for (const auto& [kind, k] : f.memory_by_kind) {
      if (!in_mix_kinds.count(kind) || kind == "copy") continue;
      const double of_copy = k.efficiency * peaks.hbm_Bps / f.copy_bw_Bps;
      if (of_copy > 1.0) {
        f.warnings.push_back(fmt::format(
            "memory_bw_efficiency_by_kind.{} = {:.3f} is {:.3f} x the copy kernel's bandwidth "
            "({:.4g} TB/s): fitted on samples timed in the mix (exec:), whose inputs likely "
            "stayed in L2; the simulator prices that kind at this rate",
            kind, k.efficiency, of_copy, f.copy_bw_Bps / 1e12));
      }
    }
  }
  return f;
}

void apply_kernel_fits(const KernelFits& f, Profile& p) {
  p.memory_bw_efficiency = f.memory.efficiency;
  p.kernel_overhead_s = f.memory.overhead_s;
  if (!f.memory_by_kind.empty()) {
    // The per-kind slopes were fitted on their own launch cost: the profile takes that one,
    // and the common efficiency through it.
    p.kernel_overhead_s = f.memory_joint_overhead_s;
    p.memory_bw_efficiency = f.memory_joint_common_efficiency;
  }
  p.memory_bw_efficiency_by_kind.clear();
  for (const auto& [kind, k] : f.memory_by_kind) {
    p.memory_bw_efficiency_by_kind[kind] = k.efficiency;
  }
  p.copy_bw_Bps.reset();
  if (f.copy_bw_Bps > 0) p.copy_bw_Bps = f.copy_bw_Bps;
  p.gemm_peak_efficiency = f.gemm.peak_efficiency;
  p.gemm_half_dim = f.gemm.half_dim;
  p.gemm_overhead_s = f.gemm.overhead_s;
  // A fitted pass takes its curve with it (overhead 0: a flat rate measured at the model's own
  // shapes), so that a datasheet profile's published curve never bends a measured rate.
  if (f.attention_fwd_efficiency > 0) {
    p.attention_fwd_efficiency = f.attention_fwd_efficiency;
    p.attention_fwd_overhead_keys = f.attention_fwd_overhead_keys;
  }
  if (f.attention_bwd_efficiency > 0) {
    p.attention_bwd_efficiency = f.attention_bwd_efficiency;
    p.attention_bwd_overhead_keys = f.attention_bwd_overhead_keys;
  }
  // Nor a datasheet curve at head dimension 64: the measured one where both head dimensions
  // were timed, else none (the measured rate is then the timed head dimensions' together).
  if (f.attention_hd64_fwd_efficiency > 0 && f.attention_hd64_bwd_efficiency > 0) {
    p.attention_hd64 = {f.attention_hd64_fwd_efficiency, f.attention_hd64_bwd_efficiency,
                        f.attention_hd64_fwd_overhead_keys, f.attention_hd64_bwd_overhead_keys};
  } else if (f.attention_fwd_efficiency > 0 || f.attention_bwd_efficiency > 0) {
    p.attention_hd64 = {};
  }
}

}  // namespace trainsim::calib
