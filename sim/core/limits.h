// The input-limits policy (docs/reliability.md): every bound an input is checked against at the
// boundary, in one place. A value outside these limits is refused with trainsim::Error (exit 2)
// naming the file, line and key; a job whose estimated work is above a work limit is refused
// (exit 2) unless `--force` is given. Nothing here changes a simulated number on valid input.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trainsim::limits {

// ---- files --------------------------------------------------------------------------------------
// Only regular files are read (a directory, FIFO, socket or device is refused by name), and none
// beyond its kind's size. The sizes are far above any real input: a scenario is a few kB, the
// project's published-runs.csv 10 kB, a 1-million-node GraphViz fabric 40 MB.
inline constexpr std::size_t kMaxScenarioBytes = std::size_t{4} << 20;    // 4 MiB
inline constexpr std::size_t kMaxCsvBytes = std::size_t{16} << 20;        // 16 MiB
inline constexpr std::size_t kMaxNcclTestsBytes = std::size_t{64} << 20;  // 64 MiB
inline constexpr std::size_t kMaxProfileBytes = std::size_t{64} << 20;    // 64 MiB
inline constexpr std::size_t kMaxFabricBytes = std::size_t{256} << 20;    // 256 MiB
inline constexpr std::size_t kMaxResultBytes = std::size_t{256} << 20;    // 256 MiB (compare)
inline constexpr std::size_t kMaxCheckpointBytes = std::size_t{1} << 30;  // 1 GiB (sweep)

// ---- names and nesting --------------------------------------------------------------------------
// A key, preset, column or node name longer than this is refused before any lookup; "did you
// mean" computes edit distances only for names up to kMaxSuggestLength characters (an edit
// distance is quadratic in the lengths).
inline constexpr std::size_t kMaxNameLength = 256;
inline constexpr std::size_t kMaxSuggestLength = 64;
// GraphML elements and GraphViz `{` blocks nest at most this deep (the Boost readers recurse
// once per level; 30,000 levels overflow the stack).
inline constexpr int kMaxNestingDepth = 256;

// ---- numbers ------------------------------------------------------------------------------------
// Every number is finite and, when not 0, of magnitude at least kMinMagnitude (a subnormal double
// such as 1e-320 is refused: it cannot be printed back and read again, and divides to inf). A
// float key without its own maximum is at most kMaxMagnitude.
inline constexpr double kMinMagnitude = 2.2250738585072014e-308;  // DBL_MIN
inline constexpr double kMaxMagnitude = 1e15;

// Physical bounds of calibration and fabric numbers.
inline constexpr double kMinEfficiency = 1e-3;      // fraction of peak: [0.001, 1]
inline constexpr double kMaxLatency_s = 1.0;        // any per-step or per-kernel latency: < 1 s
inline constexpr double kMaxHostTime_s = 3600.0;    // data loading per iteration, kernel medians
inline constexpr double kMinBandwidth_Bps = 1e6;    // 1 MB/s
inline constexpr double kMaxBandwidth_Bps = 1e15;   // 1 PB/s
inline constexpr double kMaxCableGbps = 1e5;        // 100 Tb/s per cable
inline constexpr double kMaxCableLatency_ns = 1e9;  // 1 s
inline constexpr double kMaxMessageBytes = 1125899906842624.0;  // 2^50 (nccl-tests sizes)
inline constexpr double kMaxCollectiveTime_us = 1e9;            // 1000 s (nccl-tests times)
inline constexpr std::int64_t kMaxRanks = 1 << 26;              // nccl-tests nGpus, ranks

// Physical bounds of scenario keys (the schema table, scenarios/schema.cpp; docs/reliability.md).
// Each is far above any real cluster or model, and every default, preset and example is inside.
inline constexpr double kMaxNicGbps = 1e5;                  // NIC and switch port: 100 Tb/s
inline constexpr double kMaxMtuBytes = 65536;               // largest IP/RoCE packet is 64 KiB
inline constexpr double kMaxControlTime_us = 1e6;           // RTTs and CC timers: 1 s
inline constexpr std::int64_t kMaxClusterGpus = 1 << 26;    // 67,108,864 GPUs (as kMaxRanks)
inline constexpr std::int64_t kMaxModelLayers = 10000;      // largest real models: ~200 layers
inline constexpr std::int64_t kMaxModelWidth = 1000000;     // hidden and ffn_hidden
inline constexpr std::int64_t kMaxModelVocab = 100000000;   // real: 32K to 256K tokens
inline constexpr std::int64_t kMaxModelSeqLen = 1 << 24;    // 16,777,216 tokens

// ---- work ---------------------------------------------------------------------------------------
// Beyond these estimates a command is refused unless `--force` is given (exit 2, with the estimate
// and the limit in the message). docs/reliability.md gives the measurements behind them.
// `topo`: endpoints (GPUs or fat-tree hosts) of the graph it builds.
inline constexpr std::int64_t kMaxTopoEndpoints = std::int64_t{1} << 18;  // 262,144
// `topo --traffic`: routed flows (connections x QPs per connection).
inline constexpr std::int64_t kMaxTopoFlows = std::int64_t{1} << 24;  // 16,777,216
// `run --fidelity flow`: GPUs x QPs per connection (the number of concurrent flows scales with it).
inline constexpr std::int64_t kMaxFlowWork = std::int64_t{1} << 16;  // 65,536
// `run --fidelity packet`: every byte crosses every hop as packets (about 20 M events/s), so a
// whole iteration is minutes at a few hundred GPUs (docs/performance.md, "Packet level").
inline constexpr std::int64_t kMaxPacketWork = 1024;
// `execute`: task instances one process launches per iteration (its ranks x each rank's tasks);
// the launch plans, the fake backend's call records and the measured spans grow with it.
inline constexpr std::int64_t kMaxExecuteWork = std::int64_t{1} << 22;  // 4,194,304
// A fat tree's k, even with --force (k^3/4 hosts: k = 256 is 4.2 million).
inline constexpr int kMaxFatTreeK = 256;

}  // namespace trainsim::limits
