// kernels/device_info: the build says whether CUDA is compiled in, and querying devices on a
// machine without a GPU reports why instead of failing.
#include "kernels/device_info.h"

#include <gtest/gtest.h>

#include "kernels/bench.h"
#include "kernels/device_ops.h"
#include "kernels/nccl_bench.h"
#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

TEST(DeviceInfo, ReportsBuildAndDevices) {
  const DeviceReport r = query_devices();
  EXPECT_EQ(r.cuda_compiled, TRAINSIM_HAVE_CUDA == 1);
  EXPECT_FALSE(r.status.empty());
  if (r.cuda_compiled) {
    EXPECT_FALSE(r.cuda_version.empty());  // the runtime linked in answers even without a GPU
  } else {
    EXPECT_NE(r.status.find("no CUDA support"), std::string::npos);
    EXPECT_TRUE(r.devices.empty());
  }
  if (r.status == "ok") {
    EXPECT_FALSE(r.devices.empty());
  }
}

// In a CUDA build these calls cross into the GPU module (kernels/gpu_module.h); an error thrown
// there must arrive as the trainsim::Error it is, so the CLI maps it to exit code 4.
TEST(DeviceInfo, GpuCallsWithoutADeviceThrowRuntimeErrors) {
  std::string why;
  if (dev::device_available(&why)) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(why.empty());
  BenchItem item;
  item.op = "gemm";
  item.m = item.n = item.k = 256;
  try {
    run_kernel_bench({item}, BenchOptions{}, {});
    ADD_FAILURE() << "run_kernel_bench ran without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime) << e.what();
  }
  try {
    dev::gemm_supported(DType::kBf16);
    ADD_FAILURE() << "gemm_supported answered without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime) << e.what();
  }
  EXPECT_EQ(nccl_version().empty(), !nccl_built());
}

}  // namespace
}  // namespace trainsim::kernels
