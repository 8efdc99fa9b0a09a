// Fits of the compute fields of a profile from measured kernel times (`kernels_measured`).
//
// The simulator prices compute ops with three small models (sim/exec/compute_model.h,
// docs/calibration.md); each fit here recovers the constants of one of them from samples:
//
//  - memory-bound kernels:  t = kernel_overhead_s + bytes / (memory_bw_efficiency · hbm_Bps)
//    a straight line in bytes, fitted by least squares on relative residuals (Eigen);
//  - GEMMs:  t = overhead + 2·m·n·k·batch / (peak · e_max · Π_{d∈m,n,k} d / (d + d0))
//    nonlinear in d0 (gemm_half_dim) only: for a fixed d0 the time is linear in 1/e_max, whose
//    best value is a ratio of sums, so the fit scans d0 on a log grid and refines the best cell
//    by golden-section search, minimising squared relative residuals of the time, overhead
//    included (every shape weighs alike, and launch-bound tiny GEMMs do not blow up); the
//    overhead (gemm_overhead_s) is fitted around that by a golden-section search of its own;
//  - attention:  t = overhead + flops / (peak16 · efficiency), forward and backward separately
//    (a backward sample carries the 2× forward FLOPs the simulator counts), one linear parameter.
//
// Samples timed in the mix of a training step (labels "exec:<task kind>", `calibrate
// from-execute`, kernels/exec/in_mix.h) take precedence over bursts of the same kind: a memory
// kind or an attention pass with in-mix samples is fitted on them alone; GEMMs keep the burst
// surface's shape (d0, overhead) and scale its e_max by the one factor the in-mix GEMMs give.
//
// Pure functions of their inputs; no GPU, no file access. Errors are trainsim::Error (kInput)
// naming the op kind that lacks samples.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "calibrate/profile.h"

namespace trainsim::calib {

/// One GEMM timing: shape, the dense peak of its dtype and the measured time.
struct GemmSample {
  double m = 0, n = 0, k = 0, batch = 1;
  double peak_flops = 0;  // FLOP/s of the dtype it ran in (datasheet dense tensor-core peak)
  double seconds = 0;
};

struct GemmFit {
  double peak_efficiency = 0;  // e_max
  double half_dim = 0;         // d0
  double overhead_s = 0;       // the fixed cost per GEMM the fit used (given or fitted)
  double rms_rel_error = 0;    // over the samples, of predicted vs measured time
  double max_rel_error = 0;
  int samples = 0;
};

/// Fits e_max and d0. `overhead_s` (the per-launch cost, from the bandwidth fit) is taken off
/// every time first, as the compute model adds it back. d0 is searched in [0, max_half_dim].
GemmFit fit_gemm_surface(const std::vector<GemmSample>& samples, double overhead_s = 0,
                         double max_half_dim = 8192);

/// Fits e_max, d0 and the GEMM's own fixed cost together: the overhead is searched in
/// [0, the shortest sample) (golden section on the best surface fit at each overhead). A
/// GEMM's fixed cost (cuBLASLt launch, prologue, epilogue, the partial last wave) is not an
/// element-wise kernel's: borrowing the bandwidth fit's intercept misfits the small shapes and
/// drags d0 up (the H200 record, docs/calibration.md).
GemmFit fit_gemm_surface_and_overhead(const std::vector<GemmSample>& samples,
                                      double max_half_dim = 8192);

/// Predicted GEMM time of the surface (without overhead), for checks and residuals.
double gemm_surface_time(const GemmSample& shape, double peak_efficiency, double half_dim);

struct BandwidthFit {
  double efficiency = 0;  // fraction of hbm_Bps achieved at large sizes
  double overhead_s = 0;  // intercept: launch + tail per kernel
  double max_rel_error = 0;
  int samples = 0;
};

/// Fits t = overhead + bytes / (efficiency · hbm_Bps) on (bytes, seconds) samples; a negative
/// intercept is refitted as 0.
BandwidthFit fit_memory_bandwidth(const std::vector<std::pair<double, double>>& bytes_seconds,
                                  double hbm_Bps);

/// Fits t = overhead + flops / (peak · efficiency) on (flops, seconds) samples.
double fit_flops_efficiency(const std::vector<std::pair<double, double>>& flops_seconds,
                            double peak_flops, double overhead_s);

/// An attention pass timed at one shape: the FLOPs the simulator counts, the keys each query
/// computes (the op's `n`) and the median time.
struct AttentionSample {
  double flops = 0;
  double keys = 0;
  double seconds = 0;
};
struct AttentionFit {
  double efficiency = 0;
  double overhead_keys = 0;  // 0: a flat rate (one key count, or no rise with keys)
};
/// Fits t = overhead + flops / (peak · efficiency · K / (K + overhead_keys)) (Profile's
/// attention curve) by least squares on relative residuals, when the samples span key counts
/// at least a factor of 2 apart and the curve passes an F-test at 5 % against the flat rate
/// (3 samples or more); otherwise, or when the rate does not rise with K, the flat rate of
/// fit_flops_efficiency with overhead_keys 0 (exact at the shapes that were timed).
AttentionFit fit_attention_rate(const std::vector<AttentionSample>& samples, double peak_flops,
                                double overhead_s);

/// Peak rates of the GPU the samples ran on (GPU preset datasheet numbers).
struct PeakRates {
  double dense_16bit_flops = 0;
  double dense_fp8_flops = 0;  // 0 when the GPU has none
  double fp32_flops = 0;       // non-tensor-core fp32; 0 = unknown (fp32 GEMM samples skipped)
  double hbm_Bps = 0;
};

/// How much faster than the GPU's datasheet peak a sample may be before it is refused as
/// impossible. The datasheet's tensor-core peak is stated at the boost clock (H100/H200: 1,830
/// MHz), and the SM clock may run up to 1,980 MHz in a short burst (8 % more).
inline constexpr double kPeakRateTolerance = 0.10;

/// A sample faster than the GPU can run it (check_sample_rates).
struct RateIssue {
  std::size_t index = 0;  // into the samples checked
  std::string what;       // the sample and its rate against the limit, for messages
  // false: an in-mix memory-bound sample above the HBM bandwidth, which its inputs kept in L2
  // may explain (a training step reuses its buffers); a warning, not a refusal.
  bool impossible = true;
};

/// One memory-bound kernel kind's own efficiency (KernelFits::memory_by_kind).
struct KindFit {
  double efficiency = 0;
  int samples = 0;
  double rms_rel_error = 0;         // of its samples, with its own efficiency
  double rms_rel_error_common = 0;  // the same samples priced with the common line
};

/// Everything the compute fields of a profile get from `kernels_measured`.
struct KernelFits {
  BandwidthFit memory;
  // Per memory-bound kind (softmax, dropout, layernorm, ..., adam): t = o + bytes / (e_kind ·
  // hbm_Bps) with one launch cost o shared by every kind and a slope per kind, fitted together
  // by linear least squares on relative residuals (a negative o is refitted as 0). The common
  // efficiency for kinds that were not timed is then the single slope through the same o.
  std::map<std::string, KindFit> memory_by_kind;
  // The fitted GEMM surface's residuals per op (the sample's label up to its first '.', so that
  // "qkv", "qkv.dgrad" and "qkv.wgrad" are one op; "grid" for the grid): rms and mean relative
  // error of predicted against measured time, over the GEMMs of the fitted dtype, batched ones
  // included (they are not fitted: their residual is out of sample).
  struct GemmResidual {
    int samples = 0;
    double rms_rel_error = 0;
    double mean_rel_error = 0;  // > 0: the surface predicts longer than measured
  };
  std::map<std::string, GemmResidual> gemm_by_op;
  double copy_bw_Bps = 0;  // the "copy" kind's slope as a bandwidth (0: no copy samples)
  double memory_joint_overhead_s = 0;
  double memory_joint_common_efficiency = 0;
  GemmFit gemm;  // peak_efficiency includes gemm_in_mix_factor
  bool gemm_from_base = false;  // the surface is base_surface's, scaled (gemm.samples = 0)
  std::string gemm_dtype;  // the dtype whose GEMM samples were fitted
  // GEMMs timed in the mix of a training step (labels "exec:...", calib::timed_in_mix): the
  // factor κ by which they ran faster (> 1) or slower (< 1) than the burst surface predicts,
  // fitted by least squares on relative residuals with the surface's shape and overhead kept;
  // 1 when there are none (or no burst GEMMs, then they are the surface).
  double gemm_in_mix_factor = 1;
  int gemm_in_mix_samples = 0;
  double attention_fwd_efficiency = 0;
  double attention_bwd_efficiency = 0;
  double attention_fwd_overhead_keys = 0;
  double attention_bwd_overhead_keys = 0;
  // Where samples were timed at head dimension 64 or less and above it, both passes: the curve
  // of those at 64 (Profile::attention_hd64); the fields above then fit the others alone.
  // All 0: no such split (the fields above fit every sample).
  double attention_hd64_fwd_efficiency = 0;
  double attention_hd64_bwd_efficiency = 0;
  double attention_hd64_fwd_overhead_keys = 0;
  double attention_hd64_bwd_overhead_keys = 0;
  std::vector<std::string> notes;     // kept fields and skipped samples, for the output
  std::vector<std::string> warnings;  // in-mix kinds fitted above the copy roofline
  std::vector<RateIssue> fast_in_mix;  // in-mix samples above the HBM bandwidth (warnings)
};

/// The samples whose rate is above what the GPU can do: a GEMM's 2·m·n·k·batch FLOPs faster
/// than (1 + kPeakRateTolerance) × the dense peak of its dtype; an attention pass faster than
/// twice that (the simulator counts every query × key product, a causal kernel computes about
/// half of them); a memory-bound kernel's bytes faster than (1 + kPeakRateTolerance) × the HBM
/// bandwidth (the burst bench cycles its inputs through more memory than L2 holds). In-mix
/// memory-bound samples (calib::timed_in_mix) above the HBM bandwidth are reported as warnings
/// (`impossible` false). A dtype without a peak (fp32, fp8 on a GPU without it) is not checked.
std::vector<RateIssue> check_sample_rates(const std::vector<MeasuredKernel>& samples,
                                          const PeakRates& peaks);

/// The factor κ of in-mix GEMM samples against a burst surface: t ≈ overhead + surface / κ.
double fit_in_mix_factor(const std::vector<GemmSample>& in_mix, const GemmFit& burst);

/// Fits all from a profile's samples. GEMM samples of `gemm_dtype` that are not batched are
/// fitted (batched attention GEMMs stay 16-bit in the simulator and are not mixed in). Throws
/// kInput when a needed kind has no samples, when a sample is faster than the GPU can run it
/// (check_sample_rates; the field is `kernels_measured[i].median_s`), and when an efficiency
/// comes out above 1 (the field is the profile's: `gemm_peak_efficiency`, ...).
///
/// `base_surface`: the surface that in-mix GEMM samples scale when the samples hold fewer than 2
/// burst GEMMs of the dtype (the base profile's e_max, d0 and GEMM fixed cost): it keeps its
/// shape and takes the in-mix factor, as a burst surface would (a few model shapes cannot
/// condition a surface). Without it such in-mix GEMMs are fitted as the surface themselves.
KernelFits fit_kernels(const std::vector<MeasuredKernel>& samples, const PeakRates& peaks,
                       const std::string& gemm_dtype = "bf16",
                       const GemmFit* base_surface = nullptr);

/// Writes the fitted constants into the compute fields of `p`.
void apply_kernel_fits(const KernelFits& f, Profile& p);

}  // namespace trainsim::calib
