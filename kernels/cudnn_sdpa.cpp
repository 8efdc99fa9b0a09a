// cuDNN fused SDPA through the backend API of cudnn_graph.h (kernels/cudnn_sdpa.h).
//
// Where the facts come from. cuDNN's fused flash-attention engines match an operation graph; the
// graph below is the one NVIDIA's cudnn-frontend (github.com/NVIDIA/cudnn-frontend, read at commit
// 3929da2) lowers its `sdpa` / `sdpa_backward` nodes to when it does not use the newer single
// SDPA operation (which needs cuDNN ≥ 9.13.1), so it works from cuDNN 9.0 on. Files read:
//  [F1] include/cudnn_frontend/node/scaled_dot_product_flash_attention.h — CompositeSDPANode::
//       expand_node (forward: K given as Kᵀ by swapping the last two dims and strides; bmm1 Q·Kᵀ,
//       output [b,hq,sq,skv] strides {hq·sq·skv, sq·skv, skv, 1}; MUL by the attention scale as a
//       pass-by-value fp32 scalar; mask; softmax; the softmax output is given the I/O data type
//       "by cudnn backend requirement" as bmm2's A; bmm2 with V into O) and
//       CompositeSDPABackwardNode::expand_node (backward: K and V both transposed; softmax_sum =
//       reduce_add(dO∘O)·1.0 as a NON-virtual fp32 [b,hq,sq,1] tensor in the workspace; S = Q·Kᵀ·
//       scale − Stats, masked, exp; dV = reshape(P)ᵀ·dO; dP = dO·Vᵀ;
//       dS = (dP − softmax_sum)·P·scale;
//       dK = reshape(dS)ᵀ·Q; dQ_accum = dS·reshape(Kᵀ) as a NON-virtual fp32 [b,hq,sq,d] tensor in
//       the workspace, then dQ = IDENTITY(dQ_accum); GQA: full-head dK/dV in the I/O type then a
//       REDUCTION ADD over the head dim; before cuDNN 9.6.0 the frontend zero-fills dQ_accum).
//  [F2] include/cudnn_frontend/node/softmax.h — CompositeSoftmaxNode: max = REDUCTION MAX →
//       [b,h,sq,1] strides {h·sq, sq, 1, 1}; SUB; EXP; sum = REDUCTION ADD; Stats = ADD(max,
//       LOG(sum)); out = DIV(exp, sum). So Stats = max + ln Σ exp(s − max): the natural-log
//       log-sum-exp of the scaled, masked scores, the own kernel's lse.
//  [F3] include/cudnn_frontend/utils/attn_score_modifiers.h — sliding_window_mask: causal is a
//       right bound 0 (CMP_GE(row, col)), bottom-right alignment adds s_kv and subtracts s_q
//       (int32 pass-by-value scalars) from the row index; a left bound w keeps col + w > row
//       (CMP_GT) with w a float scalar, w − s_kv + s_q when bottom-right with fixed lengths;
//       masked scores become −inf (float lowest before cuDNN 9.10, get_negative_inf_value).
//  [F4] include/cudnn_frontend/node/diagonal_band_mask.h — CompositeDiagonalBandMaskNode: each
//       bound makes its own GEN_INDEX axis 2 (row) and axis 3 (col) with INT32 outputs, the
//       ADD/SUB of the scalars in INT32 (left bound: in the bound's type), the comparison with
//       BOOLEAN compute/output, and BINARY_SELECT(score, −inf, keep).
//  [F5] include/cudnn_frontend/node/sdpa_support_surface.h and the backward's pre_validate_node
//       in [F1] — support surface: hq % hk == 0 (GQA/MQA), head dims multiple of 8 and ≤ 128 for
//       the backward (≤ 256 forward on Hopper), sm80+, not cuDNN 9.10.0/9.10.1, bottom-right
//       causal needs sq ≤ skv and (before 9.6.0) sq, skv multiples of 64, sliding window with
//       bottom-right needs sq == skv before 9.6.0 and sq ≤ skv always.
//  [F6] include/cudnn_frontend_Tensor.h, node/pointwise.h, node/reshape.h, node/matmul.h,
//       node/reduction.h, cudnn_frontend_OperationGraph.h, cudnn_frontend_Heuristics.h,
//       cudnn_frontend_ExecutionPlan.h, graph_properties.h, graph_interface.h — the backend
//       attributes each object sets: tensors DATA_TYPE, DIMENSIONS, STRIDES, UNIQUE_ID,
//       BYTE_ALIGNMENT 16, IS_VIRTUAL / IS_BY_VALUE only when true; scalars are 1×1×1×1 (stride 1)
//       by-value tensors whose variant-pack pointer is a HOST address of the value; virtual tensors
//       default to the fp32 intermediate type; pointwise MODE + MATH_PREC (+ AXIS for GEN_INDEX)
//       with X, B, T inputs in that order and Y; MATMUL COMP_TYPE fp32; REDUCTION OPERATOR +
//       COMP_TYPE; RESHAPE keeps its input's data type; the operation graph gets the handle and
//       the ops; heuristics (mode A, then fallback) give engine configs, the first whose
//       execution plan finalizes is used; variant pack = UIDs, pointers, workspace.
//  [F7] NVIDIA docs: cuDNN developer guide, Graph API, "Specialized Runtime Fusion Engines" /
//       "Fused Flash Attention fprop/bprop" (docs.nvidia.com/deeplearning/cudnn/developer/
//       graph-api.html) and the frontend's Attention support matrix (docs.nvidia.com/
//       deeplearning/cudnn/frontend/latest/operations/Attention.html, for backend 9.18.1): sm80+,
//       fp16/bf16, Stats output for training, Ampere/Ada bprop d ≤ 128, Hopper d ≤ 256.
// The code is written from those facts; none of the frontend's code is used.
#include "kernels/cudnn_sdpa.h"

#include <cudnn_graph.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "kernels/cuda_check.h"
#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

// ---------------------------------------------------------------------------------------------
// The library, loaded at run time.

struct Api {
  void* lib = nullptr;
  std::size_t (*GetVersion)() = nullptr;
  cudnnStatus_t (*Create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*Destroy)(cudnnHandle_t) = nullptr;
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(cudnnStatus_t) = nullptr;
  void (*GetLastErrorString)(char*, std::size_t) = nullptr;  // optional
  cudnnStatus_t (*CreateDescriptor)(cudnnBackendDescriptorType_t,
                                    cudnnBackendDescriptor_t*) = nullptr;
  cudnnStatus_t (*DestroyDescriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*SetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, const void*) = nullptr;
  cudnnStatus_t (*GetAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, int64_t*, void*) = nullptr;
  cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t,
                           cudnnBackendDescriptor_t) = nullptr;
  std::size_t version = 0;
  std::string why;  // empty when usable
};

template <typename F>
bool bind(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
  return f != nullptr;
}

const Api& api() {
  static const Api a = [] {
    Api r;
    const char* names[] = {"libcudnn.so.9", "libcudnn.so"};
    std::string errors;
    for (const char* n : names) {
      r.lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (r.lib) break;
      const char* e = dlerror();
      errors += std::string(errors.empty() ? "" : "; ") + (e ? e : n);
    }
    if (!r.lib) {
      r.why = "cannot load libcudnn.so.9 (" + errors +
              "); install cuDNN 9 or put its lib directory on LD_LIBRARY_PATH";
      return r;
    }
    std::string missing;
    bind(r.lib, "cudnnGetVersion", r.GetVersion, missing);
    bind(r.lib, "cudnnCreate", r.Create, missing);
    bind(r.lib, "cudnnDestroy", r.Destroy, missing);
    bind(r.lib, "cudnnSetStream", r.SetStream, missing);
    bind(r.lib, "cudnnGetErrorString", r.GetErrorString, missing);
    bind(r.lib, "cudnnBackendCreateDescriptor", r.CreateDescriptor, missing);
    bind(r.lib, "cudnnBackendDestroyDescriptor", r.DestroyDescriptor, missing);
    bind(r.lib, "cudnnBackendSetAttribute", r.SetAttribute, missing);
    bind(r.lib, "cudnnBackendGetAttribute", r.GetAttribute, missing);
    bind(r.lib, "cudnnBackendFinalize", r.Finalize, missing);
    bind(r.lib, "cudnnBackendExecute", r.Execute, missing);
    r.GetLastErrorString = reinterpret_cast<decltype(r.GetLastErrorString)>(
        dlsym(r.lib, "cudnnGetLastErrorString"));
    if (!missing.empty()) {
      r.why = "libcudnn.so.9 lacks " + missing;
      return r;
    }
    r.version = r.GetVersion();
    if (r.version < 90000) {
      r.why = "libcudnn reports version " + std::to_string(r.version) + ", cuDNN >= 9.0 needed";
    }
    return r;
  }();
  return a;
}

// The error every failed cuDNN call becomes inside this file; the public functions turn it into
// trainsim::Error or a `why` text.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudnnStatus_t st, const std::string& what) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  const Api& a = api();
  std::string msg = what + ": " + (a.GetErrorString ? a.GetErrorString(st) : "cuDNN error") +
                    " (status " + std::to_string(static_cast<int>(st)) + ")";
  if (a.GetLastErrorString) {
    char buf[1024] = {};
    a.GetLastErrorString(buf, sizeof buf);
    if (buf[0]) msg += " — cuDNN says: " + std::string(buf);
  }
  throw Failure(msg);
}

// Deprecated enumerators in cuDNN ≥ 9.x headers, still needed by 9.0 (the handle of the graph
// and of the plan); spelled by value to keep the build free of deprecation warnings.
constexpr auto kAttrOpGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);
constexpr auto kAttrPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);

// ---------------------------------------------------------------------------------------------
// Descriptors with ownership.

using Desc = std::shared_ptr<void>;

Desc make_desc(cudnnBackendDescriptorType_t type, const std::string& what) {
  const Api& a = api();
  cudnnBackendDescriptor_t d = nullptr;
  check(a.CreateDescriptor(type, &d), what + ": cudnnBackendCreateDescriptor");
  return Desc(d, [](void* p) {
    api().DestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(p));
  });
}

void set(const Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         int64_t n, const void* v, const std::string& what) {
  check(api().SetAttribute(d.get(), name, type, n, v), what);
}

void finalize(const Desc& d, const std::string& what) {
  check(api().Finalize(d.get()), what + ": cudnnBackendFinalize");
}

using Dims = std::array<int64_t, 4>;

// UIDs of the tensors the caller supplies (and the by-value scalars); virtual tensors count up
// from kFirstVirtual.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV,
  kSoftmaxSum, kDQAccum,                                       // in the workspace
  kScale, kOne, kNegInf, kSeqKv, kSeqQ, kLeftBound,             // by value (host)
  kFirstVirtual = 1000,
};

// Graph assembly: tensors by UID, operations in the order they are added.
class Graph {
 public:
  explicit Graph(cudnnDataType_t io) : io_(io) {}

  int64_t tensor(const std::string& name, cudnnDataType_t dt, const Dims& dim, const Dims& stride,
                 int64_t uid, bool is_virtual = false, bool by_value = false) {
    const std::string w = "tensor '" + name + "'";
    Desc t = make_desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR, w);
    const int64_t align = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, w + ": DATA_TYPE");
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.data(), w + ": DIMENSIONS");
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride.data(), w + ": STRIDES");
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, w + ": UNIQUE_ID");
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, w + ": BYTE_ALIGNMENT");
    if (is_virtual) {
      const bool yes = true;
      set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, w + ": IS_VIRTUAL");
    }
    if (by_value) {
      const bool yes = true;
      set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, w + ": IS_BY_VALUE");
    }
    finalize(t, w);
    tensors_[uid] = t;
    names_[uid] = name;
    dims_[uid] = dim;
    strides_[uid] = stride;
    return uid;
  }
  /// A virtual intermediate; fp32 unless said otherwise ([F6]: the intermediate type).
  int64_t virt(const std::string& name, const Dims& dim, const Dims& stride,
               cudnnDataType_t dt = CUDNN_DATA_FLOAT) {
    return tensor(name, dt, dim, stride, next_virtual_++, true);
  }
  /// A pass-by-value scalar (1×1×1×1, [F6]).
  int64_t scalar(const std::string& name, cudnnDataType_t dt, int64_t uid) {
    return tensor(name, dt, {1, 1, 1, 1}, {1, 1, 1, 1}, uid, false, true);
  }

  /// Pointwise y = mode(x[, b[, t]]); `axis` only for GEN_INDEX.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                 int64_t x, int64_t b, int64_t t, int64_t y, int64_t axis = -1) {
    const std::string w = "pointwise '" + name + "'";
    Desc pw = make_desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, w);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, w + ": MODE");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, w + ": MATH_PREC");
    if (mode == CUDNN_POINTWISE_GEN_INDEX) {
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, w + ": AXIS");
    }
    finalize(pw, w + " descriptor");
    Desc op = make_desc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, w);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, w + ": PW_DESCRIPTOR");
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, at(x), w + ": XDESC (" + names_[x] + ")");
    if (b) {
      set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, at(b), w + ": BDESC (" + names_[b] + ")");
    }
    if (t) {
      set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, at(t), w + ": TDESC (" + names_[t] + ")");
    }
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, at(y), w + ": YDESC (" + names_[y] + ")");
    finalize(op, w);
    keep_.push_back(pw);
    ops_.push_back(op);
  }
  /// A virtual output of the same dims/strides as `like` (fp32 unless said otherwise).
  int64_t pw(const std::string& name, cudnnPointwiseMode_t mode, int64_t x, int64_t b = 0,
             int64_t t = 0, cudnnDataType_t prec = CUDNN_DATA_FLOAT,
             cudnnDataType_t out = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    const int64_t y = virt(name, dims_[x], strides_[x], out);
    pointwise(name, mode, prec, x, b, t, y, axis);
    return y;
  }

  void matmul(const std::string& name, int64_t a, int64_t b, int64_t c) {
    const std::string w = "matmul '" + name + "'";
    Desc mm = make_desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR, w);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, w + ": COMP_TYPE");
    finalize(mm, w + " descriptor");
    Desc op = make_desc(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, w);
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, at(a), w + ": ADESC (" + names_[a] + ")");
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, at(b), w + ": BDESC (" + names_[b] + ")");
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, at(c), w + ": CDESC (" + names_[c] + ")");
    set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, w + ": DESC");
    finalize(op, w);
    keep_.push_back(mm);
    ops_.push_back(op);
  }

  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, int64_t x, int64_t y) {
    const std::string w = "reduction '" + name + "'";
    Desc rd = make_desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, w);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode,
        w + ": OPERATOR");
    set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, w + ": COMP_TYPE");
    finalize(rd, w + " descriptor");
    Desc op = make_desc(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, w);
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, at(x), w + ": XDESC (" + names_[x] + ")");
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, at(y), w + ": YDESC (" + names_[y] + ")");
    set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd, w + ": DESC");
    finalize(op, w);
    keep_.push_back(rd);
    ops_.push_back(op);
  }

  void reshape(const std::string& name, int64_t x, int64_t y) {
    const std::string w = "reshape '" + name + "'";
    Desc op = make_desc(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, w);
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, at(x), w + ": XDESC (" + names_[x] + ")");
    set_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, at(y), w + ": YDESC (" + names_[y] + ")");
    finalize(op, w);
    ops_.push_back(op);
  }

  /// A non-virtual tensor the caller supplies.
  int64_t t4(const std::string& name, cudnnDataType_t dt, const Dims& dim, const Dims& stride,
             int64_t uid) {
    return tensor(name, dt, dim, stride, uid);
  }
  int64_t v4(const std::string& name, const Dims& dim, const Dims& stride,
             cudnnDataType_t dt = CUDNN_DATA_FLOAT) {
    return virt(name, dim, stride, dt);
  }

  cudnnDataType_t io() const { return io_; }
  const std::vector<Desc>& ops() const { return ops_; }
  std::vector<Desc>& keep() { return keep_; }
  std::map<int64_t, Desc>& tensors() { return tensors_; }

 private:
  const Desc& at(int64_t uid) const {
    const auto it = tensors_.find(uid);
    if (it == tensors_.end()) {
      throw Failure("internal: tensor uid " + std::to_string(uid) + " unknown");
    }
    return it->second;
  }
  static void set_desc(const Desc& op, cudnnBackendAttributeName_t name, const Desc& d,
                       const std::string& what) {
    cudnnBackendDescriptor_t raw = d.get();
    set(op, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, what);
  }

  cudnnDataType_t io_;
  int64_t next_virtual_ = kFirstVirtual;
  std::map<int64_t, Desc> tensors_;
  std::map<int64_t, std::string> names_;
  std::map<int64_t, Dims> dims_, strides_;
  std::vector<Desc> ops_, keep_;
};

// ---------------------------------------------------------------------------------------------
// The problem in cuDNN's 4-D terms.

// b = k/v batch-heads, h = query heads per k/v head (GQA group), hk = 1: query batch-head
// bq = n·h + j reads k/v batch-head n, which is the reference's bq / q_per_kv.
struct Geometry {
  int64_t b, h, sq, sk, d;
  bool causal, bottom_right;
  int window;  // > 0: sliding window (only with causal)
};

Geometry geometry(const ref::AttentionShape& s) {
  Geometry g{};
  g.h = std::max(1, s.q_per_kv);
  g.b = s.bh / g.h;
  g.sq = s.sq;
  g.sk = s.sk;
  g.d = s.d;
  g.causal = s.causal;
  g.bottom_right = s.causal && s.sk != s.sq;
  g.window = s.causal ? std::max(0, s.window) : 0;
  return g;
}

// Host values of the by-value scalars (their addresses go into the variant pack).
struct Scalars {
  float one = 1.0f;
  float neg_inf = -std::numeric_limits<float>::infinity();
  std::int32_t seq_kv = 0, seq_q = 0;
  float left_bound = 0;
};

// Adds the mask ops to scores `s` ([F3], [F4]); returns the masked scores.
int64_t add_mask(Graph& g, const Geometry& geo, int64_t s, bool& uses_seq, bool& uses_left) {
  uses_seq = uses_left = false;
  if (!geo.causal) return s;
  const int64_t neg_inf = kNegInf;
  // Right bound 0 (causal): keep row (+ skv − sq when bottom-right) >= col.
  {
    int64_t row = g.pw("causal row index", CUDNN_POINTWISE_GEN_INDEX, s, 0, 0, CUDNN_DATA_FLOAT,
                       CUDNN_DATA_INT32, 2);
    const int64_t col = g.pw("causal col index", CUDNN_POINTWISE_GEN_INDEX, s, 0, 0,
                             CUDNN_DATA_FLOAT, CUDNN_DATA_INT32, 3);
    if (geo.bottom_right) {
      uses_seq = true;
      row = g.pw("row + s_kv", CUDNN_POINTWISE_ADD, row, kSeqKv, 0, CUDNN_DATA_INT32,
                 CUDNN_DATA_INT32);
      row = g.pw("row - s_q", CUDNN_POINTWISE_SUB, row, kSeqQ, 0, CUDNN_DATA_INT32,
                 CUDNN_DATA_INT32);
    }
    const int64_t keep = g.pw("row >= col", CUDNN_POINTWISE_CMP_GE, row, col, 0,
                              CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
    s = g.pw("causal select", CUDNN_POINTWISE_BINARY_SELECT, s, neg_inf, keep);
  }
  // Left bound (sliding window): keep col + (window − skv + sq) > row.
  if (geo.window > 0) {
    uses_left = true;
    const int64_t row = g.pw("window row index", CUDNN_POINTWISE_GEN_INDEX, s, 0, 0,
                             CUDNN_DATA_FLOAT, CUDNN_DATA_INT32, 2);
    int64_t col = g.pw("window col index", CUDNN_POINTWISE_GEN_INDEX, s, 0, 0, CUDNN_DATA_FLOAT,
                       CUDNN_DATA_INT32, 3);
    col = g.pw("col + window", CUDNN_POINTWISE_ADD, col, kLeftBound, 0, CUDNN_DATA_FLOAT,
               CUDNN_DATA_FLOAT);
    const int64_t keep = g.pw("col + window > row", CUDNN_POINTWISE_CMP_GT, col, row, 0,
                              CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
    s = g.pw("window select", CUDNN_POINTWISE_BINARY_SELECT, s, neg_inf, keep);
  }
  return s;
}

// Only the scalars the graph uses: every non-virtual tensor goes into the variant pack.
void add_scalars(Graph& g, bool causal, bool uses_seq, bool uses_left, bool uses_one) {
  g.scalar("attn_scale", CUDNN_DATA_FLOAT, kScale);
  if (causal) g.scalar("-inf", CUDNN_DATA_FLOAT, kNegInf);
  if (uses_one) g.scalar("one", CUDNN_DATA_FLOAT, kOne);
  if (uses_seq) {
    g.scalar("s_kv", CUDNN_DATA_INT32, kSeqKv);
    g.scalar("s_q", CUDNN_DATA_INT32, kSeqQ);
  }
  if (uses_left) g.scalar("window (left bound)", CUDNN_DATA_FLOAT, kLeftBound);
}

// Forward graph, [F1] CompositeSDPANode + [F2] + [F3]/[F4].
void build_forward(Graph& g, const Geometry& x) {
  const auto io = g.io();
  const int64_t b = x.b, h = x.h, sq = x.sq, sk = x.sk, d = x.d;
  g.t4("Q", io, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, kQ);
  g.t4("K^T", io, {b, 1, d, sk}, {sk * d, sk * d, 1, d}, kK);  // K with dims 2, 3 swapped
  g.t4("V", io, {b, 1, sk, d}, {sk * d, sk * d, d, 1}, kV);
  g.t4("O", io, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, kO);
  g.t4("Stats", CUDNN_DATA_FLOAT, {b, h, sq, 1}, {h * sq, sq, 1, 1}, kStats);
  const bool uses_seq = x.bottom_right, uses_left = x.window > 0;
  add_scalars(g, x.causal, uses_seq, uses_left, false);

  const Dims ss{b, h, sq, sk}, ss_stride{h * sq * sk, sq * sk, sk, 1};
  const Dims row{b, h, sq, 1}, row_stride{h * sq, sq, 1, 1};
  const int64_t s0 = g.v4("S = Q.K^T", ss, ss_stride);
  g.matmul("bmm1 Q.K^T", kQ, kK, s0);
  int64_t s = g.pw("S * scale", CUDNN_POINTWISE_MUL, s0, kScale);
  bool seq = false, left = false;
  s = add_mask(g, x, s, seq, left);
  // Softmax with Stats ([F2]).
  const int64_t mx = g.v4("row max", row, row_stride);
  g.reduction("row max", CUDNN_REDUCE_TENSOR_MAX, s, mx);
  const int64_t z = g.pw("S - max", CUDNN_POINTWISE_SUB, s, mx);
  const int64_t e = g.pw("exp(S - max)", CUDNN_POINTWISE_EXP, z);
  const int64_t sum = g.v4("row sum exp", row, row_stride);
  g.reduction("row sum exp", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t lg = g.pw("log(sum)", CUDNN_POINTWISE_LOG, sum);
  g.pointwise("Stats = max + log(sum)", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, lg, 0, kStats);
  // P in the I/O type: bmm2's A ([F1]).
  const int64_t p = g.v4("P = exp / sum", ss, ss_stride, io);
  g.pointwise("P = exp / sum", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, sum, 0, p);
  g.matmul("bmm2 P.V", p, kV, kO);
}

// Backward graph, [F1] CompositeSDPABackwardNode (no dropout, bias, padding).
void build_backward(Graph& g, const Geometry& x) {
  const auto io = g.io();
  const int64_t b = x.b, h = x.h, sq = x.sq, sk = x.sk, d = x.d;
  const Dims q_dim{b, h, sq, d}, q_stride{h * sq * d, sq * d, d, 1};
  const Dims kv_dim{b, 1, sk, d}, kv_stride{sk * d, sk * d, d, 1};
  const Dims kt_dim{b, 1, d, sk}, kt_stride{sk * d, sk * d, 1, d};
  g.t4("Q", io, q_dim, q_stride, kQ);
  g.t4("K^T", io, kt_dim, kt_stride, kK);
  g.t4("V^T", io, kt_dim, kt_stride, kV);
  g.t4("O", io, q_dim, q_stride, kO);
  g.t4("dO", io, q_dim, q_stride, kDO);
  g.t4("Stats", CUDNN_DATA_FLOAT, {b, h, sq, 1}, {h * sq, sq, 1, 1}, kStats);
  g.t4("dQ", io, q_dim, q_stride, kDQ);
  g.t4("dK", io, kv_dim, kv_stride, kDK);
  g.t4("dV", io, kv_dim, kv_stride, kDV);
  g.t4("softmax_sum", CUDNN_DATA_FLOAT, {b, h, sq, 1}, {h * sq, sq, 1, 1}, kSoftmaxSum);
  g.t4("dQ_accum", CUDNN_DATA_FLOAT, q_dim, q_stride, kDQAccum);
  add_scalars(g, x.causal, x.bottom_right, x.window > 0, true);

  const Dims ss{b, h, sq, sk}, ss_stride{h * sq * sk, sq * sk, sk, 1};
  const Dims st{b, h, sk, sq}, st_stride{h * sq * sk, sq * sk, 1, sk};  // transposed view
  const Dims row{b, h, sq, 1}, row_stride{h * sq, sq, 1, 1};
  // softmax_sum = rowsum(dO ∘ O) · 1 ([F1]: the frontend's virtual product uses these strides).
  const int64_t prod = g.v4("dO*O", q_dim, {h * sq * d, sq * d, h * d, 1});
  g.pointwise("dO*O", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, kDO, kO, 0, prod);
  const int64_t rs = g.v4("rowsum(dO*O)", row, row_stride);
  g.reduction("rowsum(dO*O)", CUDNN_REDUCE_TENSOR_ADD, prod, rs);
  g.pointwise("softmax_sum = rowsum * 1", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, rs, kOne, 0,
              kSoftmaxSum);
  // P = exp(S·scale − Stats), masked.
  const int64_t s0 = g.v4("S = Q.K^T", ss, ss_stride);
  g.matmul("Q.K^T", kQ, kK, s0);
  int64_t s = g.pw("S * scale", CUDNN_POINTWISE_MUL, s0, kScale);
  s = g.pw("S - Stats", CUDNN_POINTWISE_SUB, s, kStats);
  bool seq = false, left = false;
  s = add_mask(g, x, s, seq, left);
  const int64_t p = g.pw("P = exp(S - Stats)", CUDNN_POINTWISE_EXP, s);
  // dV = Pᵀ·dO (GQA: over full query heads, then summed over the group).
  const int64_t pt = g.v4("P^T", st, st_stride, io);
  g.reshape("P^T", p, pt);
  if (h == 1) {
    g.matmul("P^T.dO", pt, kDO, kDV);
  } else {
    const int64_t full = g.v4("dV full heads", {b, h, sk, d}, {h * sk * d, sk * d, d, 1}, io);
    g.matmul("P^T.dO", pt, kDO, full);
    g.reduction("dV sum over group", CUDNN_REDUCE_TENSOR_ADD, full, kDV);
  }
  // dS = (dO·Vᵀ − softmax_sum) ∘ P · scale.
  const int64_t dp = g.v4("dP = dO.V^T", ss, ss_stride);
  g.matmul("dO.V^T", kDO, kV, dp);
  int64_t ds = g.pw("dP - softmax_sum", CUDNN_POINTWISE_SUB, dp, kSoftmaxSum);
  ds = g.pw("(dP - softmax_sum) * P", CUDNN_POINTWISE_MUL, ds, p);
  ds = g.pw("dS * scale", CUDNN_POINTWISE_MUL, ds, kScale);
  // dK = dSᵀ·Q.
  const int64_t dst = g.v4("dS^T", st, st_stride, io);
  g.reshape("dS^T", ds, dst);
  if (h == 1) {
    g.matmul("dS^T.Q", dst, kQ, kDK);
  } else {
    const int64_t full = g.v4("dK full heads", {b, h, sk, d}, {h * sk * d, sk * d, d, 1}, io);
    g.matmul("dS^T.Q", dst, kQ, full);
    g.reduction("dK sum over group", CUDNN_REDUCE_TENSOR_ADD, full, kDK);
  }
  // dQ = dS·K through the fp32 accumulator.
  const int64_t k = g.v4("K (reshaped K^T)", kv_dim, kv_stride, io);
  g.reshape("K", kK, k);
  g.matmul("dS.K", ds, k, kDQAccum);
  g.pointwise("dQ = dQ_accum", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, kDQAccum, 0, 0, kDQ);
}

// ---------------------------------------------------------------------------------------------
// Plans and their cache.

struct Plan {
  bool ok = false;
  std::string why;           // when !ok
  std::vector<Desc> keep;    // everything the plan was built from
  Desc plan;
  int64_t plan_ws = 0;       // the execution plan's workspace
  std::size_t sum_off = 0, acc_off = 0, bytes = 0;  // layout of our scratch (backward)
  std::vector<int64_t> uids; // non-virtual tensors of the graph (incl. by-value)
  Scalars scalars;
  void* buffer = nullptr;    // scratch allocated on first launch without a caller workspace
};

struct DeviceState {
  cudnnHandle_t handle = nullptr;
  std::string why;  // handle / device problem
  bool checked = false;
};

std::mutex g_mu;
std::map<int, DeviceState> g_devices;
using Key = std::tuple<int, int, int, int, int, int, int, bool, int, int>;
std::map<Key, std::shared_ptr<Plan>> g_plans;

std::size_t align_up(std::size_t x) { return (x + 255) / 256 * 256; }

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::kF16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

// Under g_mu. The handle of the current device, or nullptr with `why`.
DeviceState& device_state(int dev) {
  DeviceState& st = g_devices[dev];
  if (st.checked) return st;
  st.checked = true;
  const Api& a = api();
  if (!a.why.empty()) {
    st.why = a.why;
    return st;
  }
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    st.why = "cannot query the compute capability of device " + std::to_string(dev);
    return st;
  }
  if (major < 8) {
    st.why = "cuDNN's fused attention needs sm80 or newer; device " + std::to_string(dev) +
             " is sm" + std::to_string(major) + std::to_string(minor);
    return st;
  }
  try {
    check(a.Create(&st.handle), "cudnnCreate");
  } catch (const Failure& e) {
    st.handle = nullptr;
    st.why = e.what();
  }
  return st;
}

// Shape checks that need no cuDNN call ([F5]); empty when fine.
std::string static_refusal(const ref::AttentionShape& s, DType t, std::size_t version) {
  if (t != DType::kF16 && t != DType::kBf16) {
    return std::string("cuDNN fused attention runs fp16 and bf16, not ") + dtype_name(t);
  }
  if (s.d <= 0 || s.d > 128 || s.d % 8 != 0) {
    return "head dim " + std::to_string(s.d) + ": cuDNN fused attention (forward and backward) "
           "needs a multiple of 8 up to 128";
  }
  if (s.bh <= 0 || s.sq <= 0 || s.sk <= 0) return "empty attention shape";
  if (s.q_per_kv < 1 || s.bh % s.q_per_kv != 0) {
    return "bh " + std::to_string(s.bh) + " is not a multiple of q_per_kv " +
           std::to_string(s.q_per_kv);
  }
  if (s.sq == 1 && s.sk == 1) return "sq = sk = 1 is not supported by the cuDNN backward";
  if (version == 91000 || version == 91001) {
    return "cuDNN 9.10.0/9.10.1 have known fp16/bf16 SDPA bugs (cudnn-frontend refuses them)";
  }
  if (s.causal && s.sk < s.sq) {
    return "causal (bottom-right) attention with sk < sq is not supported by cuDNN";
  }
  const bool bottom_right = s.causal && s.sk != s.sq;
  if (bottom_right && version < 90600 && (s.sq % 64 != 0 || s.sk % 64 != 0)) {
    return "bottom-right causal mask with sq or sk not a multiple of 64 needs cuDNN >= 9.6.0";
  }
  if (bottom_right && s.window > 0 && version < 90600) {
    return "sliding window with sq != sk needs cuDNN >= 9.6.0";
  }
  return {};
}

Key make_key(int dev, int dir, DType t, const ref::AttentionShape& s) {
  const int window = s.causal ? std::max(0, s.window) : 0;
  return Key{dev, dir, static_cast<int>(t), s.bh, s.sq, s.sk, s.d, s.causal, window,
             std::max(1, s.q_per_kv)};
}

// Builds the graph and finds a plan ([F6]); throws Failure.
void build_plan(Plan& p, cudnnHandle_t handle, int dir, DType t, const ref::AttentionShape& s) {
  const Api& a = api();
  const Geometry geo = geometry(s);
  Graph g(cudnn_type(t));
  if (dir == 0) {
    build_forward(g, geo);
  } else {
    build_backward(g, geo);
  }
  p.scalars.neg_inf = a.version < 91000 ? std::numeric_limits<float>::lowest()
                                         : -std::numeric_limits<float>::infinity();
  p.scalars.seq_kv = static_cast<std::int32_t>(s.sk);
  p.scalars.seq_q = static_cast<std::int32_t>(s.sq);
  p.scalars.left_bound = static_cast<float>(geo.window - s.sk + s.sq);
  for (auto& [uid, d] : g.tensors()) {
    if (uid < kFirstVirtual) p.uids.push_back(uid);
    p.keep.push_back(d);
  }
  for (const Desc& d : g.keep()) p.keep.push_back(d);
  for (const Desc& d : g.ops()) p.keep.push_back(d);

  const std::string which = dir == 0 ? "forward" : "backward";
  Desc graph = make_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, which + " operation graph");
  set(graph, kAttrOpGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle,
      which + " operation graph: HANDLE");
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const Desc& d : g.ops()) ops.push_back(d.get());
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(ops.size()), ops.data(), which + " operation graph: OPS");
  finalize(graph, which + " operation graph (" + std::to_string(ops.size()) + " operations)");
  p.keep.push_back(graph);

  std::string tried;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const std::string hw = which + " heuristics (mode " +
                           (mode == CUDNN_HEUR_MODE_A ? "A" : "fallback") + ")";
    try {
      Desc heur = make_desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, hw);
      cudnnBackendDescriptor_t graph_raw = graph.get();
      set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &graph_raw, hw + ": OPERATION_GRAPH");
      set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, hw + ": MODE");
      finalize(heur, hw);
      int64_t count = 0;
      check(a.GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
            hw + ": count of RESULTS");
      if (count <= 0) {
        tried += (tried.empty() ? "" : "; ") + hw + ": no engine configuration";
        continue;
      }
      std::vector<Desc> cfgs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        cfgs.push_back(make_desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, hw + ": engine config"));
        raw.push_back(cfgs.back().get());
      }
      int64_t got = 0;
      check(a.GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                           CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
            hw + ": RESULTS");
      for (int64_t i = 0; i < got; ++i) {
        try {
          Desc plan = make_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, which + " plan");
          set(plan, kAttrPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle, which + " plan: HANDLE");
          set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
              &raw[static_cast<std::size_t>(i)], which + " plan: ENGINE_CONFIG");
          finalize(plan, which + " plan of engine config " + std::to_string(i));
          int64_t ws = 0, n = 0;
          check(a.GetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                               CUDNN_TYPE_INT64, 1, &n, &ws),
                which + " plan: WORKSPACE_SIZE");
          p.plan = plan;
          p.plan_ws = ws;
          p.keep.push_back(cfgs[static_cast<std::size_t>(i)]);
          p.keep.push_back(heur);
          p.ok = true;
          return;
        } catch (const Failure& e) {
          if (tried.find(hw) == std::string::npos) {
            tried += (tried.empty() ? "" : "; ") + hw + ": " + std::to_string(got) +
                     " engine config(s), first refusal: " + e.what();
          }
        }
      }
    } catch (const Failure& e) {
      tried += (tried.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  throw Failure("no cuDNN engine runs the " + which + " attention graph: " + tried);
}

// The cached plan for (current device, direction, dtype, shape); built on first use. Never
// throws for cuDNN refusals (they are in Plan::why); throws trainsim::Error for CUDA failures.
std::shared_ptr<Plan> plan_for(int dir, DType t, const ref::AttentionShape& s,
                               cudnnHandle_t* handle_out, std::string* why) {
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudnn_sdpa: cudaGetDevice");
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceState& st = device_state(dev);
  if (!st.handle) {
    if (why) *why = st.why;
    return nullptr;
  }
  if (handle_out) *handle_out = st.handle;
  const Key key = make_key(dev, dir, t, s);
  auto it = g_plans.find(key);
  if (it == g_plans.end()) {
    auto p = std::make_shared<Plan>();
    p->why = static_refusal(s, t, api().version);
    if (p->why.empty()) {
      try {
        build_plan(*p, st.handle, dir, t, s);
      } catch (const Failure& e) {
        *p = Plan{};
        p->why = e.what();
      }
    }
    if (p->ok) {
      const std::size_t rows = static_cast<std::size_t>(s.bh) * s.sq;
      p->bytes = align_up(static_cast<std::size_t>(std::max<int64_t>(p->plan_ws, 0)));
      if (dir == 1) {
        p->sum_off = p->bytes;
        p->bytes += align_up(rows * sizeof(float));
        p->acc_off = p->bytes;
        p->bytes += align_up(rows * static_cast<std::size_t>(s.d) * sizeof(float));
      }
    }
    it = g_plans.emplace(key, std::move(p)).first;
  }
  if (!it->second->ok && why) *why = it->second->why;
  return it->second;
}

[[noreturn]] void refuse(const char* what, const std::string& why) {
  throw Error(ErrorKind::kRuntime, std::string("cuDNN fused attention ") + what + ": " + why, {},
              "kernels/cudnn_sdpa.h says what cuDNN's fused attention supports; "
              "AttentionImpl::kOwn selects trainsim's own kernel");
}

void execute(Plan& p, cudnnHandle_t handle, cudaStream_t stream,
             const std::map<int64_t, void*>& ptrs, void* workspace, float scale,
             const char* what) {
  const Api& a = api();
  std::vector<int64_t> uids;
  std::vector<void*> data;
  for (const int64_t uid : p.uids) {
    void* ptr = nullptr;
    switch (uid) {
      case kScale: ptr = &scale; break;
      case kOne: ptr = &p.scalars.one; break;
      case kNegInf: ptr = &p.scalars.neg_inf; break;
      case kSeqKv: ptr = &p.scalars.seq_kv; break;
      case kSeqQ: ptr = &p.scalars.seq_q; break;
      case kLeftBound: ptr = &p.scalars.left_bound; break;
      default: {
        const auto it = ptrs.find(uid);
        if (it == ptrs.end()) {
          throw Failure("internal: no pointer for tensor uid " + std::to_string(uid));
        }
        ptr = it->second;
      }
    }
    uids.push_back(uid);
    data.push_back(ptr);
  }
  const std::string w = std::string(what) + " variant pack";
  Desc pack = make_desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, w);
  set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
      uids.data(), w + ": UNIQUE_IDS");
  set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
      static_cast<int64_t>(data.size()), data.data(), w + ": DATA_POINTERS");
  set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace,
      w + ": WORKSPACE");
  finalize(pack, w);
  std::lock_guard<std::mutex> lock(g_mu);  // the handle's stream is shared state
  check(a.SetStream(handle, stream), std::string(what) + ": cudnnSetStream");
  check(a.Execute(handle, p.plan.get(), pack.get()), std::string(what) + ": cudnnBackendExecute");
}

// The plan's scratch when the caller gives none: allocated once per plan.
void* own_buffer(Plan& p, const char* what) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!p.buffer && p.bytes > 0) {
    check_cuda(cudaMalloc(&p.buffer, p.bytes), what);
  }
  return p.buffer;
}

}  // namespace

std::size_t cudnn_sdpa_version() { return api().version; }

bool cudnn_sdpa_check_descriptors(const ref::AttentionShape& s, DType t, bool backward,
                                  std::string* why, bool* graph_finalized) {
  if (graph_finalized) *graph_finalized = false;
  const Api& a = api();
  if (!a.why.empty()) {
    if (why) *why = a.why;
    return false;
  }
  const std::string pre = static_refusal(s, t, a.version);
  if (!pre.empty()) {
    if (why) *why = pre;
    return false;
  }
  try {
    Graph g(cudnn_type(t));
    const Geometry geo = geometry(s);
    if (backward) {
      build_backward(g, geo);
    } else {
      build_forward(g, geo);
    }
    cudnnHandle_t handle = nullptr;
    if (a.Create(&handle) != CUDNN_STATUS_SUCCESS) return true;  // no device: descriptors only
    struct HandleGuard {
      cudnnHandle_t h;
      ~HandleGuard() { api().Destroy(h); }
    } guard{handle};
    Desc graph = make_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    set(graph, kAttrOpGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle, "operation graph: HANDLE");
    std::vector<cudnnBackendDescriptor_t> ops;
    for (const Desc& d : g.ops()) ops.push_back(d.get());
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(ops.size()), ops.data(), "operation graph: OPS");
    finalize(graph, "operation graph");
    if (graph_finalized) *graph_finalized = true;
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}

bool cudnn_sdpa_available(std::string* why) {
  const Api& a = api();
  if (!a.why.empty()) {
    if (why) *why = a.why;
    return false;
  }
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "no CUDA device";
    return false;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceState& st = device_state(dev);
  if (!st.handle && why) *why = st.why;
  return st.handle != nullptr;
}

bool cudnn_sdpa_supported(const ref::AttentionShape& s, DType t, std::string* why) {
  try {
    if (!cudnn_sdpa_available(why)) return false;
    const std::string pre = static_refusal(s, t, api().version);
    if (!pre.empty()) {
      if (why) *why = pre;
      return false;
    }
    for (int dir = 0; dir < 2; ++dir) {
      std::string w;
      auto p = plan_for(dir, t, s, nullptr, &w);
      if (!p || !p->ok) {
        if (why) *why = w;
        return false;
      }
    }
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}

void launch_cudnn_sdpa_forward(DType t, const ref::AttentionShape& s, const void* q,
                               const void* k, const void* v, void* o, float* lse,
                               cudaStream_t stream) {
  cudnnHandle_t handle = nullptr;
  std::string why;
  auto p = plan_for(0, t, s, &handle, &why);
  if (!p || !p->ok) refuse("forward", why);
  try {
    void* ws = p->bytes > 0 ? own_buffer(*p, "cudnn_sdpa forward: workspace") : nullptr;
    execute(*p, handle, stream,
            {{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)}, {kV, const_cast<void*>(v)},
             {kO, o}, {kStats, lse}},
            ws, s.scale, "cudnn_sdpa forward");
  } catch (const Failure& e) {
    refuse("forward", e.what());
  }
}

std::size_t cudnn_sdpa_backward_workspace_bytes(const ref::AttentionShape& s, DType t) {
  std::string why;
  auto p = plan_for(1, t, s, nullptr, &why);
  if (!p || !p->ok) refuse("backward", why);
  return p->bytes;
}

void launch_cudnn_sdpa_backward(DType t, const ref::AttentionShape& s, const void* q,
                                const void* k, const void* v, const void* o, const void* d_o,
                                const float* lse, void* dq, void* dk, void* dv, void* workspace,
                                cudaStream_t stream) {
  cudnnHandle_t handle = nullptr;
  std::string why;
  auto p = plan_for(1, t, s, &handle, &why);
  if (!p || !p->ok) refuse("backward", why);
  try {
    char* ws = static_cast<char*>(workspace ? workspace
                                            : own_buffer(*p, "cudnn_sdpa backward: workspace"));
    void* sum = ws + p->sum_off;
    void* acc = ws + p->acc_off;
    // Before cuDNN 9.6.0 the dQ accumulator must start at zero ([F1], the frontend's memset).
    if (api().version < 90600) {
      const std::size_t n = static_cast<std::size_t>(s.bh) * s.sq * s.d * sizeof(float);
      check_cuda(cudaMemsetAsync(acc, 0, n, stream), "cudnn_sdpa backward: zero dQ accumulator");
    }
    execute(*p, handle, stream,
            {{kQ, const_cast<void*>(q)},
             {kK, const_cast<void*>(k)},
             {kV, const_cast<void*>(v)},
             {kO, const_cast<void*>(o)},
             {kDO, const_cast<void*>(d_o)},
             {kStats, const_cast<float*>(lse)},
             {kDQ, dq},
             {kDK, dk},
             {kDV, dv},
             {kSoftmaxSum, sum},
             {kDQAccum, acc}},
            p->plan_ws > 0 ? ws : nullptr, s.scale, "cudnn_sdpa backward");
  } catch (const Failure& e) {
    refuse("backward", e.what());
  }
}

}  // namespace trainsim::kernels
