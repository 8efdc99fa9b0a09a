// A dot fabric file (topo --topology-file): read into a cluster graph.
#include "tests/fuzz/fuzz_common.h"
#include "topology/fabric_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  try {
    const topo::ClusterSpec base;
    const topo::ClusterGraph g =
        topo::read_fabric_text(fuzz::as_text(data, size), topo::FabricFormat::kGraphViz, "fuzz.dot",
                               base);
    if (g.gpu_count() <= 0) std::abort();
  } catch (const Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
