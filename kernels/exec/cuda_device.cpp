#include "kernels/exec/cuda_device.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "kernels/cuda_check.h"
#include "kernels/dtype.h"
#include "kernels/exec/memory_kernel.h"
#include "kernels/gemm.h"
#include "kernels/launchers.h"
#include "sim/core/error.h"

namespace trainsim::kexec {
namespace {

using kernels::check_cuda;
using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_nccl(ncclResult_t r, const std::string& what) {
  throw Error(ErrorKind::kRuntime,
              fmt::format("{} failed: {} ({})", what, ncclGetErrorString(r), static_cast<int>(r)));
}

ncclDataType_t nccl_type(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return ncclFloat32;
    case Precision::kFp16:
      return ncclFloat16;
    case Precision::kFp8:  // reductions of fp8 tensors run in bf16 (Megatron does the same)
    case Precision::kBf16:
      break;
  }
  return ncclBfloat16;
}

// A kernel dimension as int (clamped: a parameter count above 2^31 must go through dims()).
int dim(double x) { return static_cast<int>(std::min(2147483647.0, std::max(1.0, std::round(x)))); }

// Bytes the executor's own scratch buffers hold on this thread's device (one thread per device).
thread_local std::size_t t_scratch_bytes = 0;

// A device allocation that only grows (synthetic data: its content never matters).
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p_) cudaFree(p_);
    t_scratch_bytes -= std::min(t_scratch_bytes, size_);
  }
  /// The buffer, at least `bytes` long. Growing frees the old one (cudaFree synchronises the
  /// device), which is why the executor sizes every buffer before the first iteration.
  void* get(std::size_t bytes, const char* what) {
    if (bytes > size_) {
      if (p_) check_cuda(cudaFree(p_), "cudaFree (growing a scratch buffer)");
      p_ = nullptr;
      t_scratch_bytes -= std::min(t_scratch_bytes, size_);
      size_ = 0;
      const std::size_t want = std::max<std::size_t>(bytes, 1 << 20);
      const cudaError_t e = cudaMalloc(&p_, want);
      if (e != cudaSuccess) {
        p_ = nullptr;
        throw Error(ErrorKind::kRuntime, fmt::format("cudaMalloc of {:.2f} GiB for {} failed: {}",
                                                     static_cast<double>(want) / (1 << 30), what,
                                                     cudaGetErrorString(e)));
      }
      check_cuda(cudaMemset(p_, 0, want), "cudaMemset (scratch buffer)");
      size_ = want;
      t_scratch_bytes += want;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

std::size_t dims(double x) { return static_cast<std::size_t>(std::max(1.0, std::round(x))); }

// Offsets of the pieces of one launch in a buffer, each 256-byte aligned.
struct Layout {
  std::size_t size = 0;
  std::size_t add(std::size_t bytes) {
    const std::size_t at = size;
    size += ((bytes + 255) / 256) * 256;
    return at;
  }
};

// The random inputs of a stream's memory-bound launchers (KernelLaunch::launcher): activations
// (uniform in [-1, 1)), optimizer state (fp32, uniform in [0, 1), so the second moment is
// non-negative) and token ids (in [0, the smallest table seen)). Sized during the sizing pass,
// then allocated and filled once (launch_fill_uniform / launch_fill_tokens; again only if a later
// launch needs more); launches only read them, so no launcher runs on zeros. Activations are
// filled in the narrowest type any launch reads them as: wider reads of 16-bit random values
// (the fp32 router softmax) stay finite, the reverse would not.
class OpInputs {
 public:
  char* activations(std::size_t bytes, kernels::DType t, bool sizing, cudaStream_t s) {
    if (kernels::dtype_bytes(t) < kernels::dtype_bytes(act_type_)) act_type_ = t;
    return static_cast<char*>(get(act_, bytes, sizing, s));
  }
  char* state(std::size_t bytes, bool sizing, cudaStream_t s) {
    state_.need = std::max(state_.need, bytes);
    if (!sizing && external_ && state_.need <= external_bytes_) {
      // The optimizer's fp32 weights, gradients and moments are the model states the device
      // holds (hold_states): one copy, as in a framework, not a second one beside it.
      if (!external_filled_) {
        kernels::launch_fill_uniform(kernels::DType::kF32, external_, state_.need / 4, 0.0f, 1.0f,
                                     0x5eed2, s);
        external_filled_ = true;
      }
      return static_cast<char*>(external_);
    }
    return static_cast<char*>(get(state_, bytes, sizing, s));
  }
  /// Memory the optimizer's state may live in (the held model states), or nullptr.
  void use_for_state(void* p, std::size_t bytes) {
    external_ = p;
    external_bytes_ = bytes;
  }
  const std::int32_t* tokens(std::size_t count, int bound, bool sizing, cudaStream_t s) {
    bound_ = bound_ > 0 ? std::min(bound_, bound) : bound;
    return static_cast<const std::int32_t*>(get(tok_, count * 4, sizing, s));
  }
  /// After sizing: allocates and fills every buffer at the size the plan needs (the optimizer
  /// state in the held model states when they are large enough).
  void allocate(cudaStream_t s) {
    for (Buffer* b : {&act_, &tok_}) get(*b, b->need, false, s);
    state(state_.need, false, s);
  }

 private:
  struct Buffer {
    Scratch mem;
    std::size_t need = 0, filled = 0;
    int kind = 0;  // 0 activations, 1 optimizer state, 2 token ids
  };
  void* get(Buffer& b, std::size_t bytes, bool sizing, cudaStream_t s) {
    b.need = std::max(b.need, bytes);
    if (sizing || b.need == 0) return nullptr;
    void* p = b.mem.get(b.need, "launcher inputs");
    if (b.filled < b.need) {
      if (b.kind == 0) {
        kernels::launch_fill_uniform(act_type_, p, b.need / kernels::dtype_bytes(act_type_),
                                     -1.0f, 1.0f, 0x5eed1, s);
      } else if (b.kind == 1) {
        kernels::launch_fill_uniform(kernels::DType::kF32, p, b.need / 4, 0.0f, 1.0f, 0x5eed2, s);
      } else {
        kernels::launch_fill_tokens(static_cast<std::int32_t*>(p), b.need / 4, std::max(1, bound_),
                                    0x5eed3, s);
      }
      b.filled = b.need;
    }
    return p;
  }
  kernels::DType act_type_ = kernels::DType::kF32;
  int bound_ = 0;
  void* external_ = nullptr;
  std::size_t external_bytes_ = 0;
  bool external_filled_ = false;
  Buffer act_, state_{{}, 0, 0, 1}, tok_{{}, 0, 0, 2};
};

class CudaDevice : public Device {
 public:
  CudaDevice(int device, int rank, double timeout_s)
      : device_(device), rank_(rank), timeout_s_(timeout_s) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }

  ~CudaDevice() override {
    // Nothing here may throw: release what exists, abort communicators after an error.
    for (ncclComm_t c : comms_) {
      if (!c) continue;
      if (failed_) {
        ncclCommAbort(c);
      } else {
        ncclCommDestroy(c);
      }
    }
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaEvent_t e : markers_) cudaEventDestroy(e);
    for (cudaEvent_t e : ends_) cudaEventDestroy(e);
    if (begin_) cudaEventDestroy(begin_);
    gemm_.reset();
    scratch_.clear();
    inputs_.clear();
    for (auto& [id, p] : held_) cudaFree(p);  // (pool memory: freed with the pool)
    if (pool_) cudaMemPoolDestroy(pool_);
    if (states_) cudaFree(states_);
    for (auto& [s, cs] : streams_) cudaStreamDestroy(cs);
  }

  void create_streams(const std::vector<plan::Stream>& streams) override {
    for (plan::Stream s : streams) {
      cudaStream_t cs = nullptr;
      check_cuda(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking),
                 fmt::format("cudaStreamCreate ({})", plan::to_string(s)).c_str());
      streams_[s] = cs;
      order_.push_back(s);
    }
    if (order_.empty()) throw Error(ErrorKind::kRuntime, "the Program has no streams");
  }

  void create_comm(int comm, const CommGroup& group, int my_index, const CommId& id) override {
    ncclUniqueId uid;
    static_assert(sizeof uid == sizeof(CommId));
    std::memcpy(&uid, id.data(), sizeof uid);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // polled against a deadline below
    ncclComm_t c = nullptr;
    const std::string what = fmt::format("ncclCommInitRankConfig ({} group of {} ranks, rank {})",
                                         group.name, group.members.size(), rank_);
    const ncclResult_t r =
        ncclCommInitRankConfig(&c, static_cast<int>(group.members.size()), uid, my_index, &config);
    if (c) {
      if (comms_.size() <= static_cast<std::size_t>(comm)) comms_.resize(comm + 1, nullptr);
      comms_[static_cast<std::size_t>(comm)] = c;
    }
    if (r != ncclSuccess && r != ncclInProgress) fail(r, what);
    settle(c, what);
  }

  void create_events(int count, int markers) override {
    auto make = [](unsigned flags, const char* what) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreateWithFlags(&e, flags), what);
      return e;
    };
    for (int i = 0; i < count; ++i) {
      events_.push_back(make(cudaEventDisableTiming, "cudaEventCreate (dependency)"));
    }
    for (int i = 0; i < markers; ++i) markers_.push_back(make(cudaEventDefault, "cudaEventCreate"));
    for (std::size_t i = 0; i < order_.size(); ++i) {
      ends_.push_back(make(cudaEventDefault, "cudaEventCreate (end)"));
    }
    begin_ = make(cudaEventDefault, "cudaEventCreate (begin)");
  }

  void hold_states(double bytes) override {
    if (bytes < 1 || states_) return;
    states_bytes_ = static_cast<std::size_t>(bytes);
    // (+ 4 KiB: the optimizer's four fp32 arrays are laid out 256-byte aligned in it)
    const cudaError_t e = cudaMalloc(&states_, states_bytes_ + 4096);
    if (e != cudaSuccess) {
      states_ = nullptr;
      throw Error(ErrorKind::kRuntime,
                  fmt::format("GPU {}: cudaMalloc of {:.2f} GiB for the model states (weights, "
                              "gradients, optimizer, as the memory model shards them) failed: {}",
                              device_, bytes / (1 << 30), cudaGetErrorString(e)),
                  {}, "the configuration does not fit this GPU's memory");
    }
  }

  // Activations: stream-ordered allocations from one pool that keeps what it reserved (as a
  // framework's caching allocator does), so its high-water marks are the iteration's peak.
  void hold(plan::Stream s, int id, double bytes) override {
    if (!pool_) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device_;
      check_cuda(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate (activations)");
      std::uint64_t keep = UINT64_MAX;
      check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep),
                 "cudaMemPoolSetAttribute (release threshold)");
    }
    void* p = nullptr;
    const cudaError_t e =
        cudaMallocFromPoolAsync(&p, std::max<std::size_t>(1, static_cast<std::size_t>(bytes)),
                                pool_, stream(s));
    if (e != cudaSuccess) {
      throw Error(ErrorKind::kRuntime,
                  fmt::format("GPU {}: allocating {:.2f} GiB of activations failed: {}", device_,
                              bytes / (1 << 30), cudaGetErrorString(e)),
                  {}, "the configuration does not fit this GPU's memory");
    }
    held_[id] = p;
  }

  void release(plan::Stream s, int id) override {
    const auto it = held_.find(id);
    if (it == held_.end()) return;
    check_cuda(cudaFreeAsync(it->second, stream(s)), "cudaFreeAsync (activations)");
    held_.erase(it);
  }

  MemoryMeasure memory() const override { return memory_; }

  void begin_iteration() override {
    if (pool_) {
      std::uint64_t zero = 0;  // resets the high-water marks to the current values
      check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero),
                 "cudaMemPoolSetAttribute (used high)");
      check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero),
                 "cudaMemPoolSetAttribute (reserved high)");
    }
    cudaStream_t first = streams_.at(order_.front());
    check_cuda(cudaEventRecord(begin_, first), "cudaEventRecord (iteration begin)");
    for (plan::Stream s : order_) {
      check_cuda(cudaStreamWaitEvent(streams_.at(s), begin_, 0),
                 "cudaStreamWaitEvent (iteration begin)");
    }
  }

  void set_sizing(bool on) override {
    sizing_ = on;
    if (on) return;
    for (const auto& [s, bytes] : need_) {
      // GEMM and attention operands: random too (16-bit values in [-1, 1)), filled once.
      void* p = scratch(s).get(bytes, "the stream's scratch buffer");
      kernels::launch_fill_uniform(kernels::DType::kBf16, p, bytes / 2, -1.0f, 1.0f, 0x5eed0,
                                   stream(s));
    }
    for (auto& [s, b] : inputs_) {
      b.use_for_state(states_, states_ ? states_bytes_ + 4096 : 0);
      b.allocate(stream(s));
    }
    if (!gemm_) gemm_ = std::make_unique<kernels::GemmRunner>();
  }

  void kernel(plan::Stream s, const std::string& op, const KernelLaunch& k,
              Precision dtype) override {
    cudaStream_t cs = stream(s);
    kernels::DType t = dtype_of(dtype);
    if (t == kernels::DType::kFp8 && !kernels::GemmRunner::supported(t)) t = kernels::DType::kBf16;
    const std::size_t eb = kernels::dtype_bytes(t);
    switch (k.kind) {
      case model::OpKind::kGemm: {
        const int m = dim(k.m), n = dim(k.n), kk = dim(k.k), b = dim(k.batch);
        gemm(t, m, n, kk, b, s, op);
        break;
      }
      case model::OpKind::kAttention: {
        kernels::ref::AttentionShape shape;
        shape.bh = dim(k.batch);
        shape.sq = dim(k.m);
        shape.sk = dim(k.n);
        shape.d = dim(k.k);
        shape.causal = shape.sk >= shape.sq;
        shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.d));
        // GQA: the op's batch counts query heads; k and v have 1/q_per_kv of them (the fused
        // kernels read each key/value head for its group of query heads).
        if (k.q_per_kv > 1 && shape.bh % k.q_per_kv == 0) shape.q_per_kv = k.q_per_kv;
        shape.window = k.window;
        const kernels::DType at =
            t == kernels::DType::kF32 || t == kernels::DType::kFp8 ? kernels::DType::kBf16 : t;
        if (kernels::attention_supported(shape, at)) {
          attention(shape, at, k.backward, s, op);
        } else {
          // Unfused: scores = Q·Kᵀ, out = P·V (backward: twice as many GEMMs).
          const kernels::DType g = t == kernels::DType::kFp8 ? kernels::DType::kBf16 : t;
          for (int rep = 0; rep < (k.backward ? 2 : 1); ++rep) {
            gemm(g, shape.sq, shape.sk, shape.d, shape.bh, s, op);
            gemm(g, shape.sq, shape.d, shape.sk, shape.bh, s, op);
          }
        }
        break;
      }
      case model::OpKind::kMemory: {
        if (!k.launcher.empty()) {
          for (int rep = 0; rep < std::max(1, k.repeats); ++rep) {
            launcher(k, k.f32 ? kernels::DType::kF32 : act_type(t), s);
          }
          break;
        }
        const auto bytes = static_cast<std::size_t>(std::max(0.0, k.bytes));
        const int launches = std::max(1, k.kernels);
        const std::size_t each = bytes / static_cast<std::size_t>(launches);
        void* buf = buffer(s, std::max<std::size_t>(each, 16 * eb), op.c_str());
        if (sizing_) break;
        for (int i = 0; i < launches; ++i) launch_memory_traffic(buf, each, cs);
        break;
      }
    }
  }

  void collective(plan::Stream s, int comm, const CollectiveCall& c) override {
    ncclComm_t nc = communicator(comm);
    int n = 1;
    nccl(ncclCommCount(nc, &n), nc, "ncclCommCount");
    const std::size_t elem = static_cast<std::size_t>(bytes_per_element(c.dtype));
    std::size_t count = static_cast<std::size_t>(std::max(0.0, c.bytes)) / elem;
    count = std::max<std::size_t>(count - count % static_cast<std::size_t>(n),
                                  static_cast<std::size_t>(n));
    const std::size_t share = count / static_cast<std::size_t>(n);
    // Room for the buffer and a separate output of the same size.
    char* buf = static_cast<char*>(buffer(s, 2 * count * elem, "collective buffer"));
    if (sizing_) return;
    char* out = buf + count * elem;
    const ncclDataType_t t = nccl_type(c.dtype);
    cudaStream_t cs = stream(s);
    const std::string what =
        fmt::format("{} on {} ranks, {} bytes", coll::to_string(c.kind), n, count * elem);
    switch (c.kind) {
      case coll::Kind::kAllReduce:
        nccl(ncclAllReduce(buf, out, count, t, ncclSum, nc, cs), nc, "ncclAllReduce " + what);
        break;
      case coll::Kind::kAllGather:
        nccl(ncclAllGather(buf, out, share, t, nc, cs), nc, "ncclAllGather " + what);
        break;
      case coll::Kind::kReduceScatter:
        nccl(ncclReduceScatter(buf, out, share, t, ncclSum, nc, cs), nc,
             "ncclReduceScatter " + what);
        break;
      case coll::Kind::kBroadcast:
        nccl(ncclBroadcast(buf, out, count, t, 0, nc, cs), nc, "ncclBroadcast " + what);
        break;
      case coll::Kind::kAllToAll:
      case coll::Kind::kSendRecv: {
        nccl(ncclGroupStart(), nc, "ncclGroupStart");
        for (int p = 0; p < n; ++p) {
          nccl(ncclSend(buf + p * share * elem, share, t, p, nc, cs), nc, "ncclSend " + what);
          nccl(ncclRecv(out + p * share * elem, share, t, p, nc, cs), nc, "ncclRecv " + what);
        }
        nccl(ncclGroupEnd(), nc, "ncclGroupEnd (all-to-all) " + what);
        break;
      }
    }
  }

  void send(plan::Stream s, int comm, int peer_index, double bytes) override {
    ncclComm_t nc = communicator(comm);
    const auto n = static_cast<std::size_t>(std::max(1.0, bytes));
    void* buf = buffer(s, n, "send buffer");
    if (sizing_) return;
    nccl(ncclSend(buf, n, ncclUint8, peer_index, nc, stream(s)), nc,
         fmt::format("ncclSend of {} bytes to pipeline peer", n));
  }

  void recv(plan::Stream s, int comm, int peer_index, double bytes) override {
    ncclComm_t nc = communicator(comm);
    const auto n = static_cast<std::size_t>(std::max(1.0, bytes));
    void* buf = buffer(s, n, "receive buffer");
    if (sizing_) return;
    nccl(ncclRecv(buf, n, ncclUint8, peer_index, nc, stream(s)), nc,
         fmt::format("ncclRecv of {} bytes from pipeline peer", n));
  }

  void record(plan::Stream s, int event) override {
    if (sizing_) return;
    check_cuda(cudaEventRecord(events_.at(static_cast<std::size_t>(event)), stream(s)),
               "cudaEventRecord (dependency)");
  }

  void wait(plan::Stream s, int event) override {
    if (sizing_) return;
    check_cuda(cudaStreamWaitEvent(stream(s), events_.at(static_cast<std::size_t>(event)), 0),
               "cudaStreamWaitEvent (dependency)");
  }

  void mark(plan::Stream s, int marker) override {
    if (sizing_) return;
    check_cuda(cudaEventRecord(markers_.at(static_cast<std::size_t>(marker)), stream(s)),
               "cudaEventRecord (task timing)");
  }

  std::vector<double> end_iteration(double timeout_s) override {
    for (std::size_t i = 0; i < order_.size(); ++i) {
      check_cuda(cudaEventRecord(ends_[i], streams_.at(order_[i])), "cudaEventRecord (end)");
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      bool done = true;
      for (cudaEvent_t e : ends_) {
        const cudaError_t q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) {
          done = false;
          break;
        }
        if (q != cudaSuccess) {
          // A kernel failed: the peers may wait on this rank forever, so abort, then report.
          failed_ = true;
          abort_all();
          check_cuda(q, "the iteration's kernels (cudaEventQuery)");
        }
      }
      if (done) break;
      for (ncclComm_t c : comms_) {
        if (!c) continue;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(c, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          fail(async, fmt::format("an NCCL operation of rank {} (asynchronous error)", rank_));
        }
      }
      if (Clock::now() > deadline) {
        failed_ = true;
        abort_all();
        throw Error(ErrorKind::kRuntime,
                    fmt::format("rank {} (GPU {}): the iteration did not finish within {:.0f} s; "
                                "an NCCL operation hangs (communicators aborted)",
                                rank_, device_, timeout_s),
                    {}, "check that every rank runs, or raise --timeout");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    measure_memory();
    std::vector<double> out;
    out.reserve(markers_.size() + 1);
    for (cudaEvent_t e : markers_) out.push_back(elapsed(e));
    double end = 0;
    for (cudaEvent_t e : ends_) end = std::max(end, elapsed(e));
    out.push_back(end);
    return out;
  }

 private:
  cudaStream_t stream(plan::Stream s) const {
    const auto it = streams_.find(s);
    if (it == streams_.end()) {
      throw Error(ErrorKind::kRuntime,
                  fmt::format("launch on stream {} that was not created", plan::to_string(s)));
    }
    return it->second;
  }

  Scratch& scratch(plan::Stream s) {
    auto& p = scratch_[s];
    if (!p) p = std::make_unique<Scratch>();
    return *p;
  }

  // The stream's scratch of at least `bytes`; while sizing, only notes the need (nullptr).
  void* buffer(plan::Stream s, std::size_t bytes, const char* what) {
    if (sizing_) {
      need_[s] = std::max(need_[s], bytes);
      return nullptr;
    }
    return scratch(s).get(bytes, what);
  }

  ncclComm_t communicator(int comm) const {
    if (comm < 0 || static_cast<std::size_t>(comm) >= comms_.size() || !comms_[comm]) {
      throw Error(ErrorKind::kRuntime, fmt::format("communicator {} was not created", comm));
    }
    return comms_[static_cast<std::size_t>(comm)];
  }

  double elapsed(cudaEvent_t e) const {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, begin_, e), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

  void gemm(kernels::DType t, int m, int n, int k, int batch, plan::Stream s,
            const std::string& op) {
    const kernels::DType out = kernels::GemmRunner::output_type(t);
    const std::size_t a = static_cast<std::size_t>(m) * k * batch * kernels::dtype_bytes(t);
    const std::size_t w = static_cast<std::size_t>(n) * k * batch * kernels::dtype_bytes(t);
    const std::size_t c = static_cast<std::size_t>(m) * n * batch * kernels::dtype_bytes(out);
    char* buf = static_cast<char*>(buffer(s, a + w + c + 3 * 256, op.c_str()));
    if (sizing_) return;
    char* wp = buf + ((a + 255) / 256) * 256;
    char* cp = wp + ((w + 255) / 256) * 256;
    gemm_->run(t, m, n, k, batch, buf, wp, cp, stream(s));
  }

  void attention(const kernels::ref::AttentionShape& sh, kernels::DType t, bool backward,
                 plan::Stream s, const std::string& op) {
    const std::size_t eb = kernels::dtype_bytes(t);
    const std::size_t q = static_cast<std::size_t>(sh.bh) * sh.sq * sh.d * eb;
    const std::size_t kv = static_cast<std::size_t>(sh.bh) * sh.sk * sh.d * eb;
    const std::size_t lse = static_cast<std::size_t>(sh.bh) * sh.sq * sizeof(float);
    const std::size_t ws = backward ? kernels::attention_backward_workspace_bytes(sh) : 0;
    auto up = [](std::size_t x) { return ((x + 255) / 256) * 256; };
    // q, k, v, o, lse (+ dO, dQ, dK, dV, workspace for the backward)
    const std::size_t total =
        up(q) * 2 + up(kv) * 2 + up(lse) + (backward ? up(q) * 2 + up(kv) * 2 + up(ws) : 0);
    char* p = static_cast<char*>(buffer(s, total, op.c_str()));
    if (sizing_) return;
    cudaStream_t cs = stream(s);
    char* qp = p;
    char* kp = qp + up(q);
    char* vp = kp + up(kv);
    char* op_ = vp + up(kv);
    auto* lp = reinterpret_cast<float*>(op_ + up(q));
    if (!backward) {
      kernels::launch_attention_forward(t, sh, qp, kp, vp, op_, lp, cs);
      return;
    }
    char* dop = reinterpret_cast<char*>(lp) + up(lse);
    char* dq = dop + up(q);
    char* dk = dq + up(q);
    char* dv = dk + up(kv);
    char* wsp = dv + up(kv);
    kernels::launch_attention_backward(t, sh, qp, kp, vp, op_, dop, lp, dq, dk, dv, wsp, cs);
  }

  // Storage type of the element-wise launchers (they take fp32, fp16 or bf16).
  static kernels::DType act_type(kernels::DType t) {
    return t == kernels::DType::kFp8 ? kernels::DType::kBf16 : t;
  }

  // One memory-bound task on its kernels/launchers.h launcher (KernelLaunch::launcher) at
  // rows × cols, reading the stream's random inputs (OpInputs) and writing its scratch buffer.
  void launcher(const KernelLaunch& k, kernels::DType t, plan::Stream s) {
    using kernels::DType;
    const std::string& name = k.launcher;
    const int rows = dim(k.rows), cols = dim(k.cols);
    // Element count in size_t: the optimizer step of a large stage updates billions of parameters.
    const std::size_t n = dims(k.rows) * dims(k.cols);
    const std::size_t e = kernels::dtype_bytes(t);
    const std::size_t c = static_cast<std::size_t>(cols), r = static_cast<std::size_t>(rows);
    OpInputs& in = inputs_[s];
    // Inputs (random, filled once) and outputs (the scratch buffer), 256-byte aligned pieces.
    Layout inl, outl;
    const bool norm = name == "layernorm" || name == "rmsnorm";
    if (name == "adam" || name == "lamb") {
      // fp32 master weights, gradients and moments in the state buffer; the bf16 copy out.
      const std::size_t w = inl.add(n * 4), g = inl.add(n * 4), m = inl.add(n * 4),
                        v = inl.add(n * 4);
      const std::size_t wb = outl.add(n * 2), nrm = outl.add(2 * sizeof(double));
      char* st = in.state(inl.size, sizing_, sizing_ ? nullptr : stream(s));
      char* out = static_cast<char*>(buffer(s, outl.size, name.c_str()));
      if (sizing_) return;
      auto* wp = reinterpret_cast<float*>(st + w);
      auto* gp = reinterpret_cast<const float*>(st + g);
      auto* mp = reinterpret_cast<float*>(st + m);
      auto* vp = reinterpret_cast<float*>(st + v);
      kernels::ref::AdamParams p;
      if (name == "adam") {
        kernels::launch_adam(wp, gp, mp, vp, out + wb, n, p, stream(s));
      } else {
        kernels::launch_lamb(wp, gp, mp, vp, out + wb, reinterpret_cast<double*>(out + nrm), n, p,
                             stream(s));
      }
      return;
    }
    // Activations: x (and a second input: residual / the up half of SwiGLU / a backward's dy),
    // then the per-column parameters (gamma, beta, bias) and a norm backward's saved statistics.
    // A backward (`<kind>_bwd`, launchers.h) writes dx where its forward writes y, its fp32
    // column sums after the row statistics, and reads the dropout mask where the forward
    // writes it.
    const bool bwd = name.size() > 4 && name.compare(name.size() - 4, 4, "_bwd") == 0;
    const bool swiglu = name == "swiglu" || name == "swiglu_bwd";
    const bool norm_bwd = name == "layernorm_bwd" || name == "rmsnorm_bwd";
    const std::size_t x = inl.add((swiglu ? 2 : 1) * n * e);
    const std::size_t x2 = inl.add(name == "bias_dropout_add" || bwd ? n * e : 0);
    const std::size_t p1 = inl.add(c * e), p2 = inl.add(c * e);
    const std::size_t table = inl.add(name == "embedding" ? dims(k.table) * c * e : 0);
    const std::size_t sv1 = inl.add(norm_bwd ? r * 4 : 0), sv2 = inl.add(norm_bwd ? r * 4 : 0);
    const std::size_t y = outl.add((name == "swiglu_bwd" ? 2 : 1) * n * e);
    const bool masked = name == "dropout" || name == "bias_dropout_add" ||
                        name == "dropout_bwd" || name == "bias_dropout_add_bwd";
    const std::size_t mask = outl.add(masked ? n : 0);
    const std::size_t stat1 = outl.add(r * 4), stat2 = outl.add(r * 4);
    const std::size_t cs1 = outl.add(bwd ? c * 4 : 0), cs2 = outl.add(bwd ? c * 4 : 0);
    const std::size_t tgrad = outl.add(name == "embedding_bwd" ? dims(k.table) * c * 4 : 0);
    const bool tokens = name == "embedding" || name == "cross_entropy" || name == "embedding_bwd";
    const int bound = dim(k.table);
    cudaStream_t fill = sizing_ ? nullptr : stream(s);
    const char* a = in.activations(inl.size, t, sizing_, fill);
    const std::int32_t* ids = tokens ? in.tokens(r, bound, sizing_, fill) : nullptr;
    char* out = static_cast<char*>(buffer(s, outl.size, name.c_str()));
    if (sizing_) return;
    cudaStream_t cs = stream(s);
    const std::uint64_t seed = ++launches_;
    auto* st1 = reinterpret_cast<float*>(out + stat1);
    auto* st2 = reinterpret_cast<float*>(out + stat2);
    if (norm) {
      if (name == "layernorm") {
        kernels::launch_layernorm(t, a + x, a + p1, a + p2, out + y, st1, st2, rows, cols, 1e-5f,
                                  cs);
      } else {
        kernels::launch_rmsnorm(t, a + x, a + p1, out + y, st2, rows, cols, 1e-5f, cs);
      }
    } else if (name == "softmax") {
      kernels::launch_softmax(t, a + x, out + y, rows, cols, 1.0f, cs);
    } else if (name == "dropout") {
      kernels::launch_dropout(t, a + x, out + y, reinterpret_cast<std::uint8_t*>(out + mask), n,
                              0.1f, seed, cs);
    } else if (name == "bias_dropout_add") {
      kernels::launch_bias_dropout_add(t, a + x, a + p1, a + x2, out + y,
                                       reinterpret_cast<std::uint8_t*>(out + mask), rows, cols,
                                       0.1f, seed, cs);
    } else if (name == "bias_gelu") {
      kernels::launch_bias_gelu(t, a + x, a + p1, out + y, rows, cols, cs);
    } else if (name == "swiglu") {
      kernels::launch_swiglu(t, a + x, out + y, rows, cols, cs);
    } else if (name == "embedding") {
      kernels::launch_embedding(t, ids, a + table, out + y, rows, cols, cs);
    } else if (name == "cross_entropy") {
      // The backward task writes the logits gradient (the launcher's `grad`).
      kernels::launch_cross_entropy(t, a + x, ids, st1, k.backward ? out + y : nullptr, rows,
                                    cols, cs);
    } else if (bwd) {
      auto* c1 = reinterpret_cast<float*>(out + cs1);
      auto* c2 = reinterpret_cast<float*>(out + cs2);
      const auto* m = reinterpret_cast<const std::uint8_t*>(out + mask);
      const auto* s1 = reinterpret_cast<const float*>(a + sv1);
      const auto* s2 = reinterpret_cast<const float*>(a + sv2);
      if (name == "layernorm_bwd") {
        kernels::launch_layernorm_bwd(t, a + x, a + x2, a + p1, s1, s2, out + y, c1, c2, rows, cols,
                                      cs);
      } else if (name == "rmsnorm_bwd") {
        kernels::launch_rmsnorm_bwd(t, a + x, a + x2, a + p1, s2, out + y, c1, rows, cols, cs);
      } else if (name == "softmax_bwd") {
        kernels::launch_softmax_bwd(t, a + x, a + x2, out + y, rows, cols, 1.0f, cs);
      } else if (name == "dropout_bwd") {
        kernels::launch_dropout_bwd(t, a + x2, m, out + y, n, 0.1f, cs);
      } else if (name == "bias_dropout_add_bwd") {
        kernels::launch_bias_dropout_add_bwd(t, a + x2, m, out + y, c1, rows, cols, 0.1f, cs);
      } else if (name == "bias_gelu_bwd") {
        kernels::launch_bias_gelu_bwd(t, a + x, a + p1, a + x2, out + y, c1, rows, cols, cs);
      } else if (name == "swiglu_bwd") {
        kernels::launch_swiglu_bwd(t, a + x, a + x2, out + y, rows, cols, cs);
      } else if (name == "embedding_bwd") {
        kernels::launch_embedding_bwd(t, ids, a + x2, reinterpret_cast<float*>(out + tgrad), rows,
                                      cols, cs);
      } else {
        throw Error(ErrorKind::kRuntime, fmt::format("no launcher `{}` in the CUDA device", name));
      }
    } else {
      throw Error(ErrorKind::kRuntime, fmt::format("no launcher `{}` in the CUDA device", name));
    }
  }

  // Checks an NCCL call on a non-blocking communicator: ncclInProgress is waited out.
  void nccl(ncclResult_t r, ncclComm_t c, const std::string& what) {
    if (r == ncclSuccess) return;
    if (r != ncclInProgress) fail(r, what);
    settle(c, what);
  }

  // Polls a non-blocking communicator until its pending call is done or the deadline passes.
  void settle(ncclComm_t c, const std::string& what) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(c, &state);
      if (q != ncclSuccess) fail(q, "ncclCommGetAsyncError after " + what);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(state, what);
      if (Clock::now() > deadline) {
        failed_ = true;
        abort_all();
        throw Error(
            ErrorKind::kRuntime,
            fmt::format("{}: not done within {:.0f} s (communicators aborted)", what, timeout_s_),
            {}, "check that every rank of the job started");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  [[noreturn]] void fail(ncclResult_t r, const std::string& what) {
    failed_ = true;
    abort_all();
    throw_nccl(r, fmt::format("rank {} (GPU {}): {}", rank_, device_, what));
  }

  // After an iteration (the device idle): what the driver says is in use, less what the
  // executor allocated itself, is the runtime's (context, cuBLASLt/cuDNN workspaces, NCCL).
  void measure_memory() {
    std::size_t free_b = 0, total_b = 0;
    check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    std::uint64_t used_high = 0, reserved_high = 0, reserved_now = 0;
    if (pool_) {
      check_cuda(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &used_high),
                 "cudaMemPoolGetAttribute (used high)");
      check_cuda(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &reserved_high),
                 "cudaMemPoolGetAttribute (reserved high)");
      check_cuda(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved_now),
                 "cudaMemPoolGetAttribute (reserved)");
    }
    MemoryMeasure& m = memory_;
    m.capacity = static_cast<double>(total_b);
    m.states = static_cast<double>(states_bytes_);
    m.scratch = static_cast<double>(t_scratch_bytes);
    m.activations_peak = static_cast<double>(used_high);
    m.activations_reserved = static_cast<double>(reserved_high);
    const double used = static_cast<double>(total_b - free_b);
    m.runtime = std::max(0.0, used - m.states - m.scratch - static_cast<double>(reserved_now));
    m.peak = m.runtime + m.states + m.activations_reserved;
  }

  void abort_all() {
    for (ncclComm_t& c : comms_) {
      if (c) ncclCommAbort(c);
      c = nullptr;
    }
  }

  int device_, rank_;
  double timeout_s_;
  bool failed_ = false;
  bool sizing_ = false;
  std::map<plan::Stream, std::size_t> need_;
  std::uint64_t launches_ = 0;  // dropout seeds
  std::map<plan::Stream, cudaStream_t> streams_;
  std::vector<plan::Stream> order_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaEvent_t> events_, markers_, ends_;
  cudaEvent_t begin_ = nullptr;
  std::map<plan::Stream, std::unique_ptr<Scratch>> scratch_;
  std::map<plan::Stream, OpInputs> inputs_;
  std::unique_ptr<kernels::GemmRunner> gemm_;
  void* states_ = nullptr;
  std::size_t states_bytes_ = 0;
  cudaMemPool_t pool_ = nullptr;
  std::map<int, void*> held_;
  MemoryMeasure memory_;
};

}  // namespace

int cuda_devices(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "the CUDA runtime sees no device";
    return 0;
  }
  return n;
}

CommId cuda_comm_id() {
  ncclUniqueId uid;
  const ncclResult_t r = ncclGetUniqueId(&uid);
  if (r != ncclSuccess) throw_nccl(r, "ncclGetUniqueId");
  CommId id{};
  std::memcpy(id.data(), &uid, sizeof uid);
  return id;
}

std::shared_ptr<Device> make_cuda_device(int device, int rank, double timeout_s) {
  return std::make_shared<CudaDevice>(device, rank, timeout_s);
}

}  // namespace trainsim::kexec
