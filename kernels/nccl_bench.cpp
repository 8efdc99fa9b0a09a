#include "kernels/nccl_bench.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "kernels/cuda_check.h"
#include "kernels/launchers.h"
#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    throw Error(ErrorKind::kRuntime, std::string("NCCL: ") + what + ": " + ncclGetErrorString(r));
  }
}

// A communicator per device, destroyed together.
struct Comms {
  std::vector<ncclComm_t> comms;
  bool aborted = false;  // after ncclCommAbort the handles are gone
  explicit Comms(const std::vector<int>& devices) : comms(devices.size()) {
    check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()),
               "ncclCommInitAll");
  }
  // This process's share of a communicator of `world` ranks: devices[i] is rank first + i.
  Comms(const std::vector<int>& devices, int world, int first, const ncclUniqueId& id)
      : comms(devices.size()) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < devices.size(); ++i) {
      check_cuda(cudaSetDevice(devices[i]), "cudaSetDevice");
      check_nccl(ncclCommInitRank(&comms[i], world, id, first + static_cast<int>(i)),
                 "ncclCommInitRank");
    }
    check_nccl(ncclGroupEnd(), "ncclCommInitRank (group)");
  }
  ~Comms() {
    if (aborted) return;
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;
};

// Launches `op` of `bytes` total (nccl-tests' size: the larger of send and receive buffers).
void launch(const std::string& op, std::size_t bytes, int rank, int ranks, void* send, void* recv,
            ncclComm_t comm, cudaStream_t s) {
  const std::size_t count = bytes / sizeof(float);
  const std::size_t per_rank = count / static_cast<std::size_t>(ranks);
  if (op == "all_reduce") {
    check_nccl(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s), "ncclAllReduce");
  } else if (op == "all_gather") {
    check_nccl(ncclAllGather(send, recv, per_rank, ncclFloat, comm, s), "ncclAllGather");
  } else if (op == "reduce_scatter") {
    check_nccl(ncclReduceScatter(send, recv, per_rank, ncclFloat, ncclSum, comm, s),
               "ncclReduceScatter");
  } else if (op == "broadcast") {
    check_nccl(ncclBroadcast(send, recv, count, ncclFloat, 0, comm, s), "ncclBroadcast");
  } else if (op == "all_to_all") {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int peer = 0; peer < ranks; ++peer) {
      check_nccl(
          ncclSend(static_cast<float*>(send) + peer * per_rank, per_rank, ncclFloat, peer, comm, s),
          "ncclSend");
      check_nccl(
          ncclRecv(static_cast<float*>(recv) + peer * per_rank, per_rank, ncclFloat, peer, comm, s),
          "ncclRecv");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  } else {
    throw Error(ErrorKind::kInput, "unknown collective `" + op + "`", {}, "");
  }
  (void)rank;
}

std::vector<int> resolve_devices(const std::vector<int>& wanted) {
  if (!wanted.empty()) return wanted;
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  std::vector<int> all(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) all[static_cast<std::size_t>(i)] = i;
  return all;
}

}  // namespace

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL_VERSION_CODE: major·10000 + minor·100 + patch since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

bool nccl_built() { return true; }

namespace {

// The sweep over this process's `devices`; with several processes, `procs` joins them into one
// communicator (process p's i-th device is rank p·L+i) and the times are maxed over all of them.
std::vector<calib::NcclTestsRun> bench(const NcclBenchOptions& o, const std::vector<int>& devices,
                                       const NcclBenchProcesses* procs) {
  const int local = static_cast<int>(devices.size());
  const bool multi = procs != nullptr && procs->count > 1;
  const int ranks = multi ? local * procs->count : local;
  const int first_rank = multi ? local * procs->index : 0;
  if (ranks < 2) {
    throw Error(ErrorKind::kRuntime,
                "calibrate nccl needs at least 2 GPUs; " + std::to_string(ranks) + " visible", {},
                "run it on a multi-GPU server, or import nccl-tests output");
  }
  std::vector<std::size_t> sizes;
  for (double b = o.min_bytes; b <= o.max_bytes; b *= 2) {
    // Divisible by ranks·4 so every rank's share is whole floats.
    const std::size_t unit = static_cast<std::size_t>(ranks) * sizeof(float);
    sizes.push_back(std::max(unit, static_cast<std::size_t>(b) / unit * unit));
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, devices[0]), "cudaGetDeviceProperties");
  std::vector<calib::NcclTestsRun> runs;
  for (const std::string& op : o.ops) {
    calib::NcclTestsRun run;
    run.path = "nccl:" + op;
    run.op = op;
    run.ranks = ranks;
    run.nodes = multi ? procs->nodes : 1;
    run.gpu_name = prop.name;
    run.version_line = "# trainsim calibrate nccl: nThread " + std::to_string(local) +
                       " nGpus 1 NCCL " + nccl_version();
    if (multi) run.version_line += " (" + procs->where + ")";
    run.rows.resize(sizes.size());
    runs.push_back(std::move(run));
  }
  // times[op][size][rank] in µs
  std::vector<std::vector<std::vector<double>>> times(
      o.ops.size(),
      std::vector<std::vector<double>>(sizes.size(), std::vector<double>(devices.size(), 0)));
  std::unique_ptr<Comms> made;
  if (multi) {
    // Process 0 makes the id; every process joins with its ranks.
    std::string id_bytes;
    if (procs->index == 0) {
      ncclUniqueId id{};
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      id_bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    procs->broadcast(id_bytes);
    if (id_bytes.size() != sizeof(ncclUniqueId)) {
      throw Error(ErrorKind::kRuntime, "the NCCL id broadcast from process 0 is truncated");
    }
    ncclUniqueId id{};
    std::memcpy(&id, id_bytes.data(), sizeof id);
    made = std::make_unique<Comms>(devices, ranks, first_rank, id);
  } else {
    made = std::make_unique<Comms>(devices);
  }
  Comms& comms = *made;
  // Before each repeat the local threads meet; the last to arrive also meets the other
  // processes (an all-gather of nothing), unless a rank failed (the caller then ends the job).
  std::atomic<bool> failed{false};
  auto across = [&]() noexcept {
    if (!multi || failed.load()) return;
    try {
      procs->allgather("");
    } catch (...) {
      failed.store(true);
    }
  };
  std::barrier sync(local, across);
  std::mutex error_mutex;
  std::exception_ptr error;
  auto worker = [&](int rank) {
    try {
      check_cuda(cudaSetDevice(devices[static_cast<std::size_t>(rank)]), "cudaSetDevice");
      cudaStream_t s = nullptr;
      check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      void *send = nullptr, *recv = nullptr;
      const std::size_t maxb = sizes.back();
      check_cuda(cudaMalloc(&send, maxb), "cudaMalloc");
      check_cuda(cudaMalloc(&recv, maxb), "cudaMalloc");
      launch_fill_uniform(DType::kF32, send, maxb / 4, -1, 1, 77 + rank, s);
      cudaEvent_t a, b;
      check_cuda(cudaEventCreate(&a), "cudaEventCreate");
      check_cuda(cudaEventCreate(&b), "cudaEventCreate");
      ncclComm_t comm = comms.comms[static_cast<std::size_t>(rank)];
      for (std::size_t oi = 0; oi < o.ops.size(); ++oi) {
        for (std::size_t si = 0; si < sizes.size(); ++si) {
          for (int w = 0; w < o.warmup; ++w)
            launch(o.ops[oi], sizes[si], rank, ranks, send, recv, comm, s);
          std::vector<float> ms(static_cast<std::size_t>(o.repeats));
          for (int i = 0; i < o.repeats; ++i) {
            check_cuda(cudaStreamSynchronize(s), "synchronize");
            sync.arrive_and_wait();  // ranks start each repeat together
            check_cuda(cudaEventRecord(a, s), "cudaEventRecord");
            launch(o.ops[oi], sizes[si], rank, ranks, send, recv, comm, s);
            check_cuda(cudaEventRecord(b, s), "cudaEventRecord");
            check_cuda(cudaEventSynchronize(b), o.ops[oi].c_str());
            check_cuda(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], a, b),
                       "cudaEventElapsedTime");
          }
          std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2),
                           ms.end());
          times[oi][si][static_cast<std::size_t>(rank)] = ms[ms.size() / 2] * 1e3;
        }
      }
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaFree(send);
      cudaFree(recv);
      cudaStreamDestroy(s);
    } catch (...) {
      // A failed rank would leave the others blocked in NCCL or at the barrier: the first
      // failure aborts the communicators (their pending calls then fail too) and every failed
      // rank leaves the barrier, so all threads return and the error surfaces after join.
      failed.store(true);
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(error_mutex);
        first = !error;
        if (first) error = std::current_exception();
      }
      if (first) {
        for (ncclComm_t c : comms.comms) ncclCommAbort(c);
        comms.aborted = true;
      }
      sync.arrive_and_drop();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < local; ++r) threads.emplace_back(worker, r);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  if (failed.load()) throw Error(ErrorKind::kRuntime, "the barrier across processes failed");
  // The slowest rank counts: the max over this process's ranks, then over all processes.
  std::vector<double> slowest;
  for (const auto& op_times : times) {
    for (const auto& size_times : op_times) {
      slowest.push_back(*std::max_element(size_times.begin(), size_times.end()));
    }
  }
  if (multi) {
    const std::string mine(reinterpret_cast<const char*>(slowest.data()),
                           slowest.size() * sizeof(double));
    for (const std::string& theirs : procs->allgather(mine)) {
      if (theirs.size() != mine.size()) {
        throw Error(ErrorKind::kRuntime, "the timings gathered from the processes differ in size");
      }
      for (std::size_t i = 0; i < slowest.size(); ++i) {
        double t = 0;
        std::memcpy(&t, theirs.data() + i * sizeof(double), sizeof t);
        slowest[i] = std::max(slowest[i], t);
      }
    }
  }
  for (std::size_t oi = 0; oi < o.ops.size(); ++oi) {
    for (std::size_t si = 0; si < sizes.size(); ++si) {
      calib::NcclTestsRow& row = runs[oi].rows[si];
      row.size_bytes = static_cast<std::int64_t>(sizes[si]);
      row.count = row.size_bytes / 4;
      row.type = "float";
      row.redop = o.ops[oi] == "all_reduce" || o.ops[oi] == "reduce_scatter" ? "sum" : "none";
      row.root = o.ops[oi] == "broadcast" ? 0 : -1;
      row.out_of_place_us = slowest[oi * sizes.size() + si];
    }
  }
  return runs;
}

}  // namespace

std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions& o) {
  return bench(o, resolve_devices(o.devices), nullptr);
}

std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions& o,
                                                const NcclBenchProcesses& processes) {
  return bench(o, resolve_devices(o.devices), &processes);
}

std::vector<float> nccl_all_reduce_check(const std::vector<float>& values, int n_devices) {
  std::vector<int> devices(static_cast<std::size_t>(n_devices));
  for (int i = 0; i < n_devices; ++i) devices[static_cast<std::size_t>(i)] = i;
  Comms comms(devices);
  std::vector<float> out(values.size());
  std::vector<std::thread> threads;
  std::mutex error_mutex;
  std::exception_ptr error;
  for (int r = 0; r < n_devices; ++r) {
    threads.emplace_back([&, r] {
      try {
        check_cuda(cudaSetDevice(devices[static_cast<std::size_t>(r)]), "cudaSetDevice");
        const std::size_t bytes = values.size() * sizeof(float);
        void* buf = nullptr;
        check_cuda(cudaMalloc(&buf, bytes), "cudaMalloc");
        check_cuda(cudaMemcpy(buf, values.data(), bytes, cudaMemcpyHostToDevice), "upload");
        launch("all_reduce", bytes, r, n_devices, buf, buf,
               comms.comms[static_cast<std::size_t>(r)], nullptr);
        check_cuda(cudaDeviceSynchronize(), "all_reduce");
        if (r == 0) {
          check_cuda(cudaMemcpy(out.data(), buf, bytes, cudaMemcpyDeviceToHost), "download");
        }
        cudaFree(buf);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace trainsim::kernels
