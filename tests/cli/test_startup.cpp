// Start-up: commands that use no GPU map no CUDA library and, without mpirun, no MPI library
// (kernels/gpu_module.h, kernels/exec/process_group.h). Read from the process itself: with
// TRAINSIM_DEBUG_MAPPED_FILES=1 trainsim prints every file in /proc/self/maps at exit
// (cli/mapped_libraries.cpp). `info` is the control: in a CUDA build it loads the GPU module
// (it reports the visible GPUs), so the same check must see the CUDA libraries there.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;

// `VAR=VALUE trainsim ARGS` through the shell.
CliRun trainsim_env(const std::string& env, const std::string& args) {
  const std::string out = trainsim::testing::temp_path("startup_out");
  const std::string err = trainsim::testing::temp_path("startup_err");
  CliRun r;
  r.code = trainsim::testing::shell(env + " " + TRAINSIM_BINARY + " " + args + " > " + out +
                                    " 2> " + err);
  r.out = trainsim::testing::slurp(out);
  r.err = trainsim::testing::slurp(err);
  return r;
}

const std::regex kCuda("lib(cuda|cudart|cublas|cublasLt|nccl|cudnn|trainsim_gpu)[.-]");
const std::regex kMpi("lib(mpi|open-pal|open-rte|trainsim_mpi|pmix|hwloc)[-._]");

std::vector<std::string> mapped(const CliRun& r) {
  std::vector<std::string> files;
  std::istringstream lines(r.err);
  bool ended = false;
  for (std::string line; std::getline(lines, line);) {
    const std::string tag = "trainsim-mapped: ";
    if (line.rfind(tag, 0) != 0) continue;
    if (line == tag + "end") ended = true;
    else files.push_back(line.substr(tag.size()));
  }
  EXPECT_TRUE(ended) << "no list of mapped files at exit:\n" << r.err;
  return files;
}

std::vector<std::string> matching(const std::vector<std::string>& files, const std::regex& re) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    const std::size_t slash = f.rfind('/');
    if (std::regex_search(f.substr(slash == std::string::npos ? 0 : slash + 1), re)) {
      out.push_back(f);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += "  " + x + "\n";
  return s;
}

// `trainsim ARGS` with the list of mapped files printed at exit.
CliRun with_maps(const std::string& args) {
  return trainsim_env("TRAINSIM_DEBUG_MAPPED_FILES=1", args);
}

TEST(Startup, CommandsWithoutAGpuMapNoCudaAndNoMpi) {
  const std::string sweep_out = trainsim::testing::temp_path("startup_sweep.txt");
  for (const std::string& args :
       {std::string("--version"), std::string("run"), std::string("run --format json"),
        std::string("run --set parallel.pp=16 --set training.micro_batch=2"),
        std::string("explain parallel.tp"), std::string("--list-presets"),
        "sweep --vary parallel.pp=4,8 --jobs 2 -o " + sweep_out,
        std::string("collective --cluster selene-a100 --op all_reduce --ranks 16 --sizes 1M:4M"),
        std::string("topo --cluster selene-a100")}) {
    SCOPED_TRACE(args);
    const CliRun r = with_maps(args);
    EXPECT_EQ(r.code, 0) << r.err;
    const std::vector<std::string> files = mapped(r);
    // The check itself works: the C library and the executable are in the list.
    EXPECT_FALSE(matching(files, std::regex("^libc[.-]")).empty()) << joined(files);
    EXPECT_EQ(matching(files, kCuda), std::vector<std::string>{}) << joined(files);
    EXPECT_EQ(matching(files, kMpi), std::vector<std::string>{}) << joined(files);
  }
}

// The event-driven fidelities advise the heap to use huge pages (sim/core/process_memory.h);
// the analytic commands do not touch it, and TRAINSIM_HUGE_PAGES=0 turns it off. Either way the
// results are the same to the byte.
std::string heap_advised(const CliRun& r) {
  const std::string tag = "trainsim-heap-advised: ";
  const std::size_t at = r.err.find(tag);
  if (at == std::string::npos) return "(not printed)";
  return r.err.substr(at + tag.size(), r.err.find('\n', at) - at - tag.size());
}

TEST(Startup, EventDrivenRunsAdviseHugePagesWithTheSameResults) {
#if defined(__linux__) && defined(__GLIBC__)
  // A kernel built without transparent huge pages refuses the advice (the run goes on as before).
  const bool thp = std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
#else
  const bool thp = false;
#endif
  const std::string small =
      "--set cluster.gpus=64 --set training.global_batch=32 --format json";
  const CliRun analytic = with_maps("run " + small);
  ASSERT_EQ(analytic.code, 0) << analytic.err;
  EXPECT_EQ(heap_advised(analytic), "no");
  for (const std::string& fidelity : {std::string("schedule"), std::string("flow")}) {
    SCOPED_TRACE(fidelity);
    const CliRun on = with_maps("run --fidelity " + fidelity + " " + small);
    const CliRun off = trainsim_env("TRAINSIM_DEBUG_MAPPED_FILES=1 TRAINSIM_HUGE_PAGES=0",
                                    "run --fidelity " + fidelity + " " + small);
    ASSERT_EQ(on.code, 0) << on.err;
    ASSERT_EQ(off.code, 0) << off.err;
    if (thp) {
      EXPECT_EQ(heap_advised(on), "yes") << on.err.substr(0, 400);
    }
    EXPECT_EQ(heap_advised(off), "no");
    EXPECT_EQ(on.out, off.out);
  }
  const std::string coll = "collective --cluster selene-a100 --op all_reduce --ranks 16 "
                           "--sizes 1M:4M --fidelity flow --format json";
  const CliRun con = with_maps(coll);
  const CliRun coff = trainsim_env("TRAINSIM_DEBUG_MAPPED_FILES=1 TRAINSIM_HUGE_PAGES=0", coll);
  ASSERT_EQ(con.code, 0) << con.err;
  if (thp) {
    EXPECT_EQ(heap_advised(con), "yes");
  }
  EXPECT_EQ(con.out, coff.out);
}

TEST(Startup, InfoLoadsTheGpuModuleOnlyInACudaBuild) {
  const CliRun r = with_maps("info");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> files = mapped(r);
  const std::vector<std::string> cuda = matching(files, kCuda);
#if TRAINSIM_HAVE_CUDA
  // The control: the module and cuBLASLt are seen when they are loaded.
  EXPECT_FALSE(matching(cuda, std::regex("^libtrainsim_gpu[.]so")).empty()) << joined(files);
  EXPECT_FALSE(matching(cuda, std::regex("^libcublasLt")).empty()) << joined(files);
  EXPECT_NE(r.out.find("CUDA: compiled with CUDA"), std::string::npos) << r.out;
#else
  EXPECT_EQ(cuda, std::vector<std::string>{}) << joined(files);
  EXPECT_NE(r.out.find("CUDA: not compiled"), std::string::npos) << r.out;
#endif
  EXPECT_NE(r.out.find("devices: "), std::string::npos) << r.out;
}

#if TRAINSIM_HAVE_CUDA
// Without its module, a CUDA build behaves like a machine without a GPU: `info` says why and
// the GPU commands exit 4 with "no CUDA device found".
TEST(Startup, AMissingGpuModuleIsNoDevice) {
  const std::string gone = "TRAINSIM_GPU_MODULE=/nonexistent/libtrainsim_gpu.so";
  const CliRun info = trainsim_env(gone, "info");
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_NE(info.out.find("CUDA: compiled with CUDA"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("is not installed (looked for /nonexistent/libtrainsim_gpu.so)"),
            std::string::npos)
      << info.out;
  for (const char* cmd : {"calibrate kernels --out x.json", "calibrate nccl --out x.json",
                          "execute"}) {
    SCOPED_TRACE(cmd);
    const CliRun r = trainsim_env(gone, cmd);
    EXPECT_EQ(r.code, 4) << r.err;
    EXPECT_NE(r.err.find("no CUDA device found"), std::string::npos) << r.err;
  }
}
#endif

}  // namespace
