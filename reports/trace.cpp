#include "reports/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

// Streams in the order a reader wants them: compute first, then the
// collectives, then the pipeline point-to-point streams (the order of
// plan::Stream).
constexpr const char *kStreams[] = {"compute",      "tp",           "cp",
                                    "ep",           "dp",           "pp-send-next",
                                    "pp-send-prev", "pp-recv-prev", "pp-recv-next"};

std::string json_string(const std::string &s) { return nlohmann::json(s).dump(); }

// Seconds → microseconds with nanosecond resolution, as integer nanoseconds
// (printed by `us`).
long long to_ns(double s) { return std::llround(s * 1e9); }

// Integer nanoseconds printed as microseconds: "12", "12.5", "12.345" (no float
// noise).
std::string us(long long ns) {
  const bool neg = ns < 0;
  const unsigned long long a = neg ? static_cast<unsigned long long>(-ns) : ns;
  std::string out = fmt::format("{}{}", neg ? "-" : "", a / 1000);
  unsigned long long frac = a % 1000;
  if (frac == 0) return out;
  std::string f = fmt::format("{:03}", frac);
  while (!f.empty() && f.back() == '0') f.pop_back();
  return out + "." + f;
}

}  // namespace

int trace_stream_tid(const std::string &stream) {
  for (int i = 0; i < static_cast<int>(std::size(kStreams)); ++i) {
    if (stream == kStreams[i]) return i + 1;
  }
  return -1;
}

std::string trace_event_json(const exec::Timeline &timeline, const TraceMeta &meta) {
  // Ranks: those the timeline names plus any that only appear in spans; streams
  // per rank.
  std::set<int> ranks(timeline.ranks.begin(), timeline.ranks.end());
  std::map<int, std::set<std::string>> streams;
  std::set<std::string> other_streams;
  for (const exec::TraceSpan &s : timeline.spans) {
    ranks.insert(s.rank);
    streams[s.rank].insert(s.stream);
    if (trace_stream_tid(s.stream) < 0) other_streams.insert(s.stream);
  }
  std::map<std::string, int> tid;
  for (const char *s : kStreams) tid[s] = trace_stream_tid(s);
  int next = 100;
  for (const std::string &s : other_streams) tid[s] = next++;

  std::string o = "{\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string &e) {
    if (!first) o += ",\n";
    first = false;
    o += e;
  };
  for (int r : ranks) {
    std::string name = fmt::format("rank {}", r);
    if (meta.stage_stride > 0) {
      name += fmt::format(" (stage {})", (r / meta.stage_stride) % std::max(1, meta.stages));
    }
    event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":{}}}}})",
                      r, json_string(name)));
    event(fmt::format(
        R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})",
        r, r));
    // Streams in tid order, so that compute (tid 1) is listed and sorted first.
    std::map<int, std::string> by_tid;
    for (const std::string &s : streams[r]) by_tid[tid.at(s)] = s;
    for (const auto &[t, s] : by_tid) {
      event(
          fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})",
                      r, t, json_string(s)));
      event(fmt::format(
          R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})",
          r, t, t));
    }
  }
  for (const exec::TraceSpan &s : timeline.spans) {
    const long long start = to_ns(s.start_s);
    const long long dur = std::max(0LL, to_ns(s.end_s) - start);
    std::string args;
    auto arg = [&](const char *key, const std::string &value) {
      args += fmt::format("{}\"{}\":{}", args.empty() ? "" : ",", key, value);
    };
    if (s.microbatch >= 0) arg("microbatch", std::to_string(s.microbatch));
    if (s.chunk >= 0) arg("chunk", std::to_string(s.chunk));
    if (s.layer >= 0) arg("layer", std::to_string(s.layer));
    if (s.bytes > 0) arg("bytes", fmt::format("{:.0f}", s.bytes));
    if (s.slowed_s > 0) {
      // A kernel slowed by collectives holding SMs: its time at full rate (what task_kinds and
      // breakdown.compute_s count) and the time it lost (exposed communication).
      const long long slowed = std::min(dur, to_ns(s.slowed_s));
      arg("unslowed_us", us(dur - slowed));
      arg("slowed_us", us(slowed));
    }
    event(fmt::format(
        R"({{"ph":"X","pid":{},"tid":{},"name":{},"cat":{},"ts":{},"dur":{},"args":{{{}}}}})",
        s.rank, tid.at(s.stream), json_string(s.name), json_string(s.category), us(start), us(dur),
        args));
  }
  nlohmann::ordered_json other;
  other["profile"] = meta.profile;
  if (!meta.profile_version.empty()) other["profile_version"] = meta.profile_version;
  other["model_version"] = meta.model_version;
  other["trainsim_version"] = kVersion;
  other["fidelity"] = meta.fidelity;
  other["scenario"] = meta.scenario;
  if (meta.seed) other["seed"] = *meta.seed;
  o += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" + other.dump() + "}\n";
  return o;
}

}  // namespace trainsim::reports
