// Tests of the Chrome/Perfetto trace writer (reports/trace.h) on a hand-made
// Timeline of 2 ranks × 3 streams. Expected, by hand: 2 process_name + 2
// process_sort_index records, 3 thread_name + 3 thread_sort_index records per
// rank (16 "M" events in all) and one "X" event per span (8); rank 5 is stage 1
// when a stage holds 4 ranks; compute is tid 1, tp 2, dp 5, pp-send-next 6,
// pp-recv-prev 8; the span [1.5 µs, 3.25 µs] becomes ts 1.5, dur 1.75; [2
// µs, 2.007 µs] dur 0.007.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "reports/trace.h"

namespace trainsim::reports {
namespace {

using nlohmann::json;

exec::TraceSpan span(int rank, const char *stream, const char *name, const char *cat, double start,
                     double end, int mb = -1, int layer = -1, double bytes = 0) {
  exec::TraceSpan s;
  s.rank = rank;
  s.stream = stream;
  s.name = name;
  s.category = cat;
  s.start_s = start;
  s.end_s = end;
  s.microbatch = mb;
  s.layer = layer;
  s.bytes = bytes;
  return s;
}

exec::Timeline timeline() {
  exec::Timeline t;
  t.ranks = {1, 5};
  t.spans = {
      span(1, "compute", "qkv fwd", "compute", 0, 1e-6, 0, 0),
      span(1, "tp", "all-gather tp", "tp", 1.5e-6, 3.25e-6, 0, 0, 4096),
      span(1, "compute", "attention fwd", "compute", 3.25e-6, 10e-6, 0, 0),
      span(1, "pp-send-next", "send-next pp", "pp", 10e-6, 12e-6, 0, -1, 1 << 20),
      span(5, "compute", "data loading", "data", 0, 2e-6),
      span(5, "dp", "reduce-scatter dp", "dp", 2e-6, 2.007e-6, -1, -1, 1e9),
      span(5, "pp-recv-prev", "recv-prev pp", "pp", 0, 2.5e-6, 0, -1, 1 << 20),
      span(5, "compute", "optimizer", "optimizer", 3e-6, 4e-6),
  };
  t.spans[2].chunk = 1;
  return t;
}

TraceMeta meta() {
  TraceMeta m;
  m.scenario = "scenarios/tiny.yaml";
  m.fidelity = "flow";
  m.model_version = "exec-1";
  m.profile = "datasheet-h100";
  m.stage_stride = 4;
  m.stages = 2;
  return m;
}

TEST(Trace, MetadataProcessesAndThreads) {
  const json j = json::parse(trace_event_json(timeline(), meta()));
  EXPECT_EQ(j.at("displayTimeUnit"), "ms");
  const json &other = j.at("otherData");
  EXPECT_EQ(other.at("scenario"), "scenarios/tiny.yaml");
  EXPECT_EQ(other.at("fidelity"), "flow");
  EXPECT_EQ(other.at("model_version"), "exec-1");
  EXPECT_EQ(other.at("profile"), "datasheet-h100");
  EXPECT_TRUE(other.at("trainsim_version").is_string());

  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  std::map<std::pair<int, int>, int> thread_sort;
  int metadata = 0;
  for (const json &e : j.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    ++metadata;
    const int pid = e.at("pid"), tid = e.at("tid");
    if (e.at("name") == "process_name") process[pid] = e.at("args").at("name");
    if (e.at("name") == "thread_name") thread[{pid, tid}] = e.at("args").at("name");
    if (e.at("name") == "thread_sort_index")
      thread_sort[{pid, tid}] = e.at("args").at("sort_index");
  }
  EXPECT_EQ(metadata, 16);
  EXPECT_EQ(process,
            (std::map<int, std::string>{{1, "rank 1 (stage 0)"}, {5, "rank 5 (stage 1)"}}));
  const std::map<std::pair<int, int>, std::string> want = {
      {{1, 1}, "compute"}, {{1, 2}, "tp"}, {{1, 6}, "pp-send-next"},
      {{5, 1}, "compute"}, {{5, 5}, "dp"}, {{5, 8}, "pp-recv-prev"}};
  EXPECT_EQ(thread, want);
  for (const auto &[key, sort] : thread_sort) EXPECT_EQ(sort, key.second);  // compute first
}

TEST(Trace, CompleteEventsRoundTrip) {
  const exec::Timeline t = timeline();
  const json j = json::parse(trace_event_json(t, meta()));
  const double end_us = 12.0;  // the timeline's last end
  std::vector<json> spans;
  for (const json &e : j.at("traceEvents")) {
    if (e.at("ph") == "X") spans.push_back(e);
  }
  ASSERT_EQ(spans.size(), t.spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const json &e = spans[i];
    const exec::TraceSpan &s = t.spans[i];
    EXPECT_EQ(e.at("name"), s.name);
    EXPECT_EQ(e.at("cat"), s.category);
    EXPECT_EQ(e.at("pid"), s.rank);
    EXPECT_EQ(e.at("tid"), trace_stream_tid(s.stream));
    const double ts = e.at("ts"), dur = e.at("dur");
    EXPECT_GE(dur, 0);
    EXPECT_GE(ts, 0);
    EXPECT_LE(ts + dur, end_us + 1e-9);
    EXPECT_NEAR(ts, s.start_s * 1e6, 1e-3);
    EXPECT_NEAR(dur, (s.end_s - s.start_s) * 1e6, 2e-3);
  }
  EXPECT_EQ(spans[1].at("ts"), 1.5);
  EXPECT_EQ(spans[1].at("dur"), 1.75);
  EXPECT_EQ(spans[5].at("dur"), 0.007);  // 7 ns: sub-µs precision kept
  EXPECT_EQ(spans[1].at("args"), json({{"microbatch", 0}, {"layer", 0}, {"bytes", 4096}}));
  EXPECT_EQ(spans[2].at("args"), json({{"microbatch", 0}, {"chunk", 1}, {"layer", 0}}));
  EXPECT_EQ(spans[4].at("args"), json::object());
  EXPECT_EQ(spans[5].at("args").at("bytes"), 1e9);
  // Metadata first, then the spans in the Timeline's order.
  EXPECT_EQ(j.at("traceEvents").size(), 16 + t.spans.size());
}

TEST(Trace, DeterministicAndUnknownStreams) {
  exec::Timeline t = timeline();
  EXPECT_EQ(trace_event_json(t, meta()), trace_event_json(t, meta()));
  t.spans.push_back(span(5, "zz-extra", "x", "other", 0, 1e-6));
  t.spans.push_back(span(5, "aa-extra", "y", "other", 0, 1e-6));
  const json j = json::parse(trace_event_json(t, meta()));
  std::map<std::string, int> tids;
  for (const json &e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      tids[e.at("args").at("name")] = e.at("tid");
  }
  EXPECT_EQ(tids.at("aa-extra"), 100);
  EXPECT_EQ(tids.at("zz-extra"), 101);
  TraceMeta no_stage = meta();
  no_stage.stage_stride = 0;
  const json k = json::parse(trace_event_json(t, no_stage));
  EXPECT_EQ(k.at("traceEvents").at(0).at("args").at("name"), "rank 1");
  // The tp-cp-pp-dp order (parallel.order): a replica's 4 stages on consecutive ranks (TP 1),
  // so rank 5 is stage 1 of the second replica.
  TraceMeta pp_inner = meta();
  pp_inner.stage_stride = 1;
  pp_inner.stages = 4;
  const json q = json::parse(trace_event_json(t, pp_inner));
  std::map<int, std::string> names;
  for (const json &e : q.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") names[e.at("pid")] = e.at("args").at("name");
  }
  EXPECT_EQ(names.at(5), "rank 5 (stage 1)");
}

TEST(Trace, EmptyTimelineIsValidJson) {
  const json j = json::parse(trace_event_json({}, {}));
  EXPECT_TRUE(j.at("traceEvents").empty());
}

}  // namespace
}  // namespace trainsim::reports
