#include "sim/exec/scale.h"

#include <cmath>

#include "sim/plan/layout.h"

namespace trainsim::exec {

double normal_quantile(double p) {
  // Acklam (2003): rational approximations on the central region and the two tails.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425, hi = 1 - lo;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > hi) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double expected_max_standard_normal(double n) {
  if (n <= 1) return 0.0;
  return normal_quantile((n - 0.375) / (n + 0.25));
}

ScaleCosts scale_costs(const ScaleConfig& cfg, const Breakdown& b, const plan::Layout& L,
                       const topo::ClusterSpec& cluster, const coll::LinkModel& links,
                       Precision precision) {
  ScaleCosts s;
  const int world = L.par.world();
  if (cfg.gpu_speed_sigma > 0) {
    const double paced = b.compute_s + b.pipeline_bubble_s + b.optimizer_s;
    s.gpu_variation_s = paced * cfg.gpu_speed_sigma * expected_max_standard_normal(world);
  }
  if (cfg.global_sync && world > 1) {
    coll::Choice choice;
    const coll::GroupShape all = plan::group_shape(world, 1, cluster);
    const double norm = coll::collective_cost(coll::Kind::kAllReduce, 4.0, all, links, choice).time_s;
    s.global_sync_s = norm;
    if (precision == Precision::kFp16) s.global_sync_s += norm;  // found-inf of loss scaling
    if (L.par.dp > 1) {
      s.global_sync_s +=
          coll::collective_cost(coll::Kind::kAllReduce, 4.0, L.dp, links, choice).time_s;
    }
  }
  return s;
}

}  // namespace trainsim::exec
