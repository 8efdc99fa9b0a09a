#include "sim/plan/config.h"

namespace trainsim::plan {

const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::k1F1B: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
  }
  return "?";
}

const char* to_string(Optimizer o) { return o == Optimizer::kAdam ? "adam" : "lamb"; }

}  // namespace trainsim::plan
