// The CUDA implementation of Device (kernels/exec/device.h): one GPU, its streams, events,
// NCCL communicators and scratch buffers. Built with nvcc when the CUDA toolkit and NCCL are found
// (TRAINSIM_EXEC_CUDA); otherwise cuda_devices() reports why there is no GPU and the rest throws.
//
// What a task launches (the data are synthetic, of the exact shape; nothing is checked):
//   GEMM          cuBLASLt through kernels/gemm.h (GemmRunner), m×n×k, `batch` times;
//   attention     the fused FlashAttention-2-style kernels of kernels/launchers.h when they
//                 support the shape (head dim 64/128, fp16/bf16), else its two batched GEMMs;
//   memory-bound  one copy kernel per kernel of the op, moving the op's byte count in all (the
//                 per-op kernels of kernels/launchers.h are not mapped from op names yet);
//   collective    ncclAllReduce / AllGather / ReduceScatter / Broadcast, all-to-all as grouped
//                 ncclSend/ncclRecv; send/recv as ncclSend/ncclRecv on the edge's communicator.
// Every CUDA and NCCL status is checked and names the call. Communicators are non-blocking:
// creation and every iteration are polled against a deadline (ncclCommGetAsyncError,
// cudaEventQuery); past it, or on an asynchronous NCCL error, the communicators are aborted
// (ncclCommAbort) and Error(kRuntime) is thrown instead of hanging. Memory, events, streams and
// communicators are released by the destructor, on errors too.
#pragma once

#include <memory>
#include <string>

#include "kernels/exec/device.h"

namespace trainsim::kexec {

/// GPUs this process can use; 0 and the reason in `why` when none.
int cuda_devices(std::string* why);
/// A fresh NCCL unique id.
CommId cuda_comm_id();
/// Device `device` for job rank `rank`; call from the thread that will drive it.
/// `timeout_s` bounds communicator creation.
std::shared_ptr<Device> make_cuda_device(int device, int rank, double timeout_s);

}  // namespace trainsim::kexec
