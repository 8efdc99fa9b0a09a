// kernels/device_info: the build says whether CUDA is compiled in, and querying devices on a
// machine without a GPU reports why instead of failing.
#include "kernels/device_info.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace trainsim::kernels
