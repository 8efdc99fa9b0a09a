// Calibration profile: how fast software runs on a given GPU and interconnect.
//
// A profile turns an op (GEMM shape, bytes moved, attention shape) or a collective scope into a
// duration. Built-in "datasheet" profiles derive from vendor peak numbers, an efficiency model
// (documented in docs/calibration.md) and published nccl-tests bandwidths; measured profiles
// (written by `trainsim calibrate`) replace the efficiency model with samples; nccl-tests imports
// add α–β fits per collective (calibrate/nccl_tests.h).
//
// Format: versioned JSON (`format_version`), every number with its unit in the key name. Loading
// validates every field and reports the file and the field on error.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainsim::calib {

inline constexpr int kProfileFormatVersion = 1;

/// α–β parameters of one communication scope (NVLink inside a server, the network across).
struct ScopeParams {
  double busbw_Bps = 0;       // bus bandwidth a ring collective achieves at large messages
  double step_latency_s = 0;  // per ring step (NCCL hwLat for the link type, Simple protocol)
};

/// α–β fit of one collective at one group size, measured with nccl-tests (calibrate/nccl_tests.h):
/// time = alpha_s + size · busbw_factor(op, ranks) / busbw_Bps.
struct MeasuredCollective {
  std::string op;  // all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | reduce |
                   // sendrecv
  int ranks = 0;
  double alpha_s = 0;
  double busbw_Bps = 0;
  // Every measured (size in bytes, time in µs); the fit itself uses those of at least 1 MiB.
  std::vector<std::pair<double, double>> samples;
};

/// Collectives a `collectives_measured` entry may name, comma-separated (for messages).
const char* measured_collective_ops();
bool is_measured_collective_op(std::string_view op);

/// Where measured collectives came from, so a profile can be traced back to its runs.
struct MeasuredProvenance {
  std::vector<std::string> source_files;
  std::string nccl_tests_version;  // the `# nThread ... nGpus ...` line of the first file
  std::string gpu_name;            // from the `#  Rank ... device ... [0x..] NAME` lines
  std::string date;                // UTC, ISO 8601, when the import ran
  std::string command_line;        // the trainsim command that wrote the profile
};

/// One kernel timed on one GPU by `trainsim calibrate kernels` (kernels/bench.h): the median of
/// its repeats, with the shape it ran at. Shapes by kind: a GEMM is [m×k]·[k×n] (batch > 1 for
/// batched GEMMs); attention is batch = sequences·heads, m queries, n keys, k head dim; a
/// memory-bound kernel runs over m rows of n elements (k = 0), the optimizers over n parameters.
struct MeasuredKernel {
  std::string op;     // one of measured_kernel_ops()
  std::string label;  // what the shape stands for: a model op ("qkv", "norm_attn") or "grid"
  std::string dtype;  // fp32 | fp16 | bf16 | fp8
  double m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;     // FLOPs the simulator counts for the shape (GEMM, attention), else 0
  double bytes = 0;     // HBM bytes the kernel moves (memory-bound kernels), else 0
  double median_s = 0;  // median over `repeats` timed launches
  int repeats = 0;
};

/// Label prefix of a sample timed in the mix of a real training step (`trainsim calibrate
/// from-execute`, kernels/exec/in_mix.h) rather than alone in a burst (`calibrate kernels`).
inline constexpr std::string_view kInMixLabelPrefix = "exec:";
inline bool timed_in_mix(const MeasuredKernel& k) { return k.label.starts_with(kInMixLabelPrefix); }

/// Where measured kernels came from.
struct KernelProvenance {
  std::string gpu_name;        // cudaDeviceProp::name
  std::string driver_version;  // "13.0" from cudaDriverGetVersion
  std::string cuda_version;    // runtime the binary links
  std::string nccl_version;    // "2.27.3", "" when NCCL was not linked
  std::string date;            // UTC, ISO 8601
  std::string command_line;
};

/// Kernel kinds a `kernels_measured` entry may name, comma-separated (for messages).
const char* measured_kernel_ops();
/// True for the kinds fitted by bandwidth (everything but gemm and attention_*).
bool is_memory_bound_kernel(const std::string& op);
/// Fused attention kernels a profile's `attention_by_kernel` may name, comma-separated (the
/// fused values of framework.attention_kernel).
const char* attention_kernel_names();
bool is_attention_kernel_name(std::string_view name);

struct Profile {
  std::string name;        // e.g. "datasheet-h100-sxm"
  std::string version;     // profile content version
  std::string gpu;         // GPU preset it was made for
  std::string provenance;  // where the numbers come from (datasheet, nccl-tests run, command line)

  // GEMM efficiency surface: eff(m,n,k) = gemm_peak_efficiency · Π_d d / (d + gemm_half_dim).
  double gemm_peak_efficiency = 0.8;
  double gemm_half_dim = 64;
  // Fused (FlashAttention-style) attention efficiency relative to dense peak: the rate a pass
  // levels off at when every thread block computes many key tiles.
  double attention_fwd_efficiency = 0.6;
  double attention_bwd_efficiency = 0.5;
  // Optional: each thread block's fixed cost (loading its query or key block, the softmax
  // statistics, writing its output or gradients), in key columns at that rate. A pass whose
  // queries compute K keys each runs at efficiency · K / (K + overhead_keys): one thread block
  // per 128-row block spends (overhead + its keys) at the tile rate, so short sequences and
  // causal masks (whose first blocks compute few keys) run below the plateau. 0: a flat rate (a
  // profile measured at the model's own shapes, or one without the curve).
  double attention_fwd_overhead_keys = 0;
  double attention_bwd_overhead_keys = 0;
  // Optional: the same for named fused kernels that run at a rate of their own on this GPU
  // (keys from attention_kernel_names(): FlashAttention-2 on Hopper, which has no wgmma path;
  // the 2022 Triton kernel); a kernel not listed runs at the two rates above.
  // Optional, both: the curve of a kernel at head dimension 64 (`hd64`, JSON `head_dim_64`; the
  // fields above are its curve at 128, the head dimension its charts were read at). A kernel's
  // tiles are sized by the head dimension, so its rate depends on it: FlashAttention(-1) is
  // faster at 64 than at 128 and FlashAttention-2 slower (FlashAttention-2 paper Figs. 4 and 7).
  // A head dimension between 64 and 128 interpolates the two efficiencies linearly; below 64
  // takes the 64 curve, above 128 the 128 one. hd64.fwd = 0: no head-dimension dependence.
  struct Curve {
    double fwd = 0;
    double bwd = 0;
    double fwd_overhead_keys = 0;
    double bwd_overhead_keys = 0;
  };
  struct AttentionRate {
    double fwd = 0;
    double bwd = 0;
    double fwd_overhead_keys = 0;
    double bwd_overhead_keys = 0;
    Curve hd64{};
    /// The efficiency of a pass whose queries compute `keys` keys each (see above).
    static double at(double efficiency, double overhead_keys, double keys) {
      return overhead_keys > 0 && keys > 0 ? efficiency * keys / (keys + overhead_keys)
                                           : efficiency;
    }
    /// The weight of the head-dimension-64 curve at `head_dim` (0: none, or head_dim 0).
    double hd64_weight(double head_dim) const {
      if (hd64.fwd <= 0 || head_dim <= 0 || head_dim >= 128) return 0.0;
      return head_dim <= 64 ? 1.0 : (128.0 - head_dim) / 64.0;
    }
    double fwd_at(double keys, double head_dim = 0) const {
      const double w = hd64_weight(head_dim);
      const double e = at(fwd, fwd_overhead_keys, keys);
      return w > 0 ? (1 - w) * e + w * at(hd64.fwd, hd64.fwd_overhead_keys, keys) : e;
    }
    double bwd_at(double keys, double head_dim = 0) const {
      const double w = hd64_weight(head_dim);
      const double e = at(bwd, bwd_overhead_keys, keys);
      return w > 0 ? (1 - w) * e + w * at(hd64.bwd, hd64.bwd_overhead_keys, keys) : e;
    }
  };
  // The profile's own rates at head dimension 64 (JSON compute.attention_head_dim_64).
  Curve attention_hd64{};
  std::map<std::string, AttentionRate, std::less<>> attention_by_kernel;
  AttentionRate attention_rate(std::string_view kernel) const {
    const auto it = attention_by_kernel.find(kernel);
    return it == attention_by_kernel.end()
               ? AttentionRate{attention_fwd_efficiency, attention_bwd_efficiency,
                               attention_fwd_overhead_keys, attention_bwd_overhead_keys,
                               attention_hd64}
               : it->second;
  }
  // Fraction of datasheet HBM bandwidth that memory-bound kernels achieve.
  double memory_bw_efficiency = 0.8;
  // Optional, measured: the same per kernel kind (keys from measured_kernel_ops(), memory-bound
  // kinds only), for the kinds `calibrate kernels` timed; a kind not listed uses
  // memory_bw_efficiency. Datasheet profiles have none.
  std::map<std::string, double, std::less<>> memory_bw_efficiency_by_kind;
  double memory_efficiency(std::string_view kind) const {
    if (memory_bw_efficiency_by_kind.empty()) return memory_bw_efficiency;
    const auto it = memory_bw_efficiency_by_kind.find(kind);
    return it == memory_bw_efficiency_by_kind.end() ? memory_bw_efficiency : it->second;
  }
  // Fixed cost per kernel on the GPU timeline (launch + tail), seconds.
  double kernel_overhead_s = 4e-6;
  // Fixed cost of one GEMM (launch, prologue, epilogue, tail), seconds; absent: kernel_overhead_s.
  // `calibrate kernels` fits it with the GEMM surface (calibrate/gemm_fit.h), since a GEMM's fixed
  // cost is not an element-wise kernel's; datasheet profiles leave it out.
  std::optional<double> gemm_overhead_s;
  double gemm_launch_s() const { return gemm_overhead_s.value_or(kernel_overhead_s); }
  // Measured: the copy kernel's bandwidth (bytes read + written per second, the slope of its
  // fitted line), the roofline the memory-bound kinds are read against; absent in datasheet
  // profiles and in measured ones without copy samples.
  std::optional<double> copy_bw_Bps;

  ScopeParams nvlink;                 // intra-server ring collectives
  double nvls_busbw_Bps = 0;          // NVLS all-reduce bus bandwidth; 0 = not available
  double nic_efficiency = 0.95;       // achieved / line rate per NIC for large transfers
  double net_step_latency_s = 14e-6;  // per inter-node ring step (NCCL Ring/Simple NET hwLat)
  double collective_base_latency_s = 8.4e-6;  // per collective launch (NCCL baseLat Ring/Simple)
  // Optional: NCCL's collective channels on this GPU's server ("N coll channels" in an
  // NCCL_DEBUG=INFO log), one thread block each: the SMs a large collective holds while it
  // transfers, which the compute beside it loses (collectives.comm_sms overrides it). 0: unknown
  // (an overlapped collective then holds exec::kDefaultNcclChannels).
  int nccl_channels = 0;

  // Host-side cost: per-iteration stall when the data pipeline is synchronous.
  double data_loading_s = 0.0;

  // Optional: α–β fits of imported nccl-tests runs ("collectives_measured" in the JSON).
  std::vector<MeasuredCollective> collectives_measured;
  MeasuredProvenance measured_provenance;  // meaningful only when collectives_measured is set

  // Optional: raw kernel timings the compute fields were fitted from ("kernels_measured").
  std::vector<MeasuredKernel> kernels_measured;
  KernelProvenance kernels_provenance;  // meaningful only when kernels_measured is set
};

/// Built-in datasheet profile for a GPU preset; throws trainsim::Error if there is none.
Profile builtin_profile(const std::string& gpu_preset);
/// Names of all built-in profiles.
std::string builtin_profile_names();
/// Every built-in profile, in the order of builtin_profile_names().
std::vector<Profile> builtin_profiles();
/// Loads a profile JSON file; errors name the file and the field.
Profile load_profile(const std::string& path);
/// As load_profile, for the text of a profile; `path` names it in messages.
Profile parse_profile(std::string_view text, const std::string& path);
/// Writes a profile as JSON (round-trips through load_profile).
std::string profile_to_json(const Profile& p);

}  // namespace trainsim::calib
