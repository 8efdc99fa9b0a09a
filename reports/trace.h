// Chrome/Perfetto trace of one iteration: the task spans of a Timeline as
// trace-event JSON.
//
// The document is the "JSON Object Format" of the Trace Event Format (the
// format chrome://tracing and ui.perfetto.dev open): {"traceEvents": [...],
// "displayTimeUnit": "ms", "otherData": {...}}.
//   - one process per rank: pid = rank, named "rank N (stage S)" by a
//   process_name metadata event
//     and ordered by rank (process_sort_index);
//   - one thread per stream: the tid is fixed by the stream's name (compute 1,
//   tp 2, cp 3, ep 4,
//     dp 5, pp-send-next 6, pp-send-prev 7, pp-recv-prev 8, pp-recv-next 9;
//     other names 100 and up in name order), named by thread_name and ordered
//     by thread_sort_index so that the compute stream comes first;
//   - one complete event ("ph": "X") per span: name, cat (the span's category),
//   ts and dur in
//     microseconds rounded to the nanosecond, args with microbatch, chunk,
//     layer and bytes when they are set (≥ 0, bytes > 0), and for a kernel
//     slowed by collectives holding SMs (TraceSpan::slowed_s > 0) unslowed_us
//     (its time at full rate) and slowed_us (dur − unslowed_us).
// The same Timeline and TraceMeta give the same bytes: events follow the
// Timeline's span order, metadata the sorted ranks and streams, numbers are
// printed in one fixed way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/exec/result.h"

namespace trainsim::reports {

/// What the trace says about where it came from (its "otherData": profile,
/// profile_version, model_version, trainsim_version, fidelity, scenario, seed;
/// trainsim_version is added, profile_version and seed only when set).
struct TraceMeta {
  std::string scenario;       // scenario source (file path or name)
  std::string fidelity;       // "flow", "packet", "real" ...
  std::string model_version;  // performance-model version ("" for a measured run)
  std::string profile;        // calibration profile name
  std::string profile_version;  // its version ("" leaves it out)
  // simulation.seed of the run (every random draw comes from it); none for a measured run.
  std::optional<std::uint64_t> seed;
  // Where a rank's pipeline stage is read from (the rank numbering of
  // sim/plan/layout.h, plan::ParallelConfig::stage_of): the stage of rank r is
  // (r / stage_stride) % stages. A stage_stride of 0 leaves the stage out of the
  // process names.
  int stage_stride = 0;
  int stages = 1;
};

/// The trace-event JSON document of `timeline`, with a trailing newline.
std::string trace_event_json(const exec::Timeline &timeline, const TraceMeta &meta);

/// The thread id a stream's events carry (see the header comment); -1 for a
/// name outside the fixed table (the writer numbers those from 100 in name
/// order).
int trace_stream_tid(const std::string &stream);

}  // namespace trainsim::reports
